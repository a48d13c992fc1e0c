"""The chat-completions client and the model configuration, against a real local HTTP server."""

from __future__ import annotations

import json
import logging
import os
import pickle
import time
from collections.abc import Iterator
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path

import pytest

from qmem_git.integrations import llm
from qmem_git.integrations.llm import ChatClient, ModelCallError, check_endpoint
from qmem_git.modelconfig import (
    ApiKey,
    ModelConfig,
    config_file_path,
    load_model_config,
    parse_model_config,
)
from qmem_git.settings import build_settings

from .model_server import API_KEY, MODEL, ModelServer, Reply, chat, error, refused_url

GITHUB_PAT = "ghp_" + "a1B2c3D4e5" * 3 + "abcdef"


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as running:
        yield running


def no_key(*texts: object) -> None:
    for text in texts:
        assert API_KEY not in str(text)


# --------------------------------------------------------------------------- requests


def test_request_is_well_formed_chat_completions(server: ModelServer) -> None:
    server.script(chat({"ok": True}))
    answer = ChatClient(server.config()).complete_json("system text", "user text")
    assert answer == {"ok": True}
    (request,) = server.requests
    assert request.method == "POST"
    assert request.path == "/v1/chat/completions"
    assert request.headers["Authorization"] == f"Bearer {API_KEY}"
    assert request.headers["Content-Type"] == "application/json"
    body = request.json
    assert body["model"] == MODEL
    assert body["messages"] == [
        {"role": "system", "content": "system text"},
        {"role": "user", "content": "user text"},
    ]
    assert body["response_format"] == {"type": "json_object"}
    assert body["temperature"] == 0


def test_keyless_endpoint_sends_no_authorization(server: ModelServer) -> None:
    server.script(chat({}))
    ChatClient(server.config(api_key=None)).complete_json("s", "u")
    assert "Authorization" not in server.requests[0].headers


def test_secrets_and_the_key_itself_are_redacted_before_sending(server: ModelServer) -> None:
    server.script(chat({}))
    ChatClient(server.config()).complete_json("s", f"token {GITHUB_PAT} and key {API_KEY}")
    body = server.requests[0].body.decode()
    assert GITHUB_PAT not in body and API_KEY not in body
    assert "[REDACTED:github-pat]" in body
    assert llm.KEY_PLACEHOLDER in body


def test_fenced_json_answer_is_accepted(server: ModelServer) -> None:
    server.script(chat('```json\n{"a": 1}\n```'))
    assert ChatClient(server.config()).complete_json("s", "u") == {"a": 1}


# --------------------------------------------------------------------------- failures


def call(config: ModelConfig, sleeps: list[float] | None = None) -> ModelCallError:
    client = ChatClient(config, sleep=(sleeps.append if sleeps is not None else time.sleep))
    with pytest.raises(ModelCallError) as info:
        client.complete_json("s", "u")
    exc = info.value
    no_key(exc, repr(exc), exc.message, exc.hint)
    # no chained requests exception (its text names URLs and holds the request) in tracebacks
    assert exc.__cause__ is None and (exc.__context__ is None or exc.__suppress_context__)
    return exc


def test_401_is_an_auth_failure_without_the_key(server: ModelServer) -> None:
    server.script(error(401, f"Incorrect API key provided: {API_KEY}"))
    exc = call(server.config())
    assert exc.kind == llm.AUTH and exc.status == 401
    assert "401" in exc.message and llm.KEY_PLACEHOLDER in exc.message
    assert len(server.requests) == 1  # never retried


def test_429_honours_retry_after_then_succeeds(server: ModelServer) -> None:
    server.script(error(429, headers={"Retry-After": "3"}), chat({"ok": 1}))
    sleeps: list[float] = []
    client = ChatClient(server.config(max_retry_wait=5.0), sleep=sleeps.append)
    assert client.complete_json("s", "u") == {"ok": 1}
    assert sleeps == [3.0]
    assert len(server.requests) == 2


def test_retry_after_wait_is_capped_and_really_waited(server: ModelServer) -> None:
    server.script(error(429, headers={"Retry-After": "120"}), chat({"ok": 1}))
    started = time.monotonic()
    assert ChatClient(server.config(max_retry_wait=0.3)).complete_json("s", "u") == {"ok": 1}
    gap = server.requests[1].at - server.requests[0].at
    assert 0.25 <= gap < 5
    assert time.monotonic() - started < 5


