"""The entry-aware three-way merge (issue 6 rules, spec §4.3): a table, then properties."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qmem_git.core.codec import parse_document, split_frontmatter
from qmem_git.core.entries import parse_entries, render_entries
from qmem_git.core.merge import clash_renames, entry_key, free_path, merge_trees
from qmem_git.core.model import Entry
from qmem_git.core.names import fold_name

P = "user/prefs.md"


def doc(*entries: str | Entry, name: str = "Prefs", kind: str = "user", extra: str = "") -> str:
    items = [e if isinstance(e, Entry) else Entry(e) for e in entries]
    fm = f"name: {name}\ndescription: {name}\ntype: {kind}" + (f"\n{extra}" if extra else "")
    return f"---\n{fm}\n---\n\n{render_entries(items)}\n"


def entries_of(text: str) -> list[Entry]:
    split = split_frontmatter(text)
    assert split is not None
    return parse_entries(split.body)


def summaries(text: str) -> list[str]:
    return [e.summary for e in entries_of(text)]


def field(text: str, key: str) -> str | None:
    split = split_frontmatter(text)
    assert split is not None
    for line in split.frontmatter.split("\n"):
        if line.startswith(key + ":"):
            return line.split(":", 1)[1].strip()
    return None


# --- file-level table ---------------------------------------------------------------------------

A, B, C = doc("alpha fact"), doc("beta fact"), doc("gamma fact")

FILE_CASES = [
    # (name, base, ours, theirs, expected text at P or None)
    ("both unchanged", A, A, A, A),
    ("only ours changed", A, B, A, B),
    ("only theirs changed", A, A, B, B),
    ("both made the same change", A, B, B, B),
    ("added on one side", None, A, None, A),
    ("added on the other side", None, None, A, A),
    ("added identically on both", None, A, A, A),
    ("deleted on ours, untouched on theirs", A, None, A, None),
    ("deleted on theirs, untouched on ours", A, A, None, None),
    ("deleted on both", A, None, None, None),
]


@pytest.mark.parametrize(("name", "base", "ours", "theirs", "expected"), FILE_CASES)
def test_file_level_rules(
    name: str, base: str | None, ours: str | None, theirs: str | None, expected: str | None
) -> None:
    maps = [{P: t} if t is not None else {} for t in (base, ours, theirs)]
    result = merge_trees(*maps)
    assert result.files.get(P) == expected, name
    assert result.reconciled == ()


def test_same_new_path_different_content_keeps_both_newer_gets_next_free_slug() -> None:
    result = merge_trees(
        {},
        {P: A},
        {P: B},
        ours_times={P: 10},
        theirs_times={P: 20},
        reserved={"user/prefs-2.md"},
    )
    assert result.files == {P: A, "user/prefs-3.md": B}
    assert [(n.kind, n.path) for n in result.reconciled] == [("kept-both", P)]


def test_same_new_path_is_symmetric_in_sides() -> None:
    one = merge_trees({}, {P: A}, {P: B}, ours_times={P: 10}, theirs_times={P: 20})
    two = merge_trees({}, {P: B}, {P: A}, ours_times={P: 20}, theirs_times={P: 10})
    assert one.files == two.files


def test_free_path_skips_case_folded_names() -> None:
    assert free_path("user/a.md", {"user/a-2.md"}) == "user/a-3.md"
    assert free_path("user/a.md", set()) == "user/a-2.md"


# --- entry-level table --------------------------------------------------------------------------

E1, E2, E3 = Entry("Use pnpm for installs"), Entry("Prefer small PRs"), Entry("Run ruff first")

ENTRY_CASES = [
    # (name, base, ours, theirs, expected summaries in order)
    ("union of additions", [E1], [E1, E2], [E1, E3], [E1.summary, E2.summary, E3.summary]),
    ("delete vs unchanged deletes", [E1, E2], [E1], [E1, E2, E3], [E1.summary, E3.summary]),
    ("unchanged vs delete deletes", [E1, E2], [E1, E2, E3], [E2], [E2.summary, E3.summary]),
    (
        "delete vs changed keeps the edit",
        [E1, E2],
        [E1, E3],
        [E1, Entry(E2.summary, why="CI is slow"), E3],
        [E1.summary, E3.summary, E2.summary],
    ),
    ("both delete", [E1, E2], [E1, E3], [E1], [E1.summary, E3.summary]),
]


@pytest.mark.parametrize(("name", "base", "ours", "theirs", "expected"), ENTRY_CASES)
def test_entry_level_rules(
    name: str,
    base: list[Entry],
    ours: list[Entry],
    theirs: list[Entry],
    expected: list[str],
) -> None:
    result = merge_trees({P: doc(*base)}, {P: doc(*ours)}, {P: doc(*theirs)})
    assert summaries(result.files[P]) == expected, name
    assert result.reconciled[0].kind == "entries-merged"


def test_edit_wins_over_forget_is_reported() -> None:
    result = merge_trees(
        {P: doc(E1, E2)}, {P: doc(E1)}, {P: doc(E1, Entry(E2.summary, why="w"), E3)}
    )
    kinds = [n.kind for n in result.reconciled]
    assert "edit-kept-over-delete" in kinds
    assert Entry(E2.summary, why="w") in entries_of(result.files[P])


def test_whole_file_forget_vs_edit_keeps_only_the_edited_and_new_entries() -> None:
    base = {P: doc(E1, E2)}
    theirs = {P: doc(E1, Entry(E2.summary, how_to_apply="always"), E3)}
    result = merge_trees(base, {}, theirs)
    assert summaries(result.files[P]) == [E2.summary, E3.summary]


@pytest.mark.parametrize("deleted_on", ["ours", "theirs"])
def test_frontmatter_edit_wins_over_whole_file_forget(deleted_on: str) -> None:
    """Only the description changed on the side that kept the file: the memory stays whole."""
    base = {P: doc(E1, E2, name="Prefs")}
    edited = {P: doc(E1, E2, name="Prefs", extra="keywords: editors")}
    sides = ({}, edited) if deleted_on == "ours" else (edited, {})
    result = merge_trees(base, *sides)
    assert result.files == edited
    assert [(n.kind, n.path) for n in result.reconciled] == [("edit-kept-over-delete", P)]
    assert "frontmatter changed" in result.reconciled[0].detail


def test_description_edit_wins_over_forget_of_a_one_entry_memory() -> None:
    base = {P: doc(E1, name="Dark themes")}
    theirs = {
        P: doc(E1, name="Dark themes").replace(
            "description: Dark themes", "description: Dark theme everywhere, the terminal too"
        )
    }
    result = merge_trees(base, {}, theirs)
    assert result.files == theirs
    assert field(result.files[P], "description") == "Dark theme everywhere, the terminal too"


def test_whole_file_forget_still_wins_over_an_untouched_frontmatter() -> None:
    """Same frontmatter, an entry edited: only the edited entry survives (unchanged rule)."""
    base = {P: doc(E1, E2)}
    theirs = {P: doc(E1, Entry(E2.summary, why="new reason"))}
    result = merge_trees(base, {}, theirs)
    assert entries_of(result.files[P]) == [Entry(E2.summary, why="new reason")]


def test_file_whose_entries_were_all_forgotten_on_both_sides_is_deleted() -> None:
    result = merge_trees({P: doc(E1, E2)}, {P: doc(E1)}, {P: doc(E2)})
    assert P not in result.files


def test_why_how_merge_per_spec_4_3_older_detail_kept_missing_filled() -> None:
    base = {P: doc(E1)}
    ours = {P: doc(Entry(E1.summary, why="ours why"))}
    theirs = {P: doc(Entry(E1.summary, why="theirs why", how_to_apply="theirs how"))}
    result = merge_trees(base, ours, theirs, ours_times={P: 1}, theirs_times={P: 2})
    assert entries_of(result.files[P]) == [Entry(E1.summary, "ours why", "theirs how")]
    assert "entry-both-changed" in [n.kind for n in result.reconciled]


def test_summary_respelled_on_both_sides_takes_the_newer_spelling() -> None:
    base = {P: doc(Entry("use pnpm for installs"))}
    ours = {P: doc(Entry("Use pnpm for installs"))}
    theirs = {P: doc(Entry("Use PNPM for installs"))}
    newer_theirs = merge_trees(base, ours, theirs, ours_times={P: 1}, theirs_times={P: 2})
    newer_ours = merge_trees(base, ours, theirs, ours_times={P: 3}, theirs_times={P: 2})
    assert summaries(newer_theirs.files[P]) == ["Use PNPM for installs"]
    assert summaries(newer_ours.files[P]) == ["Use pnpm for installs"]


def test_frontmatter_field_changed_on_one_side_takes_that_change() -> None:
    base = {P: doc(E1, name="Old")}
    ours = {P: doc(E1, E2, name="Old")}
    theirs = {P: doc(E1, name="New title")}
    merged = merge_trees(base, ours, theirs).files[P]
    assert field(merged, "name") == "New title"
    assert summaries(merged) == [E1.summary, E2.summary]


def test_frontmatter_field_changed_on_both_takes_newer_and_reports_other() -> None:
    base = {P: doc(E1, name="Old")}
    ours = {P: doc(E1, E2, name="Ours")}
    theirs = {P: doc(E1, E3, name="Theirs")}
    result = merge_trees(base, ours, theirs, ours_times={P: 5}, theirs_times={P: 9})
    assert field(result.files[P], "name") == "Theirs"
    notes = [n for n in result.reconciled if n.kind == "field-both-changed"]
    assert notes and "Ours" in notes[0].detail


def test_frontmatter_field_added_on_one_side_and_deleted_field() -> None:
    base = {P: doc(E1, extra="keywords: a")}
    ours = {P: doc(E1, E2)}  # dropped keywords
    theirs = {P: doc(E1, extra="keywords: a\nsource: cli")}
    merged = merge_trees(base, ours, theirs).files[P]
    assert field(merged, "keywords") is None
    assert field(merged, "source") == "cli"


def test_unmergeable_bodies_keep_both_copies() -> None:
    weird = "---\nname: X\ndescription: X\ntype: user\n---\n\n# Heading\n\n- odd bullet\n"
    result = merge_trees({P: A}, {P: weird}, {P: B}, ours_times={P: 1}, theirs_times={P: 2})
    assert result.files[P] == weird and result.files["user/prefs-2.md"] == B
    assert [n.kind for n in result.reconciled] == ["kept-both"]


def test_unparsable_edit_wins_over_delete() -> None:
    weird = "---\nname: X\ndescription: X\ntype: user\n---\n\n# Heading\n\n- odd\n"
    result = merge_trees({P: A}, {}, {P: weird})
    assert result.files == {P: weird}
    assert [n.kind for n in result.reconciled] == ["edit-kept-over-delete"]


def test_memory_index_is_never_merged() -> None:
    result = merge_trees({"MEMORY.md": "a"}, {"MEMORY.md": "b"}, {"MEMORY.md": "c"})
    assert result.files == {}


def test_changes_against_lists_writes_and_deletes() -> None:
    result = merge_trees({P: A, "user/x.md": B}, {P: A}, {P: C, "user/x.md": B})
    writes, deletes = result.changes_against({P: A, "user/old.md": B})
    assert writes == {P: C}
    assert deletes == ["user/old.md"]


def test_duplicate_summaries_in_one_file_stay_distinct() -> None:
    base = {P: doc(E1, E1)}
    result = merge_trees(base, {P: doc(E1, E1, E2)}, {P: doc(E1)})
    assert summaries(result.files[P]) == [E1.summary, E2.summary]


# --- properties ---------------------------------------------------------------------------------

SUMMARIES = [f"Durable fact number {n} about the build" for n in range(8)]
DETAILS = st.sampled_from([None, "because ci", "team rule", "see wiki"])
entry_strategy = st.builds(Entry, st.sampled_from(SUMMARIES), DETAILS, DETAILS)


def unique(entries: list[Entry]) -> list[Entry]:
    seen: dict[str, Entry] = {}
    for entry in entries:
        seen.setdefault(entry_key(entry), entry)
    return list(seen.values())


@st.composite
def side(draw: st.DrawFn, base: list[Entry]) -> list[Entry]:
    """A descendant of base: some entries dropped, some details changed, some added."""
    kept = [e for e in base if draw(st.booleans())]
    changed = [
        Entry(e.summary, draw(DETAILS), e.how_to_apply) if draw(st.booleans()) else e for e in kept
    ]
    added = draw(st.lists(entry_strategy, max_size=3))
    return unique(changed + added)


@st.composite
def scenario(draw: st.DrawFn) -> tuple[list[Entry], list[Entry], list[Entry], int, int]:
    base = unique(draw(st.lists(entry_strategy, max_size=5)))
    return (
        base,
        draw(side(base)),
        draw(side(base)),
        draw(st.integers(0, 3)),
        draw(st.integers(0, 3)),
    )


def maps(entries: list[Entry]) -> dict[str, str]:
    return {P: doc(*entries)} if entries else {}


def all_entries(files: dict[str, str]) -> dict[str, Entry]:
    found: dict[str, Entry] = {}
    for text in files.values():
        for entry in entries_of(text):
            found[entry_key(entry)] = entry
    return found


@settings(max_examples=300, deadline=None)
@given(scenario())
def test_property_no_memory_is_lost(case: tuple[list[Entry], ...]) -> None:
    base, ours, theirs, t_ours, t_theirs = case
    result = merge_trees(
        maps(base), maps(ours), maps(theirs), ours_times={P: t_ours}, theirs_times={P: t_theirs}
    )
    merged = all_entries(result.files)
    b = {entry_key(e): e for e in base}
    for mine, other in ((ours, theirs), (theirs, ours)):
        other_keys = {entry_key(e) for e in other}
        for entry in mine:
            key = entry_key(entry)
            deleted_by_other = key in b and key not in other_keys and b[key] == entry
            assert (key in merged) != deleted_by_other, (entry, result.files)
    for key in b:
        in_ours = key in {entry_key(e) for e in ours}
        in_theirs = key in {entry_key(e) for e in theirs}
        if not in_ours and not in_theirs:
            assert key not in merged


@settings(max_examples=200, deadline=None)
@given(scenario())
def test_property_symmetric_output_parses_and_has_no_conflict_markers(
    case: tuple[list[Entry], ...],
) -> None:
    base, ours, theirs, t_ours, t_theirs = case
    one = merge_trees(
        maps(base), maps(ours), maps(theirs), ours_times={P: t_ours}, theirs_times={P: t_theirs}
    )
    two = merge_trees(
        maps(base), maps(theirs), maps(ours), ours_times={P: t_theirs}, theirs_times={P: t_ours}
    )
    assert all_entries(one.files) == all_entries(two.files)
    for path, text in one.files.items():
        assert parse_document(text, path, 0.0) is not None
        assert not any(
            line.startswith(("<<<<<<<", "=======", ">>>>>>>")) for line in text.split("\n")
        )


@settings(max_examples=200, deadline=None)
@given(scenario())
def test_property_one_sided_merges_are_identities(case: tuple[list[Entry], ...]) -> None:
    base, ours, theirs, _, _ = case
    assert merge_trees(maps(base), maps(ours), maps(base)).files == maps(ours)
    assert merge_trees(maps(base), maps(base), maps(theirs)).files == maps(theirs)
    assert merge_trees(maps(base), maps(ours), maps(ours)).files == maps(ours)


# --- names that differ only in letter case or normalisation (issue 21, item 4) ---


def test_two_spellings_of_one_name_are_both_kept_under_different_names() -> None:
    ours = {"user/notes.md": doc("Ours: lower case")}
    theirs = {"user/Notes.md": doc("Theirs: upper case")}
    one = merge_trees({}, ours, theirs)
    other = merge_trees({}, theirs, ours)  # the machine that merges does not matter
    assert one.files == other.files
    assert sorted(one.files) == ["user/Notes.md", "user/notes-2.md"]
    assert one.files["user/notes-2.md"] == ours["user/notes.md"]
    assert [n.kind for n in one.reconciled] == ["renamed-case-clash"]


def test_the_spelling_the_base_had_keeps_its_name() -> None:
    base = {"user/notes.md": doc("Base")}
    ours = {"user/notes.md": doc("Base", "Ours edits")}
    theirs = {**base, "user/NOTES.md": doc("Theirs adds a new spelling")}
    merged = merge_trees(base, ours, theirs, reserved=())
    assert sorted(merged.files) == ["user/NOTES-2.md", "user/notes.md"]
    assert merged.files["user/notes.md"] == ours["user/notes.md"]


def test_nfc_and_nfd_spellings_and_folder_spellings_are_separated() -> None:
    nfc, nfd = "user/caf\u00e9.md", "user/cafe\u0301.md"
    merged = merge_trees({}, {nfc: doc("Composed")}, {nfd: doc("Decomposed")})
    assert len(merged.files) == 2
    folded = {fold_name(p) for p in merged.files}
    assert len(folded) == 2
    folders = clash_renames(["user/Work/a.md", "user/work/b.md", "user/work/a.md"])
    assert folders == {"user/work/a.md": "user/Work/a-2.md", "user/work/b.md": "user/Work/b.md"}
    assert clash_renames(["user/a.md", "user/b.md"]) == {}


# --- an agent's own MEMORY.md (Claude Code's), merged by lines -------------------------------

INDEX_BASE = "# Index\n- [A](a.md) — a\n- [B](b.md) — b\n"


@pytest.mark.parametrize(
    ("ours", "theirs", "merged"),
    [
        # both added: ours first, then theirs' additions in their order
        (
            INDEX_BASE + "- [C](c.md)\n",
            INDEX_BASE + "- [D](d.md)\n- [E](e.md)\n",
            INDEX_BASE + "- [C](c.md)\n- [D](d.md)\n- [E](e.md)\n",
        ),
        # one side deleted a line the other left alone: dropped
        (
            "# Index\n- [B](b.md) — b\n- [C](c.md)\n",
            INDEX_BASE + "- [D](d.md)\n",
            "# Index\n- [B](b.md) — b\n- [C](c.md)\n- [D](d.md)\n",
        ),
        (
            INDEX_BASE + "- [C](c.md)\n",
            "# Index\n- [A](a.md) — a\n- [D](d.md)\n",
            "# Index\n- [A](a.md) — a\n- [C](c.md)\n- [D](d.md)\n",
        ),
        # a line both added is kept once; a line changed on one side: the new one kept
        (
            INDEX_BASE + "- [C](c.md)\n",
            "# Index\n- [A](a.md) — a, edited\n- [B](b.md) — b\n- [C](c.md)\n",
            "# Index\n- [B](b.md) — b\n- [C](c.md)\n- [A](a.md) — a, edited\n",
        ),
        # no trailing newline on our side stays that way; conflict-marker-free by construction
        ("# Index", "# Index\n- [Z](z.md)\n", "# Index\n- [Z](z.md)"),
    ],
)
def test_an_agents_index_merges_by_lines(ours: str, theirs: str, merged: str) -> None:
    from qmem_git.core.merge import merge_lines

    assert merge_lines(INDEX_BASE, ours, theirs) == merged
    result = merge_trees(
        {"MEMORY.md": INDEX_BASE}, {"MEMORY.md": ours}, {"MEMORY.md": theirs}, index_by_lines=True
    )
    assert result.files == {"MEMORY.md": merged}
    assert [note.kind for note in result.reconciled] == ["lines-merged"]


def test_an_agents_index_changed_on_one_side_or_deleted_takes_that_side() -> None:
    new = INDEX_BASE + "- [C](c.md)\n"
    for ours, theirs, kept in [
        (INDEX_BASE, new, new),
        (new, INDEX_BASE, new),
        (None, INDEX_BASE, None),  # deleted here, untouched there: deleted
        (None, new, new),  # deleted here, changed there: the change wins, as for any file
    ]:
        result = merge_trees(
            {"MEMORY.md": INDEX_BASE},
            {} if ours is None else {"MEMORY.md": ours},
            {"MEMORY.md": theirs},
            index_by_lines=True,
        )
        assert result.files.get("MEMORY.md") == kept
        assert result.reconciled == ()
    plain = merge_trees({"MEMORY.md": INDEX_BASE}, {"MEMORY.md": new}, {"MEMORY.md": INDEX_BASE})
    assert plain.files == {}  # Qwen's MEMORY.md is regenerated by the caller, never merged


_LINES = st.lists(st.sampled_from(["# I", "", "- [A](a.md)", "- [B](b.md)", "- [C](c.md)", "x"]))


@settings(max_examples=300, deadline=None)
@given(_LINES, _LINES, _LINES)
def test_a_line_merge_keeps_every_added_line_and_drops_only_deletions(
    base: list[str], ours: list[str], theirs: list[str]
) -> None:
    from collections import Counter

    from qmem_git.core.merge import merge_lines

    def text(lines: list[str]) -> str:
        return "".join(line + "\n" for line in lines)

    merged = merge_lines(text(base), text(ours), text(theirs))
    got, b, o, t = Counter(merged.splitlines()), Counter(base), Counter(ours), Counter(theirs)
    for line in {*b, *o, *t}:
        added = max(o[line] - b[line], t[line] - b[line], 0)
        assert got[line] == min(b[line], o[line], t[line]) + added
    # our lines first, in our order, then their additions, in their order
    split = sum(min(b[x], o[x], t[x]) + max(o[x] - b[x], 0) for x in o)
    lines = merged.splitlines()
    assert _subsequence(lines[:split], ours) and _subsequence(lines[split:], theirs)
    assert all(not line.startswith(("<<<<<<<", ">>>>>>>", "=======")) for line in lines)


def _subsequence(part: list[str], whole: list[str]) -> bool:
    remaining = iter(whole)
    return all(line in remaining for line in part)
