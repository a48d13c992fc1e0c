"""Recall over a directory on disk with the parsed-document cache (spec §5, §10; ARCH §6)."""

from __future__ import annotations

import marshal
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers_git import gitdir
from hypothesis import given
from hypothesis import strategies as st

from qmem_git.core import limits, model
from qmem_git.core.codec import parse_document
from qmem_git.core.recall import search_index
from qmem_git.ops.recall import recall, relative_to_root, result_to_json
from qmem_git.store import doccache
from qmem_git.store.doccache import (
    CACHE_FORMAT,
    cache_path,
    parse_fields,
    scan_cached,
    walk_memory_files,
)
from qmem_git.store.workdir import iter_memory_files, scan_documents

NOW_S = 1_800_000_000
NOW_MS = NOW_S * 1000
REPO_ROOT = Path(__file__).resolve().parents[2]


def write_memory(
    root: Path,
    rel: str,
    title: str,
    kind: str = "project",
    description: str = "",
    body: str = "Body text.",
    age_s: int = 0,
) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"---\nname: {title}\ndescription: {description}\ntype: {kind}\n---\n\n{body}\n",
        encoding="utf-8",
    )
    stamp = NOW_S - age_s
    os.utime(path, (stamp, stamp))
    return path


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, Path]:
    """A plain memory directory (no git) and its state dir."""
    state = tmp_path / "state"
    root = state / "memory"
    write_memory(root, "project/deploy.md", "Deploy checklist", body="Run smoke tests", age_s=10)
    write_memory(root, "user/style.md", "Terse replies", kind="user", age_s=20)
    write_memory(
        root,
        "reference/grafana.md",
        "Latency board",
        kind="reference",
        description="Grafana dashboard",
        age_s=3 * 86_400,
    )
    return root, state