def test_429_gives_up_after_bounded_retries(server: ModelServer) -> None:
    server.script(*[error(429, headers={"Retry-After": "1"}) for _ in range(5)])
    sleeps: list[float] = []
    exc = call(server.config(max_retries=2, max_retry_wait=0.5), sleeps)
    assert exc.kind == llm.RATE_LIMITED
    assert len(server.requests) == 3 and sleeps == [0.5, 0.5]


def test_500_retries_with_backoff_then_fails(server: ModelServer) -> None:
    server.script(error(500), error(503), error(502))
    sleeps: list[float] = []
    exc = call(server.config(max_retry_wait=10.0), sleeps)
    assert exc.kind == llm.SERVER_ERROR and exc.status == 502
    assert sleeps == [0.5, 1.0]  # exponential backoff without Retry-After


def test_500_then_success(server: ModelServer) -> None:
    server.script(error(500), chat({"ok": 2}))
    assert ChatClient(server.config(), sleep=lambda _: None).complete_json("s", "u") == {"ok": 2}


def test_hung_server_times_out_quickly(server: ModelServer) -> None:
    server.script(chat({}, delay=5))
    started = time.monotonic()
    exc = call(server.config(read_timeout=0.3))
    assert exc.kind == llm.TIMEOUT
    assert time.monotonic() - started < 2
    assert len(server.requests) == 1  # a timeout is not retried


def test_connection_refused() -> None:
    config = ModelConfig(refused_url(), MODEL, ApiKey(API_KEY), connect_timeout=1)
    exc = call(config)
    assert exc.kind == llm.CONNECTION
    assert "cannot connect" in exc.message


def test_dns_failure() -> None:
    config = ModelConfig("http://qmem-no-such-host.invalid/v1", MODEL, ApiKey(API_KEY), 2, 2)
    exc = call(config)
    assert exc.kind == llm.DNS
    assert "qmem-no-such-host.invalid" in exc.message


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (error(404), llm.PROTOCOL),
        (Reply(200, "<html>hello</html>"), llm.PROTOCOL),
        (Reply(200, {"data": []}), llm.PROTOCOL),
        (Reply(200, {"choices": [{"message": {"content": None}}]}), llm.PROTOCOL),
        (chat("Sure! Here are the patches: none."), llm.INVALID_ANSWER),
        (error(400, "model qwen-test does not exist"), llm.HTTP_ERROR),
    ],
)
def test_unusable_answers(server: ModelServer, reply: Reply, kind: str) -> None:
    server.script(reply)
    assert call(server.config()).kind == kind


def test_parse_retry_after_http_date() -> None:
    now = datetime(2026, 4, 2, 9, 0, 0, tzinfo=timezone.utc)
    assert llm.parse_retry_after("Thu, 02 Apr 2026 09:00:07 GMT", now) == 7.0
    assert llm.parse_retry_after("Thu, 02 Apr 2026 08:00:00 GMT", now) == 0.0
    assert llm.parse_retry_after("2.5", now) == 2.5
    assert llm.parse_retry_after("soon", now) is None


