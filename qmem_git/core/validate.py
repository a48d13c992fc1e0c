"""Pure checks for memory files and MEMORY.md: bytes and text in, findings out.

A memory file is read by two parsers: Qwen Code's lenient line-based reader (core.codec) and any
YAML tool a person points at it. Validation makes sure both see the same thing, that nothing in
it is dangerous to parse (tags, alias bombs, huge files), to commit (secrets, conflict markers)
or to inject into a prompt (hidden characters, instructions aimed at the model). The disk side
lives in ops.validate; this module never touches the file system.
"""

from __future__ import annotations

import bisect
import functools
import json
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from qmem_git.core.codec import FENCE, frontmatter_field, parse_document
from qmem_git.core.entries import parse_entries
from qmem_git.core.index import (
    MAX_BYTES,
    MAX_LINE_CHARS,
    MAX_LINES,
    IndexResult,
    index_is_current,
    to_js,
)
from qmem_git.core.index import WARNING as INDEX_WARNING
from qmem_git.core.model import INDEX_NAME, MAX_FILE_BYTES, MEMORY_TYPES
from qmem_git.core.names import LEGACY_TOPIC_FILES, check_memory_layout, check_path_safety
from qmem_git.core.secrets import scan_for_secrets
from qmem_git.core.text import CONFLICT_LINE

if TYPE_CHECKING:
    from frontmatter.default_handlers import YAMLHandler

Severity = Literal["error", "warning", "info"]
Format = Literal["text", "gcc", "json"]

# Stable rule ids (they appear in output, tests and docs; never rename one).
RULES: dict[str, str] = {
    "size-limit": "file is larger than 256 KiB (checked before anything is parsed)",
    "nul-byte": "file contains a NUL byte (binary data)",
    "utf8": "file is not valid UTF-8",
    "bom": "file starts with a UTF-8 byte order mark; Qwen Code needs '---' as the first bytes",
    "frontmatter-missing": "no '---' frontmatter block at the start, or it is not closed or empty",
    "frontmatter-yaml": "frontmatter is not safe, plain YAML (syntax error, tag, anchor/alias, "
    "duplicate key, not a mapping, closing fence not alone on its line)",
    "frontmatter-field": "name, description or type is missing, empty or not plain text",
    "frontmatter-reader": "Qwen Code's line-based reader sees the frontmatter differently than "
    "YAML (quoted or multi-line values)",
    "type-invalid": "type is not one of user, feedback, project, reference",
    "type-folder": "(warning) the type folder and the frontmatter type disagree",
    "body-empty": "the body holds no memory entry",
    "path-unsafe": "path is unsafe on some OS or git host (.., absolute, .git, device name, "
    "dot-file, control or invisible character, trailing dot/space) or outside the memory root",
    "path-layout": "(warning) a memory file that does not end in .md, or is not a regular file",
    "path-collision": "two paths differ only by case or Unicode normalisation",
    "symlink": "a symlink inside the memory tree, or the memory root itself is a symlink",
    "file-unreadable": "file or memory root is missing or cannot be read",
    "secret": "text looks like a credential (spec §14 rules)",
    "conflict-marker": "git conflict marker line (<<<<<<<, =======, >>>>>>>, diff3 base marker)",
    "invisible-unicode": "(warning) invisible characters (tags, bidi controls, zero-width)",
    "prompt-injection": "(warning) text that reads like instructions aimed at the model",
    "index-missing": "MEMORY.md is missing",
    "index-stale": "MEMORY.md differs from the index rebuilt from the memory files",
    "index-limit": "MEMORY.md exceeds 150 chars/line, 200 lines or 25,000 chars, or the limits "
    "leave memories out of the index",
}

MAX_FINDINGS_PER_RULE = 20
INDEX_FILE_FIELDS = ("name", "description", "type")
# What keeps a file out of a commit and out of a push or fetch: safety, not style. A finding of
# any other rule is advice (a warning), as the agent accepts such files (issue 18).
SAFETY_RULES = frozenset(
    {"size-limit", "utf8", "nul-byte", "conflict-marker", "path-unsafe", "symlink", "secret"}
)
# errors that are not about one file's safety: the index and what cannot be read or checked out
_STILL_ERRORS = SAFETY_RULES | {
    "path-collision",
    "file-unreadable",
    "index-missing",
    "index-stale",
    "index-limit",
}