def test_recall_import_keeps_heavy_modules_out() -> None:
    code = (
        "import qmem_git.ops.recall, sys; print(sorted(m for m in sys.modules if m.split('.')[0] "
        "in {'dulwich','click','requests','yaml','filelock','frontmatter','psutil'}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_recall_hot_path_skips_dataclasses_typing_and_re() -> None:
    """ARCHITECTURE §6: start-up is the hook's cost; these three add ~40 ms here."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import qmem_git.ops.recall; "
        "print(sorted(m for m in ('dataclasses', 'typing', 're', 'json', 'tempfile') "
        "if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code, str(REPO_ROOT)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "[]"


def test_recall_on_a_plain_directory(store: tuple[Path, Path]) -> None:
    root, state = store
    result = recall(str(root), str(state), "deploy checklist", NOW_MS)
    assert result.strategy == "heuristic"
    assert [d.relative_path for d in result.selected] == ["project/deploy.md"]
    assert result.docs_scanned == 3
    assert result.prompt.startswith("## Relevant memory\n")
    assert "### Deploy checklist (project/deploy.md)\nSaved today.\n" in result.prompt
    assert not gitdir(root).exists()
    assert result_to_json(result) == {
        "strategy": "heuristic",
        "selected": ["project/deploy.md"],
        "docs_scanned": 3,
        "prompt": result.prompt,
    }


def test_freshness_note_for_old_files(store: tuple[Path, Path]) -> None:
    root, state = store
    result = recall(str(root), str(state), "grafana", NOW_MS)
    assert "Saved 3 days ago.\n" in result.prompt
    assert "> NOTE: This memory is 3 days old." in result.prompt


def test_warm_recall_reads_no_memory_file(
    store: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, state = store
    cold = recall(str(root), str(state), "deploy", NOW_MS)
    assert os.path.isfile(cache_path(str(state)))
    before = os.stat(cache_path(str(state))).st_mtime_ns

    def no_reads(path: str) -> str | None:
        raise AssertionError(f"warm scan read {path}")

    monkeypatch.setattr(doccache, "read_text", no_reads)
    warm = recall(str(root), str(state), "deploy", NOW_MS)
    assert result_to_json(warm) == result_to_json(cold)
    assert os.stat(cache_path(str(state))).st_mtime_ns == before  # unchanged: not rewritten


def test_changed_file_is_reparsed(store: tuple[Path, Path]) -> None:
    root, state = store
    recall(str(root), str(state), "deploy", NOW_MS)
    write_memory(root, "project/deploy.md", "Rollout checklist", body="Canary first", age_s=5)
    result = recall(str(root), str(state), "canary", NOW_MS)
    assert [d.title for d in result.selected] == ["Rollout checklist"]
    assert recall(str(root), str(state), "smoke", NOW_MS).selected == []


def test_same_mtime_different_size_is_reparsed(store: tuple[Path, Path]) -> None:
    root, state = store
    recall(str(root), str(state), "deploy", NOW_MS)
    write_memory(root, "project/deploy.md", "Deploy checklist", body="Longer canary text", age_s=10)
    assert recall(str(root), str(state), "canary", NOW_MS).selected


def test_deleted_file_leaves_the_cache(store: tuple[Path, Path]) -> None:
    root, state = store
    recall(str(root), str(state), "deploy", NOW_MS)
    (root / "project/deploy.md").unlink()
    result = recall(str(root), str(state), "deploy", NOW_MS)
    assert result.selected == []
    assert result.docs_scanned == 2
    cached = marshal.loads(Path(cache_path(str(state))).read_bytes())
    assert sorted(cached[2]) == ["reference/grafana.md", "user/style.md"]


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"not marshal at all",
        marshal.dumps(("other-format", "/x", {}))[:-3],
        marshal.dumps(["wrong", "shape"]),
        marshal.dumps((CACHE_FORMAT, "ROOT", {"project/deploy.md": (1, 2, None)})),
        marshal.dumps((CACHE_FORMAT, "ROOT", {"project/deploy.md": ("bad",)})),
        marshal.dumps((CACHE_FORMAT, "ROOT", {"project/deploy.md": "junk"})),
        marshal.dumps((CACHE_FORMAT, "ROOT", ["not", "a", "dict"])),
    ],
)
def test_corrupt_cache_is_ignored_and_rebuilt(store: tuple[Path, Path], payload: bytes) -> None:
    root, state = store
    expected = recall(str(root), None, "deploy", NOW_MS)
    path = Path(cache_path(str(state)))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(payload.replace(b"ROOT", str(root).encode()))
    result = recall(str(root), str(state), "deploy", NOW_MS)
    assert result_to_json(result) == result_to_json(expected)
    data = marshal.loads(path.read_bytes())
    assert data[0] == CACHE_FORMAT
    assert data[1] == str(root)


def test_damaged_cached_fields_force_a_reparse(store: tuple[Path, Path]) -> None:
    root, state = store
    recall(str(root), str(state), "deploy", NOW_MS)
    path = Path(cache_path(str(state)))
    fmt, cached_root, entries = marshal.loads(path.read_bytes())
    mtime_ns, size, _, index = entries["project/deploy.md"]
    entries["project/deploy.md"] = (mtime_ns, size, ("project", 1, "", "", ""), index)
    path.write_bytes(marshal.dumps((fmt, cached_root, entries)))
    assert recall(str(root), str(state), "deploy", NOW_MS).selected


@pytest.mark.parametrize("index", [None, ({}, 1), ("deploy", 1.0), ({"deploy": 1.0},)])
def test_damaged_search_index_forces_a_reparse(store: tuple[Path, Path], index: object) -> None:
    root, state = store
    recall(str(root), str(state), "deploy", NOW_MS)
    path = Path(cache_path(str(state)))
    fmt, cached_root, entries = marshal.loads(path.read_bytes())
    mtime_ns, size, fields, _ = entries["project/deploy.md"]
    entries["project/deploy.md"] = (mtime_ns, size, fields, index)
    path.write_bytes(marshal.dumps((fmt, cached_root, entries)))
    assert recall(str(root), str(state), "deploy", NOW_MS).selected
    _, _, entries = marshal.loads(path.read_bytes())
    assert entries["project/deploy.md"][3][0]["deploy"] > 0  # rebuilt


def test_cached_search_index_is_the_one_recall_would_build(store: tuple[Path, Path]) -> None:
    root, state = store
    recall(str(root), str(state), "deploy", NOW_MS)
    for doc in scan_cached(str(root), str(state)):
        assert doc.search_index == search_index(doc.title, doc.description, doc.body)


def test_cache_of_another_memory_root_is_not_used(store: tuple[Path, Path], tmp_path: Path) -> None:
    root, state = store
    recall(str(root), str(state), "deploy", NOW_MS)
    other = tmp_path / "other"
    write_memory(other, "project/deploy.md", "Other deploy", age_s=10)
    result = recall(str(other), str(state), "deploy", NOW_MS)
    assert [d.title for d in result.selected] == ["Other deploy"]


def test_unwritable_state_dir_still_recalls(store: tuple[Path, Path], tmp_path: Path) -> None:
    root, _ = store
    blocker = tmp_path / "state-is-a-file"
    blocker.write_text("x")
    result = recall(str(root), str(blocker), "deploy", NOW_MS)
    assert [d.relative_path for d in result.selected] == ["project/deploy.md"]


def test_failed_replace_leaves_no_temp_file(
    store: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, state = store

    def refuse(src: str, dst: str) -> None:
        raise PermissionError(dst)

    monkeypatch.setattr(doccache.os, "replace", refuse)
    assert recall(str(root), str(state), "deploy", NOW_MS).selected
    assert os.listdir(state / "cache") == []


def test_a_symlinked_cache_folder_is_never_written_through(
    store: tuple[Path, Path], tmp_path: Path
) -> None:
    root, state = store
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (state / "cache").symlink_to(elsewhere)
    assert recall(str(root), str(state), "deploy", NOW_MS).selected
    assert os.listdir(elsewhere) == []


def test_without_state_dir_nothing_is_written(store: tuple[Path, Path]) -> None:
    root, state = store
    assert recall(str(root), None, "deploy", NOW_MS).selected
    assert not (state / "cache").exists()


def test_exclusions_absolute_and_relative(store: tuple[Path, Path]) -> None:
    root, state = store
    for excluded in (
        str(root / "project" / "deploy.md"),
        "project/deploy.md",
        "./project/deploy.md",
    ):
        result = recall(str(root), str(state), "deploy", NOW_MS, excluded=[excluded])
        assert result.selected == []
        assert result.docs_scanned == 2


def test_relative_to_root_through_a_symlinked_root(tmp_path: Path) -> None:
    real = tmp_path / "real"
    (real / "user").mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(real)
    assert relative_to_root(str(real / "user" / "a.md"), str(link)) == "user/a.md"
    assert relative_to_root("user/../user/a.md", str(link)) == "user/a.md"


def test_empty_query_counts_but_selects_nothing(store: tuple[Path, Path]) -> None:
    root, state = store
    result = recall(str(root), str(state), "  ", NOW_MS)
    assert (result.strategy, result.prompt, result.docs_scanned) == ("none", "", 3)


def test_missing_memory_root(tmp_path: Path) -> None:
    result = recall(str(tmp_path / "nope"), str(tmp_path), "deploy", NOW_MS)
    assert (result.strategy, result.docs_scanned) == ("none", 0)


def test_selector_is_passed_through(store: tuple[Path, Path]) -> None:
    root, state = store
    result = recall(
        str(root), str(state), "anything", NOW_MS, selector=lambda docs, q, n: docs[-1:]
    )
    assert result.strategy == "model"
    assert [d.relative_path for d in result.selected] == ["reference/grafana.md"]


# --- scan semantics equal store.workdir (spec §5) --------------------------------------------


def build_tree(root: Path) -> None:
    write_memory(root, "user/a.md", "A", kind="user", age_s=1)
    write_memory(root, "feedback/deep/b.md", "B", kind="feedback", age_s=2)
    write_memory(root, "project/MEMORY.md", "Nested index", age_s=0)
    write_memory(root, ".hidden/c.md", "Hidden", age_s=0)
    write_memory(root, "project/.d.md", "Dot file", age_s=0)
    write_memory(root, "notes.txt", "Not markdown", age_s=0)
    (root / "dir.md").mkdir()
    write_memory(root, "dir.md/e.md", "Under md dir", age_s=3)
    (root / "link.md").symlink_to(root / "user" / "a.md")
    (root / "linkdir").symlink_to(root / "user")
    big = write_memory(root, "project/big.md", "Big", body="x" * (256 * 1024))
    assert big.stat().st_size > model.MAX_FILE_BYTES
    (root / "project" / "plain.md").write_text("no frontmatter\n")
    (root / "project" / "badtype.md").write_text("---\ntype: misc\n---\nbody\n")
    (root / "project" / "binary.md").write_bytes(b"---\ntype: user\n---\n\xff\xfe")
    write_memory(root, "MEMORY.md", "Index", age_s=0)


def test_walk_matches_workdir_iter_memory_files(tmp_path: Path) -> None:
    build_tree(tmp_path)
    found = walk_memory_files(str(tmp_path))
    ours = sorted((rel, mtime_ns, size) for _, _, rel, mtime_ns, size in found)
    theirs = sorted((f.relative_path, f.mtime_ns, f.size) for f in iter_memory_files(str(tmp_path)))
    assert ours == theirs
    listed = {rel for rel, *_ in ours}
    # what Qwen Code 0.24 lists: dot-folders, links followed, any size (docs/real-clients.md)
    assert {"user/a.md", "feedback/deep/b.md", "dir.md/e.md", "project/plain.md"} <= listed
    assert {".hidden/c.md", "link.md", "project/big.md"} <= listed
    assert not {"MEMORY.md", "project/MEMORY.md"} & listed


def test_cached_scan_equals_workdir_scan(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    build_tree(root)
    for i in range(210):  # more than the 200-document window, with mtime ties
        write_memory(root, f"project/p{i % 7}/n{i:03d}.md", f"Note {i}", age_s=100 + i // 3)
    write_memory(root, "user/n100.md", "Same basename, same mtime", kind="user", age_s=100 + 33)
    expected = scan_documents(str(root))
    assert len(expected) == 200
    for state in (None, str(tmp_path), str(tmp_path)):  # no cache, cold, warm
        docs = scan_cached(str(root), state)
        assert [d.to_document() for d in docs] == expected


def test_light_type_names_mirror_the_model() -> None:
    assert limits.TYPE_NAMES == model.MEMORY_TYPES
    assert tuple(doccache._TYPES) == model.MEMORY_TYPES


fragments = st.sampled_from(
    [
        "---\n", "---", "\n---", "\n", "\r\n", "type: user", "type: misc", "type:",
        "type: project ", "name: N", "name:", "title: T", "description: D", " name: x", "body",
        "  ", "---\n\n", "Name: n", "type:reference",
    ]
)  # fmt: skip


@given(st.lists(fragments, max_size=12).map("".join))
def test_parse_fields_mirrors_codec_parse_document(text: str) -> None:
    document = parse_document(text, "x/y.md", 1.0)
    fields = parse_fields(text)
    if document is None:
        assert fields is None
    else:
        assert fields == (
            document.type,
            document.title,
            document.description,
            document.body,
            document.frontmatter,
        )


def test_parse_fields_of_unreadable_file() -> None:
    assert parse_fields(None) is None


def test_read_text_failures(tmp_path: Path) -> None:
    (tmp_path / "bad.md").write_bytes(b"---\ntype: user\n---\n\xff\xfe")
    assert doccache.read_text(str(tmp_path / "bad.md")) is None
    assert doccache.read_text(str(tmp_path)) is None
    assert doccache.read_text(str(tmp_path / "missing.md")) is None


def test_undecodable_and_invalid_files_are_cached_as_non_documents(tmp_path: Path) -> None:
    root, state = tmp_path / "memory", tmp_path
    write_memory(root, "user/ok.md", "Ok", kind="user")
    (root / "user" / "bad.md").write_bytes(b"---\ntype: user\n---\n\xff\xfe")
    (root / "user" / "plain.md").write_text("no frontmatter\n")
    assert [d.relative_path for d in scan_cached(str(root), str(state))] == ["user/ok.md"]
    entries = marshal.loads(Path(cache_path(str(state))).read_bytes())[2]
    assert entries["user/bad.md"][2] is None
    assert entries["user/plain.md"][2] is None


def test_cached_doc_helpers(store: tuple[Path, Path]) -> None:
    root, state = store
    first = scan_cached(str(root), str(state))[0]
    assert first.filename == "deploy.md"
    assert repr(first) == "CachedDoc('project/deploy.md', type='project', title='Deploy checklist')"


def test_recall_reads_more_stores_after_this_one(store: tuple[Path, Path], tmp_path: Path) -> None:
    """The user tier recalled with the project's (as Qwen Code does); an absolute excluded path
    excludes the memory of the store it lies in, a relative one only this store's."""
    root, state = store
    user = tmp_path / "base" / "memories"
    tea = write_memory(user, "user/tea.md", "Green tea", kind="user", body="Prefers green tea")
    write_memory(user, "project/deploy.md", "User deploy note", body="Run smoke tests twice")
    also = [(str(user), None)]
    both = recall(str(root), str(state), "green tea", NOW_S * 1000, also=also)
    assert [doc.relative_path for doc in both.selected] == ["user/tea.md"]
    assert both.docs_scanned == 5 and "Prefers green tea" in both.prompt
    theirs = recall(
        str(root),
        str(state),
        "smoke tests twice",
        NOW_S * 1000,
        excluded=["project/deploy.md"],
        also=also,
    )
    assert "Run smoke tests twice" in theirs.prompt  # a relative exclude is this store's only
    skipped = recall(
        str(root),
        str(state),
        "green tea",
        NOW_S * 1000,
        excluded=[str(tea), "project/deploy.md"],
        also=[(str(user), None)],
    )
    assert skipped.docs_scanned == 3  # tea.md there, deploy.md here (not the user store's)
    assert "Prefers green tea" not in skipped.prompt
    assert not (user.parent / "memories.qmem").exists()  # no state dir given: no cache written