def test_key_never_logged(server: ModelServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    server.script(error(500), chat({}), error(401, API_KEY))
    client = ChatClient(server.config(), sleep=lambda _: None)
    client.complete_json("s", "u")
    with pytest.raises(ModelCallError):
        client.complete_json("s", "u")
    assert caplog.records  # requests/urllib3 and our client did log
    no_key(caplog.text)


# --------------------------------------------------------------------------- doctor


def test_check_endpoint_reports_model_and_round_trip(server: ModelServer) -> None:
    server.script(chat({"ok": True}))
    report = check_endpoint(server.config())
    assert report.ok and report.model == MODEL
    assert report.round_trip_ms is not None and report.round_trip_ms >= 0
    assert report.url == server.base_url + "/chat/completions"
    assert server.requests[0].json["max_tokens"] == 16


@pytest.mark.parametrize(
    ("reply", "kind", "words"),
    [
        (error(401, API_KEY), llm.AUTH, "401"),
        (error(404), llm.PROTOCOL, "no chat-completions API"),
        (Reply(200, "<html/>"), llm.PROTOCOL, "not OpenAI-compatible"),
        (error(503), llm.SERVER_ERROR, "503"),
    ],
)
def test_check_endpoint_failures(server: ModelServer, reply: Reply, kind: str, words: str) -> None:
    server.script(reply)
    report = check_endpoint(server.config())
    assert not report.ok and report.kind == kind
    assert report.reason is not None and words in report.reason
    assert len(server.requests) == 1  # doctor never retries
    no_key(report, report.reason, report.hint)


def test_check_endpoint_timeout_and_refused(server: ModelServer) -> None:
    server.script(chat({}, delay=5))
    assert check_endpoint(server.config(read_timeout=0.3)).kind == llm.TIMEOUT
    refused = check_endpoint(ModelConfig(refused_url(), MODEL, ApiKey(API_KEY)))
    assert refused.kind == llm.CONNECTION


def test_check_endpoint_warns_when_answer_is_not_json(server: ModelServer) -> None:
    server.script(chat("pong"))
    report = check_endpoint(server.config())
    assert report.ok and report.warning


# --------------------------------------------------------------------------- configuration


def test_config_from_environment_with_key_fallbacks() -> None:
    env = {
        "QMEM_LLM_BASE_URL": "https://dashscope.aliyuncs.com/compatible-mode/v1/",
        "QMEM_LLM_MODEL": "qwen-plus",
        "OPENAI_API_KEY": "openai-key",
        "DASHSCOPE_API_KEY": "dashscope-key",
    }
    config = parse_model_config(env, None).config
    assert config is not None
    assert config.endpoint == "https://dashscope.aliyuncs.com/compatible-mode/v1/chat/completions"
    assert config.api_key == ApiKey("dashscope-key")
    assert parse_model_config({**env, "QMEM_LLM_API_KEY": "own"}, None).config.api_key == ApiKey(  # type: ignore[union-attr]
        "own"
    )
    del env["DASHSCOPE_API_KEY"]
    assert parse_model_config(env, None).config.api_key == ApiKey("openai-key")  # type: ignore[union-attr]


def test_config_file_json_and_environment_precedence() -> None:
    text = json.dumps(
        {
            "llm": {
                "base_url": "http://localhost:11434/v1",
                "model": "qwen2.5:7b",
                "timeout": 90,
                "max_retries": 9,
                "api_key_env": "MY_KEY",
            }
        }
    )
    result = parse_model_config({"MY_KEY": "from-named-env"}, text, source="cfg.json")
    config = result.config
    assert config is not None and not result.problems
    assert (config.base_url, config.model, config.read_timeout) == (
        "http://localhost:11434/v1",
        "qwen2.5:7b",
        90.0,
    )
    assert config.max_retries == 5  # capped
    assert config.api_key == ApiKey("from-named-env")
    assert config.source == "cfg.json"
    env = {"QMEM_LLM_MODEL": "llama3", "QMEM_LLM_TIMEOUT": "7"}
    override = parse_model_config(env, text).config
    assert override is not None
    assert (override.model, override.read_timeout) == ("llama3", 7.0)


@pytest.mark.parametrize(
    ("env", "text", "problem"),
    [
        ({}, "{not json", "not valid JSON"),
        ({}, '{"llm": []}', '"llm" must be a JSON object'),
        ({"QMEM_LLM_BASE_URL": "http://x/v1"}, None, "half configured"),
        ({"QMEM_LLM_BASE_URL": "ftp://x", "QMEM_LLM_MODEL": "m"}, None, "http:// or https://"),
    ],
)
def test_bad_configuration_means_no_model_and_a_problem(
    env: dict[str, str], text: str | None, problem: str
) -> None:
    result = parse_model_config(env, text)
    assert result.config is None
    assert any(problem in p for p in result.problems)


def test_nothing_configured_is_no_model() -> None:
    assert parse_model_config({"OPENAI_API_KEY": "k"}, None).config is None


def test_config_file_location_and_settings(isolated_home: Path, tmp_path: Path) -> None:
    env = {"HOME": str(isolated_home)}
    path = Path(config_file_path(env, str(isolated_home)))
    assert path == isolated_home / ".config" / "qmem-git" / "config.json"
    assert build_settings(env, memory_dir=str(tmp_path / "m")).model is None
    path.parent.mkdir(parents=True)
    path.write_text('{"llm": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}}')
    settings = build_settings(
        {**env, "QMEM_LLM_API_KEY": API_KEY},
        memory_dir=str(tmp_path / "m"),
        home=str(isolated_home),
    )
    assert settings.model is not None and settings.model.model == "m"
    no_key(repr(settings), str(settings), repr(settings.model))
    xdg = {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    assert config_file_path(xdg, "/nowhere") == str(tmp_path / "xdg" / "qmem-git" / "config.json")
    assert config_file_path({"QMEM_CONFIG": "/etc/q.json"}, "/h") == "/etc/q.json"


def test_unreadable_config_file_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    result = load_model_config({"QMEM_CONFIG": str(tmp_path)}, str(tmp_path))  # a directory
    assert result.config is None and result.problems


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_a_config_file_that_is_a_fifo_or_device_is_a_problem_not_a_hang(
    tmp_path: Path, kind: str
) -> None:
    path = kind
    if kind == "fifo":
        path = str(tmp_path / "config.json")
        os.mkfifo(path)
    result = load_model_config({"QMEM_CONFIG": path}, str(tmp_path))
    assert result.config is None
    assert result.problems == (f"{path}: not a regular file",)


def test_api_key_cannot_leak_through_repr_json_or_pickle(server: ModelServer) -> None:
    config = server.config()
    no_key(repr(config), str(config), repr(config.api_key), f"{config.api_key}")
    no_key(repr(ChatClient(config)))
    with pytest.raises(TypeError):
        json.dumps(asdict(config))
    with pytest.raises(TypeError):
        pickle.dumps(config.api_key)


# --------------------------------------------------------------------------- deadline and size


def wait_for_sent(server: ModelServer, count: int = 1) -> list[int]:
    """The body sizes the server managed to write, once its handlers have finished."""
    end = time.monotonic() + 10
    while len(server.sent) < count and time.monotonic() < end:
        time.sleep(0.02)
    return server.sent


@pytest.mark.parametrize("head", [False, True], ids=["body", "status-line-and-headers"])
def test_a_trickling_answer_is_cut_at_one_deadline(server: ModelServer, head: bool) -> None:
    """requests' read timeout restarts at every byte; the attempt's deadline does not."""
    server.script(chat({"ok": True}, trickle=0.05, trickle_head=head))  # ~15 s to send it all
    started = time.monotonic()
    exc = call(server.config(connect_timeout=0.5, read_timeout=0.5))
    assert time.monotonic() - started < 2.5
    assert exc.kind == llm.TIMEOUT
    assert "complete answer within 1 s" in exc.message
    assert len(server.requests) == 1  # a timeout is not retried


def test_a_slow_but_steady_answer_within_the_deadline_is_read(server: ModelServer) -> None:
    server.script(chat({"ok": True}, trickle=0.002))  # ~0.6 s, every read well inside 1 s
    assert ChatClient(server.config(read_timeout=1.0)).complete_json("s", "u") == {"ok": True}


def test_an_endless_answer_is_cut_at_the_size_cap(server: ModelServer) -> None:
    # 128 MiB of JSON whitespace after a valid answer, no Content-Length: only the cap stops it
    server.script(chat({"ok": True}, padding=128 * 1024 * 1024, content_length=False))
    exc = call(server.config(read_timeout=10.0))
    assert exc.kind == llm.TOO_LARGE
    assert f"answer larger than {llm.MAX_ANSWER_BYTES} bytes" in exc.message
    (sent,) = wait_for_sent(server)
    assert sent < 64 * 1024 * 1024  # the client hung up instead of reading it all


def test_an_announced_oversized_answer_is_refused_before_reading(server: ModelServer) -> None:
    server.script(chat({"ok": True}, padding=llm.MAX_ANSWER_BYTES))
    assert call(server.config()).kind == llm.TOO_LARGE


def test_a_large_answer_under_the_cap_is_read_whole(server: ModelServer) -> None:
    server.script(chat({"ok": "yes"}, padding=3 * 1024 * 1024, content_length=False))
    assert ChatClient(server.config()).complete_json("s", "u") == {"ok": "yes"}


def test_gzip_answers_are_decoded_and_a_gzip_bomb_hits_the_cap(server: ModelServer) -> None:
    import gzip

    answer = chat({"zipped": 1}).payload()
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    bomb = gzip.compress(answer + b" " * (64 * 1024 * 1024))  # ~64 KiB on the wire
    server.script(Reply(200, gzip.compress(answer), headers), Reply(200, bomb, headers))
    assert ChatClient(server.config()).complete_json("s", "u") == {"zipped": 1}
    assert call(server.config()).kind == llm.TOO_LARGE


@pytest.mark.parametrize(
    "reply",
    [chat("[" * 100_000 + "]" * 100_000), Reply(200, b"[" * 200_000 + b"]" * 200_000)],
    ids=["content", "body"],
)
def test_absurdly_nested_json_is_an_unusable_answer(server: ModelServer, reply: Reply) -> None:
    server.script(reply)
    assert call(server.config()).kind in (llm.INVALID_ANSWER, llm.PROTOCOL)


# --------------------------------------------------------------------------- numbers in the config

BASE = {"base_url": "http://127.0.0.1:9/v1", "model": "m"}


@pytest.mark.parametrize(
    ("key", "raw", "attribute", "default"),
    [
        ("max_retries", "1e999", "max_retries", 2),
        ("max_retries", "-1", "max_retries", 2),
        ("max_retries", "1.5", "max_retries", 2),
        ("max_retries", "NaN", "max_retries", 2),
        ("max_retries", "1" + "0" * 400, "max_retries", 2),  # an int no float can hold
        ("timeout", "1e999", "read_timeout", 30.0),
        ("timeout", "-Infinity", "read_timeout", 30.0),
        ("timeout", "NaN", "read_timeout", 30.0),
        ("timeout", "1e300", "read_timeout", 30.0),
        ("timeout", "0", "read_timeout", 30.0),
        ("connect_timeout", "Infinity", "connect_timeout", 5.0),
        ("connect_timeout", "86400", "connect_timeout", 5.0),
        ("max_retry_wait", "1e999", "max_retry_wait", 10.0),
        ("max_retry_wait", "NaN", "max_retry_wait", 10.0),
        ("max_retry_wait", "true", "max_retry_wait", 10.0),
    ],
)
def test_out_of_range_numbers_are_invalid_fields(
    key: str, raw: str, attribute: str, default: float
) -> None:
    text = json.dumps(BASE)[:-1] + f', "{key}": {raw}}}'
    result = parse_model_config({}, '{"llm": ' + text + "}")
    assert result.config is not None
    assert getattr(result.config, attribute) == default
    assert any(f"llm.{key}" in problem for problem in result.problems)


@pytest.mark.parametrize(
    ("key", "value", "attribute", "expected"),
    [
        ("max_retries", 0, "max_retries", 0),
        ("max_retries", 3.0, "max_retries", 3),
        ("max_retries", 1e300, "max_retries", 5),  # finite: capped as before
        ("timeout", 3600, "read_timeout", 3600.0),
        ("timeout", 0.25, "read_timeout", 0.25),
        ("max_retry_wait", 0, "max_retry_wait", 0.0),
    ],
)
def test_numbers_in_range_are_kept(key: str, value: float, attribute: str, expected: float) -> None:
    result = parse_model_config({}, json.dumps({"llm": {**BASE, key: value}}))
    assert result.config is not None and not result.problems
    assert getattr(result.config, attribute) == expected


@pytest.mark.parametrize("raw", ["inf", "nan", "1e999", "-5", "0", "7200", "soon"])
def test_a_bad_qmem_llm_timeout_falls_back_to_the_file(raw: str) -> None:
    text = json.dumps({"llm": {**BASE, "timeout": 12}})
    result = parse_model_config({"QMEM_LLM_TIMEOUT": raw}, text)
    assert result.config is not None and result.config.read_timeout == 12.0
    assert any("QMEM_LLM_TIMEOUT" in problem for problem in result.problems)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b'{"llm": {"base_url": "http://h/v1", "model": "caf\xe9"}}', "not UTF-8 (byte 0xe9"),
        (b'{"llm": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
        (b" " * (2 * 1024 * 1024), "larger than"),
        (b'{"llm": {"timeout": ' + b"9" * 5000 + b"}}", "not valid JSON (Exceeds the limit"),
    ],
    ids=["latin-1", "deep", "huge", "long-number"],
)
def test_an_unreadable_config_file_is_no_model_and_a_problem(
    tmp_path: Path, data: bytes, problem: str
) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(data)
    result = load_model_config({"QMEM_CONFIG": str(path)}, str(tmp_path))
    assert result.config is None
    assert any(problem in p for p in result.problems), result.problems