@dataclass(frozen=True)
class Finding:
    """One problem at a 1-based line and column (column counts code points)."""

    path: str
    line: int
    col: int
    severity: Severity
    message: str
    rule: str


class _Lines:
    """Offset -> (line, col) for one text."""

    def __init__(self, text: str) -> None:
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def position(self, offset: int) -> tuple[int, int]:
        index = bisect.bisect_right(self.starts, offset) - 1
        return index + 1, offset - self.starts[index] + 1


# ---------------------------------------------------------------------------------------------
# entry points


def check_memory_file(rel_path: str, data: bytes) -> list[Finding]:
    """Every finding for one file, given its path relative to the memory root and its bytes.

    ``MEMORY.md`` gets the byte and text checks only; its content is checked by
    :func:`check_index` against the rebuilt index. Only :data:`SAFETY_RULES` findings stay
    errors; what Qwen Code reads as a memory (no name, an empty description or body) is no
    finding at all, and the rest of the lint is advice (warnings).
    """
    findings = check_path(rel_path)
    text, problems = decode_memory_bytes(rel_path, data)
    findings += problems
    if text is not None:
        findings += check_text(rel_path, text)
        if rel_path.rsplit("/", 1)[-1] != INDEX_NAME:
            findings += check_document(rel_path, text, lenient=True)
    return [as_advice(finding) for finding in findings]


def as_advice(finding: Finding) -> Finding:
    """``finding`` as a warning unless its rule is about safety (or the index)."""
    if finding.severity != "error" or finding.rule in _STILL_ERRORS:
        return finding
    return replace(finding, severity="warning")


def check_path(rel_path: str) -> list[Finding]:
    """``path-unsafe`` for names that are dangerous anywhere, else ``path-layout`` problems."""
    unsafe = check_path_safety(rel_path)
    if unsafe:
        return [_error(rel_path, 1, 1, problem, "path-unsafe") for problem in unsafe]
    return [
        _error(rel_path, 1, 1, problem, "path-layout") for problem in check_memory_layout(rel_path)
    ]


def decode_memory_bytes(rel_path: str, data: bytes) -> tuple[str | None, list[Finding]]:
    """Size, NUL, UTF-8 and BOM checks; the text (LF line ends, no BOM) when it can be read."""
    if len(data) > MAX_FILE_BYTES:
        return None, [size_limit_finding(rel_path, len(data))]
    nul = data.find(b"\0")
    if nul >= 0:
        line, col = _byte_position(data, nul)
        return None, [_error(rel_path, line, col, "file contains a NUL byte", "nul-byte")]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, col = _byte_position(data, exc.start)
        message = f"invalid UTF-8 byte 0x{data[exc.start]:02x}; save the file as UTF-8"
        return None, [_error(rel_path, line, col, message, "utf8")]
    findings = []
    if text.startswith("\ufeff"):
        message = (
            "file starts with a UTF-8 byte order mark; remove it (Qwen Code needs '---' first)"
        )
        findings.append(_error(rel_path, 1, 1, message, "bom"))
        text = text[1:]
    return text.replace("\r\n", "\n"), findings


def size_limit_finding(rel_path: str, size: int) -> Finding:
    message = f"file is {size:,} bytes; memory files are limited to {MAX_FILE_BYTES:,} bytes"
    return _error(rel_path, 1, 1, message, "size-limit")


def check_text(rel_path: str, text: str) -> list[Finding]:
    """Checks that apply to any text we commit: conflict markers, secrets, hidden text."""
    lines = _Lines(text)
    return [
        *check_conflict_markers(rel_path, text),
        *check_secrets(rel_path, text, lines),
        *_capped(_invisible_unicode(rel_path, text, lines)),
        *_capped(_prompt_injection(rel_path, text, lines)),
    ]


