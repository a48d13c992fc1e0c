"""Hub branch names: every output is a ref name C git accepts, spellings of one project meet,
different projects do not."""

from __future__ import annotations

import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qmem_git.core.hubnames import (
    MAX_BRANCH_CHARS,
    project_identity,
    safe_name,
    store_branch,
    store_of_branch,
)

SAME_PROJECT = [
    "git@github.com:Alice/shop.git",
    "https://github.com/Alice/shop",
    "https://github.com/alice/shop.git/",
    "ssh://git@github.com/Alice/shop.git",
    "ssh://git@github.com:22/Alice/shop",
    "https://alice:tok3n@GitHub.com/Alice/shop.git",
    "git+ssh://git@github.com/alice/shop/",
    "git://github.com/Alice/shop.git",
    "http://github.com:8080/Alice/shop",
    "github.com:Alice/shop",
]


def check_ref_format(names: list[str]) -> list[str]:
    """The names C git refuses as ``refs/heads/<name>`` (one git process for all of them)."""
    script = 'for n in "$@"; do git check-ref-format "refs/heads/$n" || echo "$n"; done'
    proc = subprocess.run(
        ["sh", "-c", script, "sh", *names], capture_output=True, text=True, check=True
    )
    return proc.stdout.splitlines()


@pytest.mark.parametrize("url", SAME_PROJECT)
def test_every_spelling_of_one_origin_is_one_identity(url: str) -> None:
    assert project_identity(url) == "github.com/alice/shop"
    assert store_branch("project", project_identity(url), "") == "projects/github.com/alice/shop"
    assert store_branch("claude", project_identity(url), "") == "claude/github.com/alice/shop"


def test_different_projects_have_different_branches() -> None:
    urls = [
        "git@github.com:alice/shop.git",
        "git@github.com:alice/shop2.git",
        "git@github.com:bob/shop.git",
        "git@gitlab.com:alice/shop.git",
        "https://github.com/alice/shop/sub",
        "git@path:alice/shop.git",  # a host called "path"
        "/srv/git/shop.git",
        "git@github.com:alice/sh op.git",
        "git@github.com:alice/sh-op.git",
        "git@github.com:alice/sh~op.git",
    ]
    branches = [store_branch("project", project_identity(url), "") for url in urls]
    paths = [store_branch("project", None, key) for key in ("-srv-git-shop", "-home-a-shop")]
    every = [*branches, *paths, "user"]
    assert len(set(every)) == len(every)
    assert check_ref_format(every) == []
    assert store_branch("project", None, "-home-a-shop") == "projects/path/-home-a-shop"
    # one repository on disk, as a path or a file:// URL, is one project
    assert project_identity("file:///srv/git/shop.git") == project_identity("/srv/git/shop.git")


def test_branch_kinds_read_back() -> None:
    assert store_of_branch("user") == "user"
    assert store_of_branch("projects/github.com/a/b") == "project"
    assert store_of_branch("claude/path/-x") == "claude"
    assert store_of_branch("main") is None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(min_size=0, max_size=300), min_size=1, max_size=20))
def test_any_input_makes_a_valid_bounded_ref_name(texts: list[str]) -> None:
    names = []
    for text in texts:
        for kind in ("project", "claude"):
            names.append(store_branch(kind, project_identity(text) or None, text))
        names.append(safe_name(text))
    assert all(len(name) <= MAX_BRANCH_CHARS for name in names[::3])
    assert all(len(name) <= MAX_BRANCH_CHARS for name in names[1::3])
    assert check_ref_format(names) == []


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=80), st.text(min_size=1, max_size=80))
def test_different_inputs_give_different_names(first: str, second: str) -> None:
    if first != second:
        assert safe_name(first) != safe_name(second)


def test_long_names_are_cut_with_a_hash() -> None:
    one = store_branch("project", "github.com/" + "a" * 300, "")
    two = store_branch("project", "github.com/" + "a" * 299 + "b", "")
    assert len(one) <= MAX_BRANCH_CHARS and one != two
    assert check_ref_format([one, two]) == []