def test_a_config_file_with_a_bom_is_read(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"llm": BASE}).encode())
    result = load_model_config({"QMEM_CONFIG": str(path)}, str(tmp_path))
    assert result.config is not None and result.config.model == "m" and not result.problems


@pytest.mark.parametrize(
    "llm_section",
    [
        '{"base_url": "http://127.0.0.1:9/v1", "model": "m", "max_retries": 1e999}',
        '{"base_url": "http://127.0.0.1:9/v1", "model": "m", "timeout": 1e999}',
        '{"base_url": "http://127.0.0.1:9/v1", "model": "m", "connect_timeout": Infinity}',
    ],
)
def test_commands_survive_an_infinite_number_in_the_config(
    isolated_home: Path, tmp_path: Path, llm_section: str
) -> None:
    import os
    import subprocess
    import sys

    config = isolated_home / ".config" / "qmem-git" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text('{"llm": ' + llm_section + "}")
    memory = tmp_path / "memory" / "project"
    memory.mkdir(parents=True)
    (memory / "tf.md").write_text(
        "---\nname: Terraform runs in CI\ndescription: Terraform runs in CI\ntype: project\n"
        "---\n\nTerraform runs in CI only.\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "qmem_git", "--memory-dir", str(tmp_path / "memory"), "recall",
         "terraform"],
        capture_output=True,
        text=True,
        env={**os.environ},
        timeout=60,
        check=False,
    )  # fmt: skip
    assert "Traceback" not in done.stderr and done.returncode == 0, done.stderr
    assert "Terraform runs in CI only." in done.stdout  # the model (unreachable) fell back