def check_document(rel_path: str, text: str, *, lenient: bool = False) -> list[Finding]:
    """Frontmatter (both readers), fields, type and body of one memory document.

    ``lenient``: as Qwen Code 0.24 reads a file (spec/qwen-0.24-delta.md): only ``type`` is
    required, an empty body is fine, and a file without frontmatter is no memory (info)."""
    missing = _frontmatter_missing(rel_path, text)
    if missing and lenient:
        note = "; it is kept in history but is not a memory (Qwen Code does not list it)"
        return [replace(f, severity="info", message=f.message + note) for f in missing]
    if missing:
        return missing
    end = text.find("\n---", len(FENCE) - 1)
    frontmatter_text = text[len(FENCE) : end]
    findings = _closing_fence(rel_path, text, end)
    if not findings:
        meta, findings = load_frontmatter(rel_path, text)
        required = ("type",) if lenient else INDEX_FILE_FIELDS
        if meta is not None:
            findings += _check_fields(rel_path, meta, frontmatter_text, required)
            findings += _check_reader(rel_path, meta, frontmatter_text, text)
        elif not has_errors(findings):  # YAML tools cannot load it: check what Qwen Code reads
            fields = {key: frontmatter_field(frontmatter_text, key) for key in INDEX_FILE_FIELDS}
            findings += _check_fields(rel_path, fields, frontmatter_text, required)
    if not lenient:
        findings += _check_body(rel_path, text)
    return findings


def frontmatter_value_errors(value: str) -> list[Finding]:
    """Frontmatter errors of a document whose ``name`` and ``description`` are both ``value``
    (how :func:`qmem_git.core.codec.frontmatter_value` tests a value before writing it)."""
    probe = f"---\nname: {value}\ndescription: {value}\ntype: user\n---\n\nprobe\n"
    return [
        finding
        for finding in check_document("user/probe.md", probe)
        if finding.severity == "error" and finding.rule.startswith("frontmatter-")
    ]


INDEX_FIX = "`qmem-git index` (or the qmem-index hook)"
# for a commit made by hand: `qmem-git index` would make a commit of its own
STAGED_INDEX_FIX = "`qmem-index` (rewrites the file, no commit), then stage it"


def check_index(
    index_text: str | None,
    expected: IndexResult,
    rel_path: str = INDEX_NAME,
    fix: str = INDEX_FIX,
) -> list[Finding]:
    """MEMORY.md exists, equals the rebuilt index and respects the spec §6 limits.

    A single trailing newline (added by editors and end-of-file fixers) is tolerated
    (``core.index.index_is_current``). ``fix``: how the messages say to rebuild it.
    """
    if index_text is None:
        message = f"MEMORY.md is missing; create it with {fix}"
        return [_error(rel_path, 1, 1, message, "index-missing")]
    findings = _index_limits(rel_path, index_text)
    if not index_is_current(index_text, expected):
        line = _first_difference(index_text, expected.text)
        message = (
            f"MEMORY.md does not match the memory files (first difference on line {line}); "
            f"rebuild it with {fix}"
        )
        findings.insert(0, _error(rel_path, line, 1, message, "index-stale"))
    if expected.dropped:
        findings.append(_dropped_finding(rel_path, index_text, expected.dropped))
    return findings


# ---------------------------------------------------------------------------------------------
# content checks shared with the pre-commit hooks


def check_conflict_markers(rel_path: str, text: str) -> list[Finding]:
    """A finding for every git conflict marker line (they must never be committed)."""
    lines = _Lines(text)
    found = (
        _error(
            rel_path, *lines.position(m.start()), _conflict_message(m.group()), "conflict-marker"
        )
        for m in CONFLICT_LINE.finditer(text)
    )
    return _capped(found)


def _conflict_message(line: str) -> str:
    return f"git conflict marker '{line[:7]}'; resolve the conflict before committing"


