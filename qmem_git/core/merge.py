"""The entry-aware three-way merge that sync uses when two machines changed memory apart.

Pure: file maps (relative path -> text) for the merge base, our side and their side go in, the
merged file map and a list of what was reconciled come out. The rules (issue 6, spec §4.3):

- a path whose two sides agree, or that only one side changed, takes that side (a file deleted
  on one side and untouched on the other is deleted);
- a file changed on both sides is merged per entry, entries keyed by normalised summary: added
  entries are kept (union), an entry deleted on one side and unchanged on the other is deleted,
  deleted on one side but changed on the other is kept (an edit wins over a forget), changed on
  both sides is merged field by field (summary: the newer side's; why / how to apply: spec §4.3,
  the existing (older) detail is kept and a missing one filled);
- a file deleted on one side keeps, from the other side, the entries it changed or added, or
  the whole document when its frontmatter changed (an edit is never lost to a forget);
- frontmatter fields merge the same way; a field changed on both sides takes the newer side's
  value and the other is reported;
- the same new path with different content on both sides keeps both: the newer one moves to the
  next free ``-N`` name; a file that cannot be merged per entry is kept twice the same way;
- two paths a case-insensitive or normalising disk sees as one (``user/Notes.md`` from one side,
  ``user/notes.md`` from the other) are never both kept: the later spelling in sorted order
  (one the base already had keeps its name) moves to the next free ``-N`` name;
- MEMORY.md is never merged (the caller regenerates it), unless it is the agent's own index
  (Claude Code's, ``index_by_lines``): then it merges by lines (:func:`merge_lines`).
  Nothing ever writes conflict markers.

"Newer" compares the time each side last changed the file (the caller reads it from history);
equal times fall back to comparing the texts, so the result does not depend on which machine
merges.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from qmem_git.core.codec import parse_document, render_with_frontmatter, split_frontmatter
from qmem_git.core.entries import parse_entries, render_entries
from qmem_git.core.model import INDEX_NAME, Entry
from qmem_git.core.names import fold_name
from qmem_git.core.text import normalize_space

_FIELD = re.compile(r"^([^\s#:-][^:]*):")
MAX_NUMBERED_SUFFIX = 1000


@dataclass(frozen=True)
class Reconciled:
    """One decision the merge had to make; ``kind`` is a stable key, ``detail`` a sentence.

    The kinds: ``entries-merged`` (both sides changed the file), ``entry-both-changed`` (one
    entry's fields merged, spec §4.3), ``edit-kept-over-delete`` (a deleted entry or file the
    other side changed is kept), ``field-both-changed`` (the newer frontmatter value kept) and
    ``kept-both`` (one path written differently: the newer copy got the next ``-N`` name).
    """

    path: str
    kind: str
    detail: str

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "kind": self.kind, "detail": self.detail}


@dataclass(frozen=True)
class MergeResult:
    """``files``: the merged map (every path of the inputs that survives, MEMORY.md excluded)."""

    files: dict[str, str]
    reconciled: tuple[Reconciled, ...] = ()

    def changes_against(self, side: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
        """(writes, deletes) that turn ``side`` into the merged map."""
        writes = {p: t for p, t in self.files.items() if side.get(p) != t}
        deletes = sorted(p for p in side if p not in self.files and p != INDEX_NAME)
        return writes, deletes


@dataclass
class _Decision:
    text: str | None
    notes: list[Reconciled] = field(default_factory=list)
    second: str | None = None  # text that needs a free ``-N`` path of its own


def merge_trees(
    base: Mapping[str, str],
    ours: Mapping[str, str],
    theirs: Mapping[str, str],
    *,
    ours_times: Mapping[str, int] | None = None,
    theirs_times: Mapping[str, int] | None = None,
    reserved: Collection[str] = (),
    index_by_lines: bool = False,
) -> MergeResult:
    """Merge two descendants of ``base``; ``reserved`` paths exist outside the given maps.
    ``index_by_lines``: MEMORY.md is the agent's own (Claude Code's), merged by lines."""
    files: dict[str, str] = {}
    notes: list[Reconciled] = []
    if index_by_lines:
        notes += _merge_index(base, ours, theirs, files)
    seconds: list[tuple[str, str]] = []
    for path in sorted({*base, *ours, *theirs} - {INDEX_NAME}):
        theirs_newer = _theirs_newer(
            (ours_times or {}).get(path, 0),
            (theirs_times or {}).get(path, 0),
            ours.get(path),
            theirs.get(path),
        )
        decision = merge_file(path, base.get(path), ours.get(path), theirs.get(path), theirs_newer)
        if decision.text is not None:
            files[path] = decision.text
        notes += decision.notes
        if decision.second is not None:
            seconds.append((path, decision.second))
    taken = {fold_name(p) for p in (*reserved, *base, *ours, *theirs, *files)}
    for path, text in seconds:
        new_path = free_path(path, taken)
        taken.add(fold_name(new_path))
        files[new_path] = text
        notes.append(
            Reconciled(path, "kept-both", f"both sides wrote {path}; the newer copy is {new_path}")
        )
    notes += _separate_spellings(files, reserved, base)
    return MergeResult(files, tuple(notes))


def _separate_spellings(
    files: dict[str, str], reserved: Collection[str], base: Mapping[str, str]
) -> list[Reconciled]:
    """Rename (in ``files``) what a case-insensitive disk would merge with another path: two
    machines wrote ``user/Notes.md`` and ``user/notes.md``. Nothing is lost: the later
    spelling moves to a free ``-N`` name (or into the kept folder's spelling)."""
    established = {*reserved, *(p for p in files if p in base)}
    renames = clash_renames([*reserved, *files], established)
    notes = []
    for old, new in sorted(renames.items()):
        if old in files:
            files[new] = files.pop(old)
            detail = f"{old} differs from another name only in letter case; kept as {new}"
            notes.append(Reconciled(old, "renamed-case-clash", detail))
    return notes


def clash_renames(paths: Collection[str], established: Collection[str] = ()) -> dict[str, str]:
    """old path -> new path for the ``paths`` a case-insensitive, normalising disk would see as
    one (``fold_name``), so that none clash any more.

    ``established`` paths keep their spelling first, then the rest in sorted order (the same
    answer on every machine). A later spelling of a folder moves into the kept spelling; a file
    name taken that way gets the next free ``-N`` name.
    """
    folders: dict[str, str] = {}  # folded folder path -> the spelling kept
    taken: set[str] = set()  # folded file paths
    renames: dict[str, str] = {}
    for path in sorted(paths, key=lambda p: (p not in established, p)):
        *dirs, name = path.split("/")
        kept = ""
        for folder in dirs:
            spelled = f"{kept}/{folder}" if kept else folder
            kept = folders.setdefault(fold_name(spelled), spelled)
        candidate = f"{kept}/{name}" if kept else name
        if fold_name(candidate) in taken or fold_name(candidate) in folders:
            candidate = free_path(candidate, taken | set(folders))
        taken.add(fold_name(candidate))
        if candidate != path:
            renames[path] = candidate
    return renames


def _merge_index(
    base: Mapping[str, str],
    ours: Mapping[str, str],
    theirs: Mapping[str, str],
    files: dict[str, str],
) -> list[Reconciled]:
    """The agent's MEMORY.md into ``files``: the side that changed it, else merged by lines (a
    side that deleted it loses to one that changed it, as any file does)."""
    b, o, t = base.get(INDEX_NAME), ours.get(INDEX_NAME), theirs.get(INDEX_NAME)
    notes = []
    if o == t or t == b:
        text = o
    elif o == b:
        text = t
    elif o is None or t is None:
        text = o if t is None else t
    else:
        text = merge_lines(b or "", o, t)
        detail = f"{INDEX_NAME} was changed on both sides; every line either side added kept"
        notes.append(Reconciled(INDEX_NAME, "lines-merged", detail))
    if text is not None:
        files[INDEX_NAME] = text
    return notes


def merge_lines(base: str, ours: str, theirs: str) -> str:
    """Three-way merge by whole lines, without conflicts: our lines in our order, then the
    lines only their side added, in their order. A line is dropped only where one side deleted
    it (a base line that side no longer has); a line both sides added is kept once."""
    b, o, t = Counter(_lines(base)), Counter(_lines(ours)), Counter(_lines(theirs))
    # per line: the base copies both sides kept, plus what each side added (shared once)
    keep = {line: min(b[line], o[line], t[line]) + max(0, o[line] - b[line]) for line in o}
    extra = {line: max(0, t[line] - max(b[line], o[line])) for line in t}
    merged = _take(_lines(ours), keep) + _take(_lines(theirs), extra)
    ends = ours.endswith("\n") or (not ours and theirs.endswith("\n"))
    return "\n".join(merged) + ("\n" if merged and ends else "")


def _take(lines: list[str], quota: dict[str, int]) -> list[str]:
    """``lines`` in order, each kept while its quota lasts."""
    taken = []
    for line in lines:
        if quota[line] > 0:
            quota[line] -= 1
            taken.append(line)
    return taken


def _lines(text: str) -> list[str]:
    """Lines without their ``\\n`` (a ``\\r`` stays part of its line, so bytes survive)."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def _theirs_newer(ours_time: int, theirs_time: int, ours: str | None, theirs: str | None) -> bool:
    if ours_time != theirs_time:
        return theirs_time > ours_time
    return (theirs or "") > (ours or "")


def free_path(path: str, taken: Collection[str]) -> str:
    """``dir/name-N.md`` for the smallest N >= 2 whose case-folded form is not ``taken``."""
    stem = path[: -len(".md")] if path.endswith(".md") else path
    for number in range(2, MAX_NUMBERED_SUFFIX + 2):
        candidate = f"{stem}-{number}.md"
        if fold_name(candidate) not in taken:
            return candidate
    raise ValueError(f"no free name next to {path}")  # pragma: no cover - 1000 copies


def merge_file(
    path: str, base: str | None, ours: str | None, theirs: str | None, theirs_newer: bool
) -> _Decision:
    """One path: take the side that changed, else merge per entry, else keep both copies."""
    if ours == theirs:
        return _Decision(ours)
    if ours == base:
        return _Decision(theirs)
    if theirs == base:
        return _Decision(ours)
    older, newer = (ours, theirs) if theirs_newer else (theirs, ours)
    if base is None:
        assert older is not None and newer is not None
        return _Decision(older, second=newer)
    merged = _merge_documents(path, base, ours, theirs, theirs_newer)
    if merged is not None:
        return merged
    if ours is None or theirs is None:
        kept = ours if theirs is None else theirs
        note = Reconciled(path, "edit-kept-over-delete", f"{path} was changed on one side")
        return _Decision(kept, [note])
    assert older is not None and newer is not None
    return _Decision(older, second=newer)


# --- documents --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Doc:
    fields: list[tuple[str, str]]
    entries: list[Entry]


def _parse(path: str, text: str | None) -> _Doc | None:
    """Frontmatter fields and entries; None for text the merge must not rewrite.

    A body is only merged when it renders back to itself: the merge re-renders bodies, and
    anything that rendering would change (headings, odd formatting) must not silently go.
    """
    if text is None:
        return _Doc([], [])
    split = split_frontmatter(text)
    if split is None or parse_document(text, path, 0.0) is None:
        return None
    entries = parse_entries(split.body)
    if render_entries(entries) != split.body.strip():
        return None
    return _Doc(_split_fields(split.frontmatter), entries)


def _split_fields(frontmatter: str) -> list[tuple[str, str]]:
    """``key: value`` lines with their continuation lines, in order; keys unique (first wins)."""
    fields: list[tuple[str, str]] = []
    for line in frontmatter.split("\n"):
        match = _FIELD.match(line)
        if match or not fields:
            fields.append((match.group(1) if match else "", line))
        else:
            key, block = fields[-1]
            fields[-1] = (key, block + "\n" + line)
    seen: set[str] = set()
    unique: list[tuple[str, str]] = []
    for key, block in fields:
        name = key if key not in seen else f"{key}\0{len(unique)}"
        seen.add(key)
        unique.append((name, block))
    return unique


def _merge_documents(
    path: str, base: str, ours: str | None, theirs: str | None, theirs_newer: bool
) -> _Decision | None:
    docs = [_parse(path, base), _parse(path, ours), _parse(path, theirs)]
    if any(doc is None for doc in docs):
        return None
    b, o, t = docs
    assert b is not None and o is not None and t is not None
    notes: list[Reconciled] = []
    if ours is None or theirs is None:
        kept, kept_doc = (theirs, t) if ours is None else (ours, o)
        if kept_doc.fields != b.fields:
            # the frontmatter was edited on the side that kept the file: that edit is about
            # the whole memory, so the whole document stays (an edit wins over a forget)
            detail = f"{path}: kept (frontmatter changed on one side, deleted on the other)"
            return _Decision(kept, [Reconciled(path, "edit-kept-over-delete", detail)])
        fields = kept_doc.fields
    else:
        fields = _merge_fields(path, b.fields, o.fields, t.fields, theirs_newer, notes)
    entries = _merge_entries(path, b.entries, o.entries, t.entries, theirs_newer, notes)
    if not entries:
        return _Decision(None, notes)
    body = render_entries(entries)
    if parse_entries(body) != entries:
        return None
    frontmatter = "\n".join(block for _, block in fields)
    text = render_with_frontmatter(frontmatter, body)
    if parse_document(text, path, 0.0) is None:
        return None
    if ours is not None and theirs is not None:
        notes.insert(0, Reconciled(path, "entries-merged", f"{path} was changed on both sides"))
    return _Decision(text, notes)


def _merge_fields(
    path: str,
    base: list[tuple[str, str]],
    ours: list[tuple[str, str]],
    theirs: list[tuple[str, str]],
    theirs_newer: bool,
    notes: list[Reconciled],
) -> list[tuple[str, str]]:
    """Per frontmatter field: the changed side wins; both changed: the newer side's value."""
    b, o, t = dict(base), dict(ours), dict(theirs)
    order = [key for key, _ in ours] + [key for key, _ in theirs if key not in o]
    merged: list[tuple[str, str]] = []
    for key in order:
        value = _three_way(b.get(key), o.get(key), t.get(key))
        if value is _CONFLICT:
            kept, other = (t.get(key), o.get(key)) if theirs_newer else (o.get(key), t.get(key))
            name = key.split("\0", 1)[0] or "(text)"
            detail = f"{path}: '{name}' kept {_show(kept)}, dropped {_show(other)}"
            notes.append(Reconciled(path, "field-both-changed", detail))
            value = kept
        if isinstance(value, str):
            merged.append((key, value))
    return merged


# --- entries ----------------------------------------------------------------------------------


def entry_key(entry: Entry) -> str:
    """Entries are matched across sides by their summary, whitespace- and case-normalised."""
    return normalize_space(entry.summary).casefold()


def _keyed(entries: list[Entry]) -> dict[tuple[str, int], Entry]:
    """Key each entry by (summary key, occurrence) so duplicate summaries stay distinct."""
    counts: dict[str, int] = {}
    keyed: dict[tuple[str, int], Entry] = {}
    for entry in entries:
        key = entry_key(entry)
        counts[key] = counts.get(key, 0) + 1
        keyed[(key, counts[key])] = entry
    return keyed


def _merge_entries(
    path: str,
    base: list[Entry],
    ours: list[Entry],
    theirs: list[Entry],
    theirs_newer: bool,
    notes: list[Reconciled],
) -> list[Entry]:
    """Our entries in our order, then entries only they have, in their order."""
    b, o, t = _keyed(base), _keyed(ours), _keyed(theirs)
    merged: list[Entry] = []
    for key in [*o, *(key for key in t if key not in o)]:
        entry = _merge_entry(path, b.get(key), o.get(key), t.get(key), theirs_newer, notes)
        if entry is not None:
            merged.append(entry)
    return merged


def _merge_entry(
    path: str,
    base: Entry | None,
    ours: Entry | None,
    theirs: Entry | None,
    theirs_newer: bool,
    notes: list[Reconciled],
) -> Entry | None:
    if ours == theirs or theirs == base:
        return ours
    if ours == base:
        return theirs
    if ours is None or theirs is None:
        kept = ours or theirs
        assert kept is not None
        detail = f"{path}: kept '{_clip(kept.summary)}' (changed on one side, deleted on the other)"
        notes.append(Reconciled(path, "edit-kept-over-delete", detail))
        return kept
    older, newer = (ours, theirs) if theirs_newer else (theirs, ours)
    b = base or Entry("")
    merged = Entry(
        summary=_resolve(b.summary, ours.summary, theirs.summary, newer.summary),
        why=_resolve_detail(b.why, ours.why, theirs.why, older.why, newer.why),
        how_to_apply=_resolve_detail(
            b.how_to_apply,
            ours.how_to_apply,
            theirs.how_to_apply,
            older.how_to_apply,
            newer.how_to_apply,
        ),
    )
    detail = f"{path}: '{_clip(merged.summary)}' changed on both sides; details merged"
    notes.append(Reconciled(path, "entry-both-changed", detail))
    return merged


class _Conflict:
    """Marker for a value both sides changed differently."""


_CONFLICT = _Conflict()


def _three_way(base: str | None, ours: str | None, theirs: str | None) -> str | _Conflict | None:
    if ours == theirs or theirs == base:
        return ours
    if ours == base:
        return theirs
    return _CONFLICT


def _resolve(base: str, ours: str, theirs: str, newer: str) -> str:
    value = _three_way(base, ours, theirs)
    return newer if isinstance(value, _Conflict) or value is None else value


def _resolve_detail(
    base: str | None, ours: str | None, theirs: str | None, older: str | None, newer: str | None
) -> str | None:
    """Spec §4.3 on a real conflict: the existing (older) detail stays, a missing one is filled."""
    value = _three_way(base, ours, theirs)
    if isinstance(value, _Conflict):
        return older or newer
    return value


def _clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _show(block: str | None) -> str:
    if block is None:
        return "(absent)"
    return repr(_clip(normalize_space(block.split(":", 1)[-1]), 40))
