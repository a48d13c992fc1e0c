"""Allowed memory paths: safe on every OS/git host and inside the spec layout."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qmem_git.core.names import (
    check_memory_layout,
    check_path_safety,
    check_relative_path,
    find_case_collisions,
    fold_name,
    is_allowed_memory_path,
    is_ignorable,
    is_pinned,
    new_name_collisions,
    path_prefixes,
)

ALLOWED = [
    "MEMORY.md",
    "user/terse-responses.md",
    "feedback/x.md",
    "project/release/freeze.md",
    "reference/grafana.md",
    "user.md",
    "feedback.md",
    "project.md",
    "reference.md",
    "user/生产部署.md",
    "user/console.md",  # only the exact device stem is reserved
    "user/com10.md",
    "user/.hidden.md",  # Qwen Code 0.24 reads dot-files and dot-folders: memories too
    ".obsidian/notes/x.md",
]


@pytest.mark.parametrize("rel", ALLOWED)
def test_allowed(rel: str) -> None:
    assert check_relative_path(rel) == []
    assert is_allowed_memory_path(rel)


UNSAFE = [
    ("", "empty"),
    ("../x.md", "'..'"),
    ("user/../../x.md", "'..'"),
    ("./user/x.md", "'.' segment"),
    ("/etc/x.md", "absolute"),
    ("C:/x.md", "absolute"),
    ("user\\x.md", "backslash"),
    ("user//x.md", "empty segment"),
    ("user/", "empty segment"),
    (".git/config.md", "git metadata"),
    (".GIT/x.md", "git metadata"),
    (".Git/x.md", "git metadata"),
    (".G\u200bIT/x.md", "git metadata"),
    ("\u200c.git/x.md", "git metadata"),
    (".git./x.md", "git metadata"),
    ("GIT~1/x.md", "git metadata"),
    ("user/.G\ufeffit/x.md", "git metadata"),
    ("con.md", "device"),
    ("user/CON.md", "device"),
    ("user/nul", "device"),
    ("user/Aux.tar.md", "device"),
    ("user/com1.md", "device"),
    ("user/LPT9.md", "device"),
    ("user/lpt\u00b9.md", "device"),
    ("user/prn .md", "device"),
    ("user/x.md.", "dot or a space"),
    ("user/x.md ", "dot or a space"),
    ("user /x.md", "dot or a space"),
    ("user/a\x01.md", "control"),
    ("user/a\n.md", "control"),
    ("user/a\x85.md", "control"),
    ("notes/.git/x.md", "git metadata name"),
    (".GIT/x.md", "git metadata name"),
    ("user/a\u200bb.md", "invisible"),
    ("user/a\u202eb.md", "invisible"),
    ("user/a\U000e0041.md", "invisible"),
    ("user/a:b.md", "Windows forbids"),
    ("user/a?.md", "Windows forbids"),
    ("user/" + "a" * 253 + ".md", "longer than 255"),
    ("user/a\udcff.md", "not valid UTF-8"),
]


@pytest.mark.parametrize(("rel", "expected"), UNSAFE)
def test_unsafe(rel: str, expected: str) -> None:
    problems = check_path_safety(rel)
    assert any(expected in problem for problem in problems), problems
    assert not is_allowed_memory_path(rel)


LAYOUT = [
    ("user/x.txt", "end in .md"),
    ("user/x.MD", "end in .md"),
    ("user", "end in .md"),
]


@pytest.mark.parametrize(
    "rel", ["notes.md", "misc/x.md", "User/x.md", "Pinned/x.md", "logs/a/b/c.md", "user/MEMORY.md"]
)
def test_any_md_file_at_any_depth_has_a_memory_place(rel: str) -> None:
    """Qwen Code 0.24 scans every *.md below the root (issue 18)."""
    assert check_memory_layout(rel) == [] and is_allowed_memory_path(rel)


@pytest.mark.parametrize(
    ("rel", "pinned"),
    [
        ("pinned/a.md", True),
        ("Pinned/x/y.md", True),
        ("PINNED/a.md", True),
        ("pinned", False),
        ("user/pinned/a.md", False),
        ("pinnedx/a.md", False),
    ],
)
def test_pinned_is_the_top_folder_in_any_letter_case(rel: str, pinned: bool) -> None:
    assert is_pinned(rel) is pinned


@pytest.mark.parametrize(("rel", "expected"), LAYOUT)
def test_layout(rel: str, expected: str) -> None:
    assert check_path_safety(rel) == []
    assert any(expected in problem for problem in check_memory_layout(rel))
    assert not is_allowed_memory_path(rel)


def test_problems_name_invisible_characters_visibly() -> None:
    [problem, *_] = check_path_safety(".G\u200bIT/x.md")
    assert "<U+200B>" in problem and "\u200b" not in problem


def test_case_collisions() -> None:
    paths = ["user/a.md", "user/A.md", "User/b.md", "project/x.md", "project/y.md"]
    assert find_case_collisions(paths) == [["User", "user"], ["user/A.md", "user/a.md"]]
    assert find_case_collisions(["user/a.md", "user/b.md"]) == []


def test_case_collisions_see_normalisation_and_invisible_characters() -> None:
    nfc, nfd = "user/caf\u00e9.md", "user/cafe\u0301.md"
    assert find_case_collisions([nfc, nfd]) == [sorted([nfc, nfd])]
    assert find_case_collisions(["user/ab.md", "user/a\u200bb.md"]) != []


def test_fold_name() -> None:
    assert fold_name(".G\u200bIT") == ".git"
    assert fold_name("Stra\u00dfe") == "strasse"


def full_fold(name: str) -> str:
    """fold_name without its ASCII shortcut: drop ignorables, NFC, casefold."""
    visible = "".join(char for char in name if not is_ignorable(char))
    return unicodedata.normalize("NFC", visible).casefold()


@given(st.text(max_size=30) | st.text(st.characters(max_codepoint=0x7F), max_size=30))
def test_the_ascii_shortcut_folds_like_the_full_rules(name: str) -> None:
    assert fold_name(name) == full_fold(name)


@given(st.text(max_size=30))
def test_control_characters_are_found_anywhere(text: str) -> None:
    has_control = any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in text)
    found = "path contains a control character" in check_path_safety(f"user/{text}x.md")
    assert found == has_control


@given(st.text(max_size=40))
def test_checks_never_raise_and_allowed_paths_are_relative(rel: str) -> None:
    problems = check_relative_path(rel)
    if not problems:
        assert not rel.startswith("/") and ".." not in rel.split("/")
        assert rel.endswith(".md")


def test_new_name_collisions_keep_the_spelling_already_in_use() -> None:
    paths = ["user/a.md", "user/A.md", "User/b.md", "user/c.md", "project/X.md", "project/x.md"]
    refused = new_name_collisions(
        ["user/A.md", "User/b.md", "user/c.md", "project/X.md", "project/x.md"], paths
    )
    assert refused["user/A.md"] == ("user/A.md", "user/a.md")
    assert refused["User/b.md"] == ("User", "user")
    assert "user/c.md" not in refused
    assert {"project/X.md", "project/x.md"} <= refused.keys()  # both new: both refused
    assert new_name_collisions([], paths) == {}
    assert path_prefixes("a/b/c.md") == ["a", "a/b", "a/b/c.md"]


def test_new_name_collisions_look_only_below_the_new_paths_folders() -> None:
    """Only spellings that fold like one of a new path's folders can clash; a deeper clash
    of a folder the disk folds alike (accents, case) is still found."""
    paths = ["user/Caf\u00e9/a.md", "user/cafe\u0301/b.md", "project/Caf\u00e9/c.md", "user/x.md"]
    refused = new_name_collisions(["user/cafe\u0301/b.md", "user/x.md"], paths)
    assert refused == {"user/cafe\u0301/b.md": ("user/cafe\u0301", "user/Caf\u00e9")}


def test_a_path_nested_deeper_than_32_folders_is_unsafe() -> None:
    from qmem_git.core.names import MAX_PATH_DEPTH, check_path_safety

    fits = "/".join(["user", *["d"] * (MAX_PATH_DEPTH - 2), "x.md"])
    assert check_path_safety(fits) == []
    deep = "/".join(["user", *["d"] * 5000, "x.md"])
    assert check_path_safety(deep) == ["path is nested deeper than 32 folders"]