def check_secrets(rel_path: str, text: str, lines: _Lines | None = None) -> list[Finding]:
    """One finding per matching secret rule; the message names the rule, never the value."""
    lines = lines or _Lines(text)
    return [
        _error(
            rel_path,
            *lines.position(secret.start),
            f"possible secret: {secret.label} ({secret.rule_id}); remove it, "
            "memory files are committed and shared",
            "secret",
        )
        for secret in scan_for_secrets(text)
    ]


# The larger patterns are compiled on first use (functools.cache): a push checks its commits
# with this module but never runs these rules, and compiling them cost ~2 ms of its start.


@functools.cache
def _invisible() -> re.Pattern[str]:
    return re.compile("[\U000e0000-\U000e007f\u202a-\u202e\u2066-\u2069\u200b-\u200d\u2060\ufeff]")


def _invisible_unicode(rel_path: str, text: str, lines: _Lines) -> Iterator[Finding]:
    last_line = 0
    for match in _invisible().finditer(text):
        line, col = lines.position(match.start())
        if line == last_line:
            continue
        last_line = line
        char = match.group()
        name = unicodedata.name(char, "unnamed")
        message = f"invisible character U+{ord(char):04X} {name}; it can hide text from reviewers"
        yield Finding(rel_path, line, col, "warning", message, "invisible-unicode")


@functools.cache
def _injection() -> re.Pattern[str]:
    return re.compile(
        r"\b(?:ignore|forget|override)\s+(?:all\s+|any\s+)?(?:of\s+)?(?:the\s+|your\s+)?"
        r"(?:previous|prior|above|earlier|preceding)\s+(?:instructions?|prompts?|messages?|rules)\b"
        r"|\bdisregard\s+(?:all\s+|any\s+)?(?:the\s+|your\s+)?"
        r"(?:above|previous|prior|earlier|preceding|instructions?)\b"
        r"|\byou\s+must\s+now\b"
        r"|\bsystem\s+prompt\b"
        r"|^[ \t]{0,3}#{1,6}[ \t]*system"
        r"(?:[ \t]*:|[ \t]+(?:prompt|message|instructions?)\b|[ \t]*$)"
        r"|<\|(?:im_start|im_end|system|endoftext)\|>",
        re.IGNORECASE | re.MULTILINE,
    )


def _prompt_injection(rel_path: str, text: str, lines: _Lines) -> Iterator[Finding]:
    last_line = 0
    for match in _injection().finditer(text):
        line, col = lines.position(match.start())
        if line == last_line:
            continue
        last_line = line
        phrase = " ".join(match.group().split())
        message = (
            f"text reads like an instruction to the model ('{phrase}'); memories are injected "
            "into prompts, keep them to facts"
        )
        yield Finding(rel_path, line, col, "warning", message, "prompt-injection")


# ---------------------------------------------------------------------------------------------
# frontmatter


def _frontmatter_missing(rel_path: str, text: str) -> list[Finding]:
    """spec §4.2 step 2: ``---\\n`` first, closed by the first ``\\n---``, not empty."""
    if not text.startswith(FENCE):
        hint = (
            "the '---' line must be the very first line"
            if text.lstrip().startswith("---")
            else "the file must start with a '---' line, then name/description/type, then '---'"
        )
        return [_error(rel_path, 1, 1, f"no frontmatter: {hint}", "frontmatter-missing")]
    end = text.find("\n---", len(FENCE) - 1)
    if end < 0:
        message = "frontmatter is not closed: add a '---' line after the fields"
        return [_error(rel_path, 1, 1, message, "frontmatter-missing")]
    if not text[len(FENCE) : end].strip():
        return [_error(rel_path, 1, 1, "frontmatter is empty", "frontmatter-missing")]
    return []


_FENCE_LINE = re.compile(r"---[ \t]*(?:\n|$)")


def _closing_fence(rel_path: str, text: str, end: int) -> list[Finding]:
    """Qwen closes at any line starting with ``---``; YAML tools need ``---`` alone."""
    if _FENCE_LINE.match(text, end + 1):
        return []
    line = text.count("\n", 0, end + 1) + 1
    message = "the closing '---' must be alone on its line"
    return [_error(rel_path, line, 1, message, "frontmatter-yaml")]


