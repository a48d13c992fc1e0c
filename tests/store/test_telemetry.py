"""store.telemetry: the append-only state files (telemetry.jsonl, hook.log)."""

from __future__ import annotations

from pathlib import Path

from qmem_git.store.telemetry import append_rotating


def test_appends_and_rotates_past_the_cap(tmp_path: Path) -> None:
    log = tmp_path / "state" / "hook.log"
    append_rotating(str(log), b"one\n", 8)
    append_rotating(str(log), b"two\n", 8)
    append_rotating(str(log), b"three\n", 8)
    assert log.read_bytes() == b"three\n"
    assert Path(f"{log}.1").read_bytes() == b"one\ntwo\n"


def test_a_symlinked_log_is_never_written_through(tmp_path: Path) -> None:
    """A cloned project may ship .qwen/hook.log -> ~/.bashrc; a log line names folders the
    attacker chose, so appending through the link would put their command in the shell rc."""
    rc = tmp_path / "bashrc"
    rc.write_bytes(b"# rc\n")
    log = tmp_path / "hook.log"
    log.symlink_to(rc)
    append_rotating(str(log), b"x;touch PWNED;#\n", 1 << 20)
    assert rc.read_bytes() == b"# rc\n"
