"""store.keptdocs: what a writer parsed, used by the next while the files are unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers_git import gitdir, memory_text

from qmem_git.core.limits import DOCS_RECORD_NAME
from qmem_git.store import keptdocs, survey, workdir


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "memory"
    root.mkdir()
    gitdir(root).mkdir()
    for number in range(5):
        path = root / "user" / f"m{number}.md"
        path.parent.mkdir(exist_ok=True)
        path.write_text(memory_text("user", f"m{number}", f"fact {number}"))
    (root / "user" / "broken.md").write_text("no frontmatter at all\n")
    return root


def stamps(root: Path) -> dict[str, tuple[int, ...]]:
    """The files as a writer's survey gives them: rel -> full stamp."""
    return dict(survey._scan(str(root), 1 << 64).files())


def scan(root: Path) -> list[object]:
    with workdir.shared_scan(str(root), stamps(root)):
        return list(workdir.scan_documents(str(root)))


def no_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    def parse(info: object) -> None:
        raise AssertionError(f"parsed {info}")

    monkeypatch.setattr(workdir, "load_document", parse)


def test_the_next_writer_uses_what_the_last_one_parsed(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = scan(root)
    assert len(first) == 5 and (gitdir(root) / DOCS_RECORD_NAME).exists()
    no_parsing(monkeypatch)
    assert scan(root) == first  # the broken file is kept as no document too


def test_a_changed_file_is_parsed_again(root: Path) -> None:
    scan(root)
    (root / "user" / "m2.md").write_text(memory_text("user", "m2", "a new fact, longer"))
    docs = {doc.relative_path: doc for doc in scan(root)}  # type: ignore[attr-defined]
    assert "a new fact, longer" in docs["user/m2.md"].body


def test_an_untrusted_record_is_not_used(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = scan(root)
    record = gitdir(root) / DOCS_RECORD_NAME
    data = record.read_bytes()
    record.write_bytes(data[:-3] + bytes([data[-3] ^ 1]) + data[-2:])  # one bit off
    assert keptdocs.load_kept(str(gitdir(root))) == {}
    record.write_bytes(b"qmem-docs/1 0.0.0-other\n" + data[len(keptdocs._MAGIC) :])
    assert keptdocs.load_kept(str(gitdir(root))) == {}
    assert scan(root) == first


def test_big_documents_are_parsed_each_time(root: Path) -> None:
    big = "x" * (keptdocs.MAX_KEPT_TEXT + 1)
    (root / "user" / "big.md").write_text(memory_text("user", "big", big))
    scan(root)
    kept = keptdocs.load_kept(str(gitdir(root)))
    assert "user/big.md" not in kept and "user/m1.md" in kept


def test_a_file_written_by_the_writer_itself_is_not_kept(root: Path) -> None:
    """Its stamp in the writer's view is mtime and size alone, which cannot vouch for it."""
    files = stamps(root)
    files["user/m0.md"] = files["user/m0.md"][:2]
    with workdir.shared_scan(str(root), files):
        workdir.scan_documents(str(root))
    kept = keptdocs.load_kept(str(gitdir(root)))
    assert "user/m0.md" not in kept and "user/m1.md" in kept