_FRONTMATTER_FIRST_LINE = 2  # the line after the opening '---'


def load_frontmatter(rel_path: str, text: str) -> tuple[dict[str, Any] | None, list[Finding]]:
    """The YAML metadata via python-frontmatter, or a ``frontmatter-yaml`` finding.

    Tags, anchors, duplicate keys and non-mappings are errors. Plain syntax errors (a value with
    ``: `` in it, as spec §7.7 writes summaries verbatim) are warnings when Qwen Code's
    line-based reader still reads the document: YAML tools cannot load it, Qwen Code can.

    ``frontmatter.parse`` returns plain data, unlike ``frontmatter.loads`` whose ``Post`` takes
    ``content`` and ``handler`` as arguments and breaks on frontmatter keys of those names.
    """
    import frontmatter
    import yaml

    from qmem_git.core.yamlfront import Refused, StrictYAMLHandler

    handler = StrictYAMLHandler()
    first_line = _yaml_first_line(handler, text)
    try:
        meta, _content = frontmatter.parse(text, handler=handler)
    except Refused as exc:
        return None, [_yaml_error(rel_path, exc.message, first_line + exc.line)]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = first_line + (mark.line if mark is not None else 0)
        return None, [_syntax_error(rel_path, text, f"YAML error: {exc.problem or exc}", line)]
    except (yaml.YAMLError, RecursionError, ValueError, TypeError) as exc:
        message = f"YAML error: {type(exc).__name__}"
        return None, [_syntax_error(rel_path, text, message, first_line)]
    return dict(meta), []


def _syntax_error(rel_path: str, text: str, message: str, line: int) -> Finding:
    """A warning when Qwen Code reads the document all the same, else an error."""
    finding = _yaml_error(rel_path, message, line)
    if parse_document(text, rel_path, 0) is None:
        return finding
    message = f"{finding.message} (Qwen Code reads it; YAML tools cannot)"
    return replace(finding, severity="warning", message=message)


def _yaml_first_line(handler: YAMLHandler, text: str) -> int:
    """File line where the YAML text python-frontmatter hands to the loader begins."""
    opening = handler.FM_BOUNDARY.match(text)
    return text.count("\n", 0, opening.end() if opening else 0) + 1


def _yaml_error(rel_path: str, message: str, line: int) -> Finding:
    return _error(rel_path, line, 1, f"frontmatter: {message}", "frontmatter-yaml")


def _key_line(frontmatter_text: str, key: str) -> int:
    """File line of the first ``key:`` line of the frontmatter (else the opening fence)."""
    for number, line in enumerate(frontmatter_text.split("\n")):
        if line.startswith(key + ":"):
            return number + _FRONTMATTER_FIRST_LINE
    return 1


def _check_fields(
    rel_path: str, meta: dict[str, Any], fm_text: str, required: tuple[str, ...]
) -> list[Finding]:
    findings = []
    for key in INDEX_FILE_FIELDS:
        value = meta.get(key)
        line = _key_line(fm_text, key)
        if isinstance(value, (dict, list)):
            message = f"frontmatter field '{key}' must be plain text on one line"
            findings.append(_error(rel_path, line, 1, message, "frontmatter-field"))
        elif value is None or not str(value).strip():
            if key not in required:
                continue
            if key == "name" and rel_path in LEGACY_TOPIC_FILES and meta.get("title"):
                continue  # spec §3: G1 topic files carry `title` instead of `name`
            message = f"frontmatter field '{key}' is missing or empty"
            findings.append(_error(rel_path, line, 1, message, "frontmatter-field"))
        elif key == "type":
            findings += _check_type(rel_path, str(value), line)
    return findings


def _check_type(rel_path: str, kind: str, line: int) -> list[Finding]:
    types = ", ".join(MEMORY_TYPES)
    if kind not in MEMORY_TYPES:
        message = f"frontmatter type '{kind}' is not one of {types}"
        return [_error(rel_path, line, 1, message, "type-invalid")]
    folder = rel_path.split("/", 1)[0]
    if "/" in rel_path and folder in MEMORY_TYPES and folder != kind:
        message = f"file is in the '{folder}/' folder but its type is '{kind}'"
        return [Finding(rel_path, line, 1, "warning", message, "type-folder")]
    return []


