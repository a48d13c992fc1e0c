"""Commit messages with Qmem trailers (ARCHITECTURE §4): render, parse, round trip."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qmem_git.core.changes import (
    OPS,
    ChangeSet,
    CommitInfo,
    FileChange,
    parse_commit_message,
    render_commit_message,
)
from qmem_git.core.text import clean_text, normalize_space


def one_line(text: str) -> str:
    """What a subject or trailer value becomes: controls dropped, whitespace folded."""
    return normalize_space(clean_text(text))


def test_render_exact_message() -> None:
    cs = ChangeSet(
        op="extract",
        subject="add 2 memories",
        writes={"user/a.md": "x", "reference/b.md": "y"},
        topics=("user", "reference"),
        added=2,
        session="sess-1",
    )
    changes = [FileChange("A", "reference/b.md"), FileChange("A", "user/a.md")]
    assert render_commit_message(cs, "box", changes) == (
        "extract: add 2 memories\n"
        "\n"
        "A reference/b.md\n"
        "A user/a.md\n"
        "\n"
        "Qmem-Op: extract\n"
        "Qmem-Session: sess-1\n"
        "Qmem-Host: box\n"
        "Qmem-Topics: user,reference\n"
        "Qmem-Added: 2\n"
        "Qmem-Removed: 0\n"
    )


def test_session_omitted_when_none_and_no_file_block() -> None:
    text = render_commit_message(ChangeSet("index", "rebuild"), "h", [])
    assert text == (
        "index: rebuild\n\nQmem-Op: index\nQmem-Host: h\nQmem-Topics:\n"
        "Qmem-Added: 0\nQmem-Removed: 0\n"
    )
    info = parse_commit_message(text)
    assert info.session is None and info.topics == () and info.changes == ()


def test_blank_session_is_omitted_too() -> None:
    text = render_commit_message(ChangeSet("dream", "s", session=" \t "), "h", [])
    assert "Qmem-Session" not in text
    assert parse_commit_message(text).session is None


def test_subject_and_values_are_one_line() -> None:
    cs = ChangeSet(
        "remember", "multi\nline   subject", session="a\nb", trailers=(("Qmem-Note", "x\ny"),)
    )
    text = render_commit_message(cs, "host\nname", [])
    assert text.split("\n")[0] == "remember: multi line subject"
    assert "Qmem-Session: a b\n" in text and "Qmem-Host: host name\n" in text
    assert "Qmem-Note: x y\n" in text


def test_trailer_order_then_extra_trailers() -> None:
    cs = ChangeSet(
        "undo",
        "revert abc",
        session="s",
        trailers=(("Qmem-Reverts", "abc123"), ("Qmem-Undo-Of", "extract")),
    )
    info = parse_commit_message(render_commit_message(cs, "h", []))
    assert [key for key, _ in info.trailers] == [
        "Qmem-Op",
        "Qmem-Session",
        "Qmem-Host",
        "Qmem-Topics",
        "Qmem-Added",
        "Qmem-Removed",
        "Qmem-Reverts",
        "Qmem-Undo-Of",  # hyphenated keys read back too
    ]
    assert info.trailers[-1] == ("Qmem-Undo-Of", "extract")


def test_commit_from_another_tool_parses_with_op_none() -> None:
    message = (
        "Fix typo in notes\n"
        "\n"
        "A quick note about the change.\n"
        "M is for memory.\n"
        "\n"
        "Signed-off-by: Someone <s@example.com>\n"
    )
    info = parse_commit_message(message)
    assert info == CommitInfo(subject="Fix typo in notes", op=None)


def test_empty_and_subject_only_messages() -> None:
    assert parse_commit_message("") == CommitInfo(subject="", op=None)
    assert parse_commit_message("just a subject") == CommitInfo(subject="just a subject", op=None)


def test_crlf_message_parses() -> None:
    text = render_commit_message(
        ChangeSet("forget", "drop", topics=("user",), removed=1),
        "h",
        [FileChange("D", "user/x.md")],
    )
    info = parse_commit_message(text.replace("\n", "\r\n"))
    assert info.op == "forget" and info.removed == 1 and info.paths == ("user/x.md",)


def test_bad_numbers_read_as_zero() -> None:
    info = parse_commit_message("x: y\n\nQmem-Op: x\nQmem-Added: many\nQmem-Removed: -\n")
    assert (info.op, info.added, info.removed) == ("x", 0, 0)


def test_changeset_helpers() -> None:
    cs = ChangeSet("forget", "s", writes={"b.md": ""}, deletes=("a.md", "b.md"))
    assert cs.paths() == ["a.md", "b.md"]
    assert not cs.is_empty
    assert ChangeSet("index", "s").is_empty


# --- round trip ------------------------------------------------------------------------------
# Free text (subject, session, host, trailer values) is normalised to one line by the renderer,
# so the property compares against the normalised input.  Paths are what the store writes:
# non-empty, no line breaks, no leading/trailing whitespace.

_free = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
_path_chars = st.characters(whitelist_categories=("L", "N"), whitelist_characters="-_./ ")
paths = st.text(_path_chars, min_size=1, max_size=30).map(str.strip).filter(bool)
topics = st.lists(st.sampled_from(["user", "feedback", "project", "reference"]), unique=True)
trailer_keys = st.from_regex(r"Qmem-X[A-Za-z0-9-]{0,10}", fullmatch=True)


@given(
    op=st.sampled_from(OPS),
    subject=_free,
    session=st.none() | _free,
    host=_free,
    topic_list=topics,
    added=st.integers(0, 10_000),
    removed=st.integers(0, 10_000),
    changes=st.lists(st.builds(FileChange, st.sampled_from("AMD"), paths), max_size=5),
    extra=st.lists(st.tuples(trailer_keys, _free), max_size=3),
)
def test_render_parse_round_trip(
    op: str,
    subject: str,
    session: str | None,
    host: str,
    topic_list: list[str],
    added: int,
    removed: int,
    changes: list[FileChange],
    extra: list[tuple[str, str]],
) -> None:
    cs = ChangeSet(
        op=op,
        subject=subject,
        topics=tuple(topic_list),
        added=added,
        removed=removed,
        session=session,
        trailers=tuple(extra),
    )
    text = render_commit_message(cs, host, changes)
    info = parse_commit_message(text)
    assert info.subject == f"{op}: {one_line(subject)}".rstrip()
    assert info.op == op
    assert info.session == (one_line(session or "") or None)
    assert info.host == one_line(host)
    assert info.topics == tuple(topic_list)
    assert (info.added, info.removed) == (added, removed)
    assert info.changes == tuple(changes)
    assert info.trailers[len(info.trailers) - len(extra) :] == tuple(
        (key, one_line(value)) for key, value in extra
    )
    assert text.endswith("\n") and not text.endswith("\n\n")
    assert all(line == line.rstrip() for line in text.split("\n"))


def test_render_refuses_an_unknown_op() -> None:
    with pytest.raises(ValueError, match="unknown operation"):
        render_commit_message(ChangeSet(op="x\nQmem-Op: merge", subject="s"), "box", [])


def test_a_control_character_in_a_path_cannot_forge_lines() -> None:
    evil = "user/evil\nQmem-Op: merge\nx.md"
    cs = ChangeSet(op="edit", subject="s", deletes=(evil,))
    message = render_commit_message(cs, "box", [FileChange("D", evil)])
    assert "D user/evil\\nQmem-Op: merge\\nx.md\n" in message
    info = parse_commit_message(message)
    assert info.op == "edit" and [t for t in info.trailers if t[0] == "Qmem-Op"] == [
        ("Qmem-Op", "edit")
    ]


def test_kept_file_times_are_trailers_of_written_paths_only() -> None:
    cs = ChangeSet(
        op="recover",
        subject="s",
        writes={"user/a.md": "x"},
        deletes=("user/gone.md",),
        mtimes={"user/a.md": 1_700_000_000, "user/gone.md": 1_600_000_000},
    )
    changes = [FileChange("A", "user/a.md"), FileChange("D", "user/gone.md")]
    message = render_commit_message(cs, "box", changes)
    assert message.count("Qmem-Mtime:") == 1
    info = parse_commit_message(message)
    assert info.mtimes.get("user/a.md") == 1_700_000_000
    assert info.mtimes.get("user/gone.md") is None and info.mtimes.get("user/other.md") is None
