"""The team tier's MEMORY.md format (Qwen Code 0.24.4's rebuildTeamAutoMemoryIndex); the
differential test in tests/qwen compares it with Qwen's own on generated folders."""

from __future__ import annotations

from qmem_git.core.index import MAX_LINE_CHARS, WARNING
from qmem_git.core.model import Document
from qmem_git.core.teamindex import build_team_index, normalize_description


def doc(path: str, description: str, title: str = "T", mtime_ms: float = 0.0) -> Document:
    return Document("project", path, title, description, "body", mtime_ms)


def test_descriptions_group_by_case_whitespace_and_closing_punctuation() -> None:
    assert normalize_description("  Use RG,\t not grep!)'  ") == "use rg, not grep"
    assert normalize_description("...") == ""
    assert normalize_description("记忆。") == "记忆。"  # only ASCII closing punctuation goes


def test_sorted_by_path_not_age_and_equal_descriptions_share_a_line() -> None:
    docs = [
        doc("z.md", "Prefer rg.", "Z", mtime_ms=9),
        doc("a/b.md", "prefer  RG", "AB", mtime_ms=1),
        doc("B.md", "", "Empty"),
        doc("c.md", " ", "Blank"),
        doc("m.md", "other", "M"),
    ]
    assert build_team_index(docs).text == (
        "- [Empty](B.md) — project\n"  # upper case sorts first (UTF-16 code units)
        "- [AB](a/b.md) — prefer RG (also: z.md)\n"
        "- [Blank](c.md) — project\n"  # empty descriptions never group
        "- [M](m.md) — other"
    )


def test_a_long_group_line_is_cut_with_its_also_list() -> None:
    docs = [doc(f"folder/{i:02d}-{'x' * 20}.md", "same") for i in range(8)]
    text = build_team_index(docs).text
    assert "\n" not in text and len(text) == MAX_LINE_CHARS and text.endswith("…")
    assert text.startswith("- [T](folder/00-") and "(also: folder/01-" in text


def test_only_the_first_200_paths_are_listed_and_the_rest_reported() -> None:
    docs = [doc(f"m{i:03d}.md", f"d{i}") for i in range(205)]
    result = build_team_index(docs)
    assert result.text.endswith("(m199.md) — d199")  # Qwen's scan keeps 200: no warning
    assert result.dropped == tuple(f"m{i}.md" for i in range(200, 205))
    many = [doc(f"m{i:03d}.md", f"{i}" + "d" * 140) for i in range(200)]
    assert build_team_index(many).text.endswith(WARNING)  # over 25,000 UTF-16 code units
    assert build_team_index([]).text == ""