def _check_reader(rel_path: str, meta: dict[str, Any], fm_text: str, text: str) -> list[Finding]:
    """Qwen Code reads ``key: value`` lines literally; report where YAML reads something else."""
    findings = []
    for key in INDEX_FILE_FIELDS:
        value = meta.get(key)
        if value is None or isinstance(value, (dict, list)):
            continue
        seen = frontmatter_field(fm_text, key)
        if seen is not None and seen != str(value).strip():
            severity: Severity = "error" if key == "type" else "warning"
            message = (
                f"Qwen Code reads {key} as '{_clip(seen)}' but YAML reads '{_clip(str(value))}'; "
                "write a plain one-line value without quotes or YAML syntax"
            )
            line = _key_line(fm_text, key)
            findings.append(Finding(rel_path, line, 1, severity, message, "frontmatter-reader"))
    valid_type = str(meta.get("type", "")).strip() in MEMORY_TYPES
    if not findings and valid_type and parse_document(text, rel_path, 0) is None:
        message = "Qwen Code's line-based reader does not accept this frontmatter"
        findings.append(_error(rel_path, 1, 1, message, "frontmatter-reader"))
    return findings


def _check_body(rel_path: str, text: str) -> list[Finding]:
    end = text.find("\n---", len(FENCE) - 1)
    rest = end + len("\n---")
    if text.startswith("\n", rest):
        rest += 1
    if parse_entries(text[rest:]):
        return []
    line = text.count("\n", 0, rest) + 1
    severity: Severity = "warning" if rel_path in LEGACY_TOPIC_FILES else "error"
    message = "the body holds no memory entry; write the memory below the frontmatter"
    return [Finding(rel_path, line, 1, severity, message, "body-empty")]


# ---------------------------------------------------------------------------------------------
# index


def _index_limits(rel_path: str, text: str) -> list[Finding]:
    """spec §6 limits in UTF-16 code units, as Qwen Code counts them; the WARNING trailer the
    rebuild appends is not counted against them."""
    findings = []
    entries = text.removesuffix("\n").removesuffix(f"\n\n{INDEX_WARNING}")
    lines = entries.split("\n")
    long_lines = (
        _error(
            rel_path,
            number,
            MAX_LINE_CHARS + 1,
            f"index line is {_units(line)} characters; the limit is {MAX_LINE_CHARS}",
            "index-limit",
        )
        for number, line in enumerate(lines, 1)
        if _units(line) > MAX_LINE_CHARS
    )
    findings += _capped(long_lines)
    if len(lines) > MAX_LINES:
        message = f"MEMORY.md has {len(lines)} lines; the limit is {MAX_LINES}"
        findings.append(_error(rel_path, MAX_LINES + 1, 1, message, "index-limit"))
    size = _units(entries)
    if size > MAX_BYTES:
        message = f"MEMORY.md is {size:,} characters; the limit is {MAX_BYTES:,}"
        findings.append(_error(rel_path, 1, 1, message, "index-limit"))
    return findings


def _units(text: str) -> int:
    """UTF-16 code units (JavaScript's ``.length``), as the index builder counts them."""
    return len(to_js(text))


def _dropped_finding(rel_path: str, index_text: str, dropped: tuple[str, ...]) -> Finding:
    shown = ", ".join(dropped[:10]) + (
        f" and {len(dropped) - 10} more" if len(dropped) > 10 else ""
    )
    message = (
        f"the index limits ({MAX_LINES} lines, {MAX_BYTES:,} characters) leave {len(dropped)} "
        f"memories out of MEMORY.md, the part Qwen Code loads: {shown}; forget the ones that "
        "are outdated (`qmem-git review` suggests some) or merge duplicates (`qmem-git dream`)"
    )
    lines = index_text.split("\n")
    line = next((n for n, text in enumerate(lines, 1) if text.startswith("> WARNING:")), 1)
    # a warning: the generated index of a store with 200+ memories is exactly this (spec §6)
    return Finding(rel_path, line, 1, "warning", message, "index-limit")


