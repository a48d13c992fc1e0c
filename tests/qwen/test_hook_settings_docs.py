"""The hook settings we install agree with what the installed Qwen Code 0.24.4 documents about
command hooks: timeouts in seconds (1000 or more reads as milliseconds, with a warning), and
async hooks reclaimed when Qwen exits (so a headless session would kill an async Stop hook)."""

from __future__ import annotations

from pathlib import Path

from qmem_git.integrations import hooksettings as hs


def _hooks_doc(package: Path) -> str:
    return " ".join((package / "bundled/qc-helper/docs/features/hooks.md").read_text().split())


def test_qwen_reads_command_hook_timeouts_in_seconds(qwen_package: Path) -> None:
    doc = _hooks_doc(qwen_package)
    assert "`timeout` is in seconds for command, HTTP and prompt hooks" in doc
    assert "a value of `1000` or more is still read as milliseconds" in doc
    groups = hs.render_hooks("qwen")["hooks"].values()
    assert all(0 < group[0]["hooks"][0]["timeout"] < 1000 for group in groups)


def test_no_hook_is_async_because_qwen_reclaims_async_hooks_on_exit(qwen_package: Path) -> None:
    assert "Qwen reclaims a still-running async hook process tree when it exits" in _hooks_doc(
        qwen_package
    )
    groups = hs.render_hooks("qwen")["hooks"].values()
    assert all("async" not in group[0]["hooks"][0] for group in groups)