# --------------------------------------------------------------------------- redirects


def test_a_redirect_is_not_followed_and_its_body_is_not_read(server: ModelServer) -> None:
    """requests would read a redirect's body whole (no cap, no deadline) and re-POST the
    transcript to the Location; qmem-git refuses the redirect instead."""
    elsewhere = server.base_url + "/elsewhere/chat/completions"
    server.script(
        Reply(307, b"", {"Location": elsewhere}, padding=128 * 1024 * 1024),
        chat({"followed": True}),
    )
    started = time.monotonic()
    exc = call(server.config(read_timeout=10.0))
    assert time.monotonic() - started < 5
    assert exc.kind == llm.REDIRECT and exc.status == 307
    port = server.base_url.split(":")[2].split("/")[0]
    assert exc.message == f"127.0.0.1 redirected the request to http://127.0.0.1:{port} (HTTP 307)"
    assert "set the base URL to the final address" in exc.hint
    assert [r.path for r in server.requests] == ["/v1/chat/completions"]  # no re-POST
    (sent,) = wait_for_sent(server)
    assert sent < 64 * 1024 * 1024  # the client hung up instead of reading it all


@pytest.mark.parametrize("status", [301, 302, 303, 308])
def test_every_redirect_status_is_refused_without_a_retry(server: ModelServer, status: int) -> None:
    server.script(
        Reply(status, b"moved", {"Location": "https://api.example.com/v1/chat/completions"}),
        chat({"followed": True}),
    )
    exc = call(server.config())
    assert exc.kind == llm.REDIRECT
    assert "redirected the request to https://api.example.com (" in exc.message
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    "headers", [{}, {"Location": "http://[::1"}, {"Location": "http://host:99999/"}]
)
def test_a_redirect_without_a_usable_location(server: ModelServer, headers: dict[str, str]) -> None:
    server.script(Reply(302, b"", headers))
    exc = call(server.config())
    assert exc.kind == llm.REDIRECT
    assert "HTTP 302 (a redirect) without a usable Location" in exc.message


def test_check_endpoint_reports_a_redirect(server: ModelServer) -> None:
    server.script(Reply(308, b"", {"Location": "https://api.example.com/v1/chat/completions"}))
    report = check_endpoint(server.config())
    assert not report.ok and report.kind == llm.REDIRECT
    assert report.hint.startswith("set the base URL to the final address")