def _first_difference(actual: str, expected: str) -> int:
    actual_lines, expected_lines = actual.split("\n"), expected.split("\n")
    for number, (left, right) in enumerate(zip(actual_lines, expected_lines, strict=False), 1):
        if left != right:
            return number
    return min(len(actual_lines), len(expected_lines)) + 1


# ---------------------------------------------------------------------------------------------
# output


def format_findings(findings: Iterable[Finding], fmt: Format = "gcc") -> str:
    """``gcc``: ``path:line:col: severity: message [rule]`` per line; ``text``; ``json``."""
    items = list(findings)
    if fmt == "gcc":
        return "\n".join(format_gcc(finding) for finding in items)
    if fmt == "json":
        return json.dumps([asdict(finding) for finding in items], ensure_ascii=False, indent=2)
    if fmt == "text":
        return _format_text(items)
    raise ValueError(f"unknown format {fmt!r}; use text, gcc or json")


def format_gcc(finding: Finding) -> str:
    """One line a VS Code problemMatcher can parse (no newlines inside path or message)."""
    return (
        f"{_one_line(finding.path)}:{finding.line}:{finding.col}: "
        f"{finding.severity}: {_one_line(finding.message)} [{finding.rule}]"
    )


def _format_text(findings: list[Finding]) -> str:
    if not findings:
        return "No problems found."
    out: list[str] = []
    current: str | None = None
    for finding in findings:
        if finding.path != current:
            if out:
                out.append("")
            current = finding.path
            out.append(_one_line(current))
        where = f"{finding.line}:{finding.col}"
        message = _one_line(finding.message)
        out.append(f"  {where:<8} {finding.severity:<8} {message}  ({finding.rule})")
    out += ["", summarize(findings)]
    return "\n".join(out)


def summarize(findings: Iterable[Finding]) -> str:
    """``3 problems (2 errors, 1 warning, 0 info)``."""
    counts = {"error": 0, "warning": 0, "info": 0}
    for finding in findings:
        counts[finding.severity] += 1
    total = sum(counts.values())
    errors = _plural(counts["error"], "error")
    warnings = _plural(counts["warning"], "warning")
    return f"{_plural(total, 'problem')} ({errors}, {warnings}, {counts['info']} info)"


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (f.path, f.line, f.col, f.rule, f.message))


def has_errors(findings: Iterable[Finding]) -> bool:
    return any(finding.severity == "error" for finding in findings)


# ---------------------------------------------------------------------------------------------
# helpers


def _error(rel_path: str, line: int, col: int, message: str, rule: str) -> Finding:
    return Finding(rel_path, line, col, "error", message, rule)


def _capped(findings: Iterable[Finding]) -> list[Finding]:
    """At most MAX_FINDINGS_PER_RULE findings, then one ``info`` saying how many were left out."""
    kept: list[Finding] = []
    extra = 0
    first_extra: Finding | None = None
    for finding in findings:
        if len(kept) < MAX_FINDINGS_PER_RULE:
            kept.append(finding)
        else:
            extra += 1
            first_extra = first_extra or finding
    if first_extra is not None:
        message = f"{extra} more '{first_extra.rule}' findings not shown"
        kept.append(
            Finding(
                first_extra.path,
                first_extra.line,
                first_extra.col,
                "info",
                message,
                first_extra.rule,
            )
        )
    return kept


def _byte_position(data: bytes, offset: int) -> tuple[int, int]:
    line_start = data.rfind(b"\n", 0, offset) + 1
    col = len(data[line_start:offset].decode("utf-8", errors="replace")) + 1
    return data.count(b"\n", 0, offset) + 1, col


@functools.cache
def _unprintable() -> re.Pattern[str]:
    return re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def _one_line(text: str) -> str:
    return _unprintable().sub(lambda m: f"<U+{ord(m.group()):04X}>", text)


def _clip(text: str, limit: int = 60) -> str:
    text = _one_line(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")
