"""store.extractqueue: one extraction per project, one trailing request (spec §7.9)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from qmem_git.store.extractqueue import QUEUE_FILE, ExtractSlot


def test_busy_slot_queues_the_latest_request(tmp_path: Path) -> None:
    holder, other = ExtractSlot(str(tmp_path)), ExtractSlot(str(tmp_path))
    assert holder.acquire_or_queue({"transcript": "a"})
    assert holder.take_queued() is None
    assert not other.acquire_or_queue({"transcript": "b"})
    assert not other.acquire_or_queue({"transcript": "c"})  # the latest request wins
    assert json.loads((tmp_path / QUEUE_FILE).read_text()) == {"transcript": "c"}
    assert holder.take_queued() == {"transcript": "c"}
    assert not (tmp_path / QUEUE_FILE).exists()
    assert holder.release() is None
    assert other.acquire_or_queue({"transcript": "d"})  # free again
    assert other.release() is None


def test_release_takes_back_a_request_queued_after_the_last_look(tmp_path: Path) -> None:
    holder, other = ExtractSlot(str(tmp_path)), ExtractSlot(str(tmp_path))
    assert holder.acquire_or_queue({"transcript": "a"})
    assert not other.acquire_or_queue({"transcript": "late"})
    assert holder.release() == {"transcript": "late"}
    assert not (tmp_path / QUEUE_FILE).exists()
    assert other.acquire_or_queue({"transcript": "next"})  # release freed the slot again
    other.release()


def test_unreadable_queue_reads_as_nothing(tmp_path: Path) -> None:
    slot = ExtractSlot(str(tmp_path))
    assert slot.acquire_or_queue({"transcript": "a"})
    (tmp_path / QUEUE_FILE).write_text("[1, 2]")
    assert slot.take_queued() is None
    assert not (tmp_path / QUEUE_FILE).exists()
    slot.release()


def test_the_queue_does_not_import_filelock() -> None:
    code = (
        "import sys, tempfile\n"
        "from qmem_git.store.extractqueue import ExtractSlot\n"
        "slot = ExtractSlot(tempfile.mkdtemp())\n"
        "assert slot.acquire_or_queue({})\n"
        "slot.release()\n"
        "print('filelock' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
