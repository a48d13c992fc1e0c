"""The CLI with a model endpoint: --planner, fallbacks exit 0, recall by meaning, doctor."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from clihelpers import git, one_error_line, qmem, qwen_transcript, trailers
from integrations.model_server import API_KEY, ModelServer, chat, error


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as running:
        yield running


def model_env(server: ModelServer) -> dict[str, str]:
    return {
        "QMEM_LLM_BASE_URL": server.base_url,
        "QMEM_LLM_MODEL": "qwen-test",
        "DASHSCOPE_API_KEY": API_KEY,
        "QMEM_LLM_TIMEOUT": "1",
    }


def test_extract_with_model_records_strategy(tmp_path: Path, server: ModelServer) -> None:
    memory = tmp_path / "state" / "memory"
    memory.mkdir(parents=True)  # --memory-dir must exist
    transcript = qwen_transcript(
        tmp_path / "t.jsonl", "s-1", ["I'm the staff engineer owning billing."]
    )
    server.script(
        chat(
            {
                "patches": [
                    {
                        "topic": "user",
                        "summary": "User is the staff engineer who owns billing",
                        "sourceOffset": 0,
                    }
                ]
            }
        )
    )
    run = qmem(memory, "extract", "--transcript", str(transcript), env=model_env(server))
    assert run.code == 0, run.err
    assert trailers(memory)["Qmem-Strategy"] == "model"
    assert API_KEY not in run.out + run.err + git(memory, "log", "-p")


def test_extract_falls_back_and_exits_0(tmp_path: Path, server: ModelServer) -> None:
    memory = tmp_path / "state" / "memory"
    memory.mkdir(parents=True)  # --memory-dir must exist
    transcript = qwen_transcript(tmp_path / "t.jsonl", "s-1", ["I prefer terse responses."])
    server.script(error(401, f"bad key {API_KEY}"))
    run = qmem(
        memory,
        "extract",
        "--planner",
        "model",
        "--transcript",
        str(transcript),
        env=model_env(server),
    )
    assert run.code == 0, run.err
    assert "model not used (auth)" in run.err
    assert trailers(memory)["Qmem-Strategy"] == "heuristic"
    assert trailers(memory)["Qmem-Model-Fallback"] == "auth"
    assert API_KEY not in run.out + run.err + git(memory, "log", "-p")


def test_planner_model_without_endpoint_is_a_usage_error(tmp_path: Path) -> None:
    transcript = qwen_transcript(tmp_path / "t.jsonl", "s-1", ["I prefer terse responses."])
    (tmp_path / "m").mkdir()  # --memory-dir must exist
    run = qmem(tmp_path / "m", "extract", "--planner", "model", "--transcript", str(transcript))
    assert run.code == 2
    assert "needs a model endpoint" in one_error_line(run.err)


def test_recall_by_meaning_and_forget_and_dream(tmp_path: Path, server: ModelServer) -> None:
    memory = tmp_path / "state" / "memory"
    memory.mkdir(parents=True)  # --memory-dir must exist
    assert (
        qmem(
            memory,
            "remember",
            "--type",
            "reference",
            "Latency board is grafana.internal/d/api-latency",
        ).code
        == 0
    )
    env = model_env(server)
    server.script(
        chat(
            {"selected_memories": ["reference/latency-board-is-grafana-internal-d-api-latency.md"]}
        )
    )
    run = qmem(memory, "recall", "where do I see how slow our endpoints respond?", env=env)
    assert run.code == 0 and "## Relevant memory" in run.out, run.err
    assert qmem(memory, "recall", "where do I see how slow our endpoints respond?").out == ""
    server.script(chat({"actions": []}))
    run = qmem(memory, "--json", "dream", "--force", env=env)
    assert run.code == 0 and run.json()["model_fallback"] == "no-op", run.err
    server.script(
        chat(
            {
                "selectedCandidateIds": [
                    "reference/latency-board-is-grafana-internal-d-api-latency.md"
                ]
            }
        )
    )
    run = qmem(memory, "forget", "the performance graphs", env=env)
    assert run.code == 0, run.err
    assert trailers(memory)["Qmem-Strategy"] == "model"


def test_doctor_reports_endpoint(tmp_path: Path, server: ModelServer) -> None:
    memory = tmp_path / "state" / "memory"
    assert qmem(memory, "init").code == 0
    server.script(chat({"ok": True}))
    run = qmem(memory, "doctor", env=model_env(server))
    assert "qwen-test at http://127.0.0.1" in run.out and " ms" in run.out, run.out
    server.script(error(401, API_KEY))
    run = qmem(memory, "doctor", env=model_env(server))
    assert "HTTP 401" in run.out and API_KEY not in run.out + run.err
