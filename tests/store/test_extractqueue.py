"""store.extractqueue: one extraction per project, one trailing request per session."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from qmem_git.store.extractqueue import (
    LEGACY_QUEUE_FILE,
    QUEUE_DIR,
    ExtractSlot,
    queue_name,
)


def queued_files(state: Path) -> list[str]:
    folder = state / QUEUE_DIR
    return sorted(os.listdir(folder)) if folder.exists() else []


def test_busy_slot_queues_the_latest_request_of_each_session(tmp_path: Path) -> None:
    holder, other = ExtractSlot(str(tmp_path)), ExtractSlot(str(tmp_path))
    assert holder.acquire_or_queue({"transcript": "a", "sessionId": "s-a"})
    assert holder.take_queued() is None
    assert not other.acquire_or_queue({"transcript": "b1", "sessionId": "s-b"})
    assert not other.acquire_or_queue({"transcript": "c", "sessionId": "s-c"})
    assert not other.acquire_or_queue({"transcript": "b2", "sessionId": "s-b"})  # replaces b1
    assert len(queued_files(tmp_path)) == 2
    taken = [holder.take_queued(), holder.take_queued(), holder.take_queued()]
    assert sorted(str(t and t["transcript"]) for t in taken) == ["None", "b2", "c"]
    assert queued_files(tmp_path) == []
    assert holder.release() is False
    assert other.acquire_or_queue({"transcript": "d"})  # free again
    assert other.release() is False


def test_requests_without_a_session_are_kept_apart_by_transcript() -> None:
    one, two = {"transcript": "/t/1.jsonl"}, {"transcript": "/t/2.jsonl"}
    assert queue_name(one) != queue_name(two)
    assert queue_name(one) == queue_name({"transcript": "/t/1.jsonl", "sessionId": None})
    assert queue_name({"transcript": "/t/1.jsonl", "sessionId": "s"}) == queue_name(
        {"transcript": "/t/2.jsonl", "sessionId": "s"}
    )


def test_queued_requests_are_taken_oldest_first(tmp_path: Path) -> None:
    holder, other = ExtractSlot(str(tmp_path)), ExtractSlot(str(tmp_path))
    assert holder.acquire_or_queue({"transcript": "mine"})
    for number in range(5):
        assert not other.acquire_or_queue({"transcript": f"t{number}", "sessionId": f"s{number}"})
        path = tmp_path / QUEUE_DIR / queue_name({"sessionId": f"s{number}"})
        os.utime(path, ns=(number * 10**9, number * 10**9))
    order = [holder.take_queued() for _ in range(5)]
    assert [r and r["transcript"] for r in order] == ["t0", "t1", "t2", "t3", "t4"]
    holder.release()


def test_release_takes_the_slot_back_for_a_request_queued_after_the_last_look(
    tmp_path: Path,
) -> None:
    holder, other = ExtractSlot(str(tmp_path)), ExtractSlot(str(tmp_path))
    assert holder.acquire_or_queue({"transcript": "a"})
    assert holder.take_queued() is None
    assert not other.acquire_or_queue({"transcript": "late", "sessionId": "s-late"})
    assert holder.release() is True  # holds the slot again, to run it
    assert holder.take_queued() == {"transcript": "late", "sessionId": "s-late"}
    assert holder.take_queued() is None
    assert holder.release() is False
    assert queued_files(tmp_path) == []
    assert other.acquire_or_queue({"transcript": "next"})  # release freed the slot
    other.release()


def test_a_request_taken_by_a_killed_holder_is_queued_again(tmp_path: Path) -> None:
    code = (
        "import os, sys\n"
        "from qmem_git.store.extractqueue import ExtractSlot\n"
        f"slot = ExtractSlot({str(tmp_path)!r})\n"
        "assert slot.acquire_or_queue({'transcript': 'own'})\n"
        "print(slot.take_queued()['transcript'], flush=True)\n"
        "os.kill(os.getpid(), 9)\n"
    )
    holder = ExtractSlot(str(tmp_path))
    assert holder.acquire_or_queue({"transcript": "x"})
    other = ExtractSlot(str(tmp_path))
    assert not other.acquire_or_queue({"transcript": "queued", "sessionId": "s-q"})
    holder.abandon()  # gives the slot up without running the queued request
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == -9
    assert done.stdout.strip() == "queued"  # it took the request, then died
    assert queued_files(tmp_path)[0].endswith(".json.taken")
    after = ExtractSlot(str(tmp_path))
    assert after.acquire_or_queue({"transcript": "next"})
    assert after.take_queued() == {"transcript": "queued", "sessionId": "s-q"}
    assert after.release() is False
    assert queued_files(tmp_path) == []


def test_a_holder_that_frees_the_slot_while_we_queue_lets_us_run_our_own(tmp_path: Path) -> None:
    slot = ExtractSlot(str(tmp_path))
    holder = ExtractSlot(str(tmp_path))
    assert holder.acquire_or_queue({"transcript": "h"})
    # queue by hand as a process would, then find the slot free on the second attempt
    request = {"transcript": "mine", "sessionId": "s"}
    holder.release()
    assert slot.acquire_or_queue(request)
    assert slot.take_queued() is None  # ours was not left in the queue to run twice
    slot.release()


def test_unreadable_queue_entries_read_as_nothing(tmp_path: Path) -> None:
    slot = ExtractSlot(str(tmp_path))
    assert slot.acquire_or_queue({"transcript": "a"})
    (tmp_path / QUEUE_DIR).mkdir(exist_ok=True)
    (tmp_path / QUEUE_DIR / "bad.json").write_text("[1, 2]")
    (tmp_path / LEGACY_QUEUE_FILE).write_text("{not json")
    assert slot.take_queued() is None
    assert queued_files(tmp_path) == []
    assert not (tmp_path / LEGACY_QUEUE_FILE).exists()
    slot.release()


def test_a_request_left_by_an_earlier_version_is_run(tmp_path: Path) -> None:
    slot = ExtractSlot(str(tmp_path))
    (tmp_path / LEGACY_QUEUE_FILE).write_text(json.dumps({"transcript": "old"}))
    assert slot.acquire_or_queue({"transcript": "a"})
    assert slot.take_queued() == {"transcript": "old"}
    assert slot.take_queued() is None
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
