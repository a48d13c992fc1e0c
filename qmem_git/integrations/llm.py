"""Chat completions over HTTP(S) against any OpenAI-compatible endpoint (DashScope, OpenAI, vLLM,
Ollama). The only module that imports ``requests`` (ARCHITECTURE §2).

Three promises, each tested against a real local server:

- the API key goes out in the ``Authorization`` header and nowhere else: not in an exception
  message, a log line, a ``repr`` or a commit (errors are built from our own words, and any
  text taken from the server is scrubbed of the key before it is shown);
- text sent is passed through ``redact_secrets`` (spec §14) first, so a token pasted into a
  conversation never leaves the machine;
- failures are a :class:`ModelCallError` with a short ``kind`` (``auth``, ``timeout``, ...),
  which the planners turn into a fallback to the deterministic path.

requests' ``(connect, read)`` timeout bounds each socket read, not the answer: a server that
sends one byte a second keeps a request alive for as long as it likes. So every attempt runs in
a worker thread under one deadline (connect timeout + read timeout, headers and body included),
and the body is read in pieces with a size cap (:data:`MAX_ANSWER_BYTES`).
"""

from __future__ import annotations

import email.utils
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from http.client import HTTPException
from urllib.parse import urljoin, urlsplit, urlunsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3 import exceptions as urllib3_errors
from urllib3.response import HTTPResponse

from qmem_git.core.secrets import redact_secrets
from qmem_git.errors import ModelError
from qmem_git.modelconfig import ModelConfig

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
BACKOFF_BASE = 0.5
MAX_ERROR_DETAIL = 200
KEY_PLACEHOLDER = "[REDACTED:api-key]"
MAX_ANSWER_BYTES = 4 * 1024 * 1024  # a chat answer is a few KB; more is a broken server
READ_CHUNK = 64 * 1024

# kinds of failure; the planners record them as the Qmem-Model-Fallback trailer
AUTH = "auth"
DNS = "dns"
TIMEOUT = "timeout"
CONNECTION = "connection"
TLS = "tls"
RATE_LIMITED = "rate-limited"
SERVER_ERROR = "server-error"
HTTP_ERROR = "http-error"
PROTOCOL = "protocol"
INVALID_ANSWER = "invalid-answer"
TOO_LARGE = "too-large"
REDIRECT = "redirect"

_FENCE = re.compile(r"^\s*```(?:json)?\s*\n?(.*?)\n?```\s*$", re.S | re.I)


class ModelCallError(ModelError):
    """The endpoint could not give a usable answer; ``kind`` is one of the constants above."""

    def __init__(self, kind: str, message: str, hint: str = "", status: int | None = None) -> None:
        super().__init__(message, hint)
        self.kind = kind
        self.status = status


@dataclass(frozen=True)
class EndpointReport:
    """``doctor``'s view of the endpoint: the model and round trip, or why it failed."""

    ok: bool
    model: str
    url: str
    round_trip_ms: int | None = None
    kind: str | None = None
    reason: str | None = None
    hint: str = ""
    warning: str | None = None


@dataclass(frozen=True)
class Answer:
    """One HTTP answer, read whole (within the deadline and the size cap)."""

    status_code: int
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> object:
        """The body as JSON; ValueError when it is not (or is nested absurdly deep)."""
        try:
            return json.loads(self.body)
        except RecursionError:
            raise ValueError("JSON nested too deeply") from None


class _Bearer(requests.auth.AuthBase):
    """Sets the bearer header late, so the key is not held by anything that gets printed.

    Passing an ``auth`` object also stops requests from applying ``~/.netrc`` credentials.
    """

    def __init__(self, config: ModelConfig) -> None:
        self._config = config

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        if self._config.api_key is not None:
            request.headers["Authorization"] = "Bearer " + self._config.api_key.reveal()
        return request

    def __repr__(self) -> str:
        return "_Bearer(***)"


def display_url(url: str) -> str:
    """The URL without any ``user:password@`` part, for messages."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def scrub(text: str, config: ModelConfig) -> str:
    """``text`` with the configured key and any spec §14 secret replaced by placeholders."""
    if config.api_key is not None and config.api_key.reveal():
        text = text.replace(config.api_key.reveal(), KEY_PLACEHOLDER)
    return redact_secrets(text)


class ChatClient:
    """Structured (JSON) chat completions with bounded retries; one instance per operation."""

    def __init__(
        self,
        config: ModelConfig,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self._sleep = sleep
        self._clock = clock

    def __repr__(self) -> str:
        return f"ChatClient(model={self.config.model!r}, url={display_url(self.config.endpoint)!r})"

    def complete_json(self, system: str, user: str, *, max_tokens: int | None = None) -> object:
        """Send one system + user exchange, return the answer parsed as a JSON value."""
        content = self.complete(system, user, max_tokens=max_tokens)
        return parse_json_answer(content)

    def complete(self, system: str, user: str, *, max_tokens: int | None = None) -> str:
        """Send one exchange (redacted) and return the assistant's text."""
        payload = self.payload(system, user, max_tokens)
        response = self._post_with_retries(payload)
        return answer_text(response, self.config)

    def payload(self, system: str, user: str, max_tokens: int | None = None) -> dict[str, object]:
        """The request body; every message is redacted before it is put in."""
        body: dict[str, object] = {
            "model": self.config.model,
            "messages": [
                {"role": "system", "content": scrub(system, self.config)},
                {"role": "user", "content": scrub(user, self.config)},
            ],
            "temperature": 0,
            "response_format": {"type": "json_object"},
            "stream": False,
        }
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        return body

    def _post_with_retries(self, payload: dict[str, object]) -> Answer:
        """POST, retrying 429 and 5xx up to ``max_retries`` times (``Retry-After`` honoured)."""
        attempt = 0
        with _Session() as session:
            session.mount("http://", HTTPAdapter(max_retries=0))
            session.mount("https://", HTTPAdapter(max_retries=0))
            while True:
                response = self._post_once(session, payload, attempt)
                if response.status_code not in RETRY_STATUSES:
                    return response
                if attempt >= self.config.max_retries:
                    raise status_error(response, self.config)
                wait = retry_wait(response, attempt, self.config.max_retry_wait)
                log.debug("HTTP %d, retrying in %.2f s", response.status_code, wait)
                self._sleep(wait)
                attempt += 1

    def _post_once(
        self, session: requests.Session, payload: dict[str, object], attempt: int
    ) -> Answer:
        """One attempt, headers and body, within ``connect + read`` timeout seconds in all.

        The exchange runs in a daemon thread; when the deadline passes first, the attempt is a
        ``timeout`` failure and the thread, left behind, stops at its next read.
        """
        started = self._clock()
        budget = self.config.connect_timeout + self.config.read_timeout
        deadline = started + budget
        outcome: list[Answer | BaseException] = []

        def exchange() -> None:
            try:
                outcome.append(_exchange(session, self.config, payload, deadline, self._clock))
            except BaseException as exc:  # handed to the caller's thread
                outcome.append(exc)

        worker = threading.Thread(target=exchange, name="qmem-model-request", daemon=True)
        worker.start()
        worker.join(max(0.0, deadline - self._clock()))
        if not outcome:
            raise _deadline_error(self.config, budget)
        result = outcome[0]
        if isinstance(result, BaseException):
            raise result
        elapsed = int((self._clock() - started) * 1000)
        log.debug(
            "model request %d to %s: HTTP %d, %d bytes in %d ms",
            attempt + 1,
            display_url(self.config.endpoint),
            result.status_code,
            len(result.body),
            elapsed,
        )
        return result


class _Session(requests.Session):
    """A session that sees no redirect: even with ``allow_redirects=False`` requests reads a
    3xx answer's body whole (no cap, no deadline) to prepare the next request."""

    def get_redirect_target(self, resp: requests.Response) -> None:
        del resp
        return None


class _DeadlinePassed(Exception):
    """The worker noticed the attempt's deadline between two reads."""


class _TooLarge(Exception):
    """The body grew past the cap."""


def _exchange(
    session: requests.Session,
    config: ModelConfig,
    payload: dict[str, object],
    deadline: float,
    clock: Callable[[], float],
) -> Answer:
    """POST and read the whole body (at most :data:`MAX_ANSWER_BYTES`)."""
    try:
        response = session.post(
            config.endpoint,
            json=payload,
            auth=_Bearer(config),
            timeout=(config.connect_timeout, config.read_timeout),
            headers={"Accept": "application/json"},
            stream=True,
            allow_redirects=False,  # a redirect would re-POST the transcript elsewhere
        )
    except requests.RequestException as exc:
        raise transport_error(exc, config) from None
    with response:  # closing it unread drops the connection: a redirect's body is never read
        if 300 <= response.status_code < 400:
            raise _redirected(config, response.status_code, response.headers.get("Location"))
        announced = response.headers.get("Content-Length", "")
        if announced.strip().isdigit() and int(announced) > MAX_ANSWER_BYTES:
            raise _too_large(config)
        try:
            body = _read_body(response.raw, deadline, clock)
        except _DeadlinePassed:
            raise _deadline_error(config, config.connect_timeout + config.read_timeout) from None
        except _TooLarge:
            raise _too_large(config) from None
        except (OSError, HTTPException, urllib3_errors.HTTPError) as exc:
            raise _broken_answer(exc, config) from None
    return Answer(response.status_code, response.headers, body)


def _read_body(
    raw: HTTPResponse, deadline: float, clock: Callable[[], float], cap: int = MAX_ANSWER_BYTES
) -> bytes:
    """The decoded body, read piece by piece; stops past ``deadline`` or ``cap`` bytes.

    ``read1`` (urllib3 >= 2.3) returns whatever has arrived, so the deadline is checked at
    least once per socket read; older urllib3 reads fixed-size pieces (the caller's thread
    keeps the deadline either way). Decoding (gzip) happens piece by piece too, so a
    compressed bomb meets the cap before it fills memory.
    """
    read1 = getattr(raw, "read1", None)
    chunks: list[bytes] = []
    size = 0
    while True:
        if clock() >= deadline:
            raise _DeadlinePassed
        if read1 is not None:
            data = read1(READ_CHUNK, decode_content=True)
        else:  # pragma: no cover - urllib3 < 2.3
            data = raw.read(READ_CHUNK, decode_content=True)
        if not data:
            return b"".join(chunks)
        size += len(data)
        if size > cap:
            raise _TooLarge
        chunks.append(data)


def _where(config: ModelConfig) -> str:
    """The endpoint's host name for messages (no scheme, port, path or credentials)."""
    return urlsplit(config.base_url).hostname or "the endpoint"


def _redirected(config: ModelConfig, status: int, location: str | None) -> ModelCallError:
    """A 3xx answer: where it points (scheme, host and port only), and the fix."""
    origin = _origin(config.endpoint, location) if location else None
    if origin is not None:
        message = f"{_where(config)} redirected the request to {origin} (HTTP {status})"
    else:
        message = f"{_where(config)} answered HTTP {status} (a redirect) without a usable Location"
    return ModelCallError(
        REDIRECT,
        message,
        "set the base URL to the final address; qmem-git does not follow redirects",
        status,
    )


def _origin(base: str, location: str) -> str | None:
    """``scheme://host[:port]`` of a Location the server sent; None without a readable host."""
    try:
        parts = urlsplit(urljoin(base, location))
        host, port = parts.hostname, parts.port
    except ValueError:  # a bad port or IPv6 literal
        return None
    if not host or not host.isprintable() or len(host) > 253:
        return None
    shown = f"[{host}]" if ":" in host else host  # an IPv6 literal
    return f"{parts.scheme}://{shown}" + (f":{port}" if port else "")


def _deadline_error(config: ModelConfig, budget: float) -> ModelCallError:
    where = _where(config)
    return ModelCallError(
        TIMEOUT,
        f"{where} did not send a complete answer within {budget:g} s",
        "raise QMEM_LLM_TIMEOUT or check that the endpoint is up",
    )


def _too_large(config: ModelConfig) -> ModelCallError:
    where = _where(config)
    return ModelCallError(
        TOO_LARGE,
        f"{where} sent an answer larger than {MAX_ANSWER_BYTES} bytes",
        "check the base URL: a chat-completions answer is a few KB",
    )


def _broken_answer(exc: BaseException, config: ModelConfig) -> ModelCallError:
    """A failure while the body was read; our own words, as in :func:`transport_error`."""
    where = _where(config)
    if isinstance(exc, (TimeoutError, urllib3_errors.TimeoutError)):
        return ModelCallError(
            TIMEOUT,
            f"{where} stopped sending its answer for {config.read_timeout:g} s (read timeout)",
            "raise QMEM_LLM_TIMEOUT or check that the endpoint is up",
        )
    return ModelCallError(
        CONNECTION,
        f"the connection to {where} broke off during the answer ({type(exc).__name__})",
        "is the server stable? try again",
    )


def retry_wait(response: Answer, attempt: int, cap: float) -> float:
    """``Retry-After`` (seconds or HTTP date) when given, else exponential backoff; capped."""
    header = response.headers.get("Retry-After")
    wait = parse_retry_after(header, datetime.now(timezone.utc)) if header else None
    if wait is None:
        wait = BACKOFF_BASE * (2**attempt)
    return max(0.0, min(wait, cap))


def parse_retry_after(value: str, now: datetime) -> float | None:
    """Seconds to wait from a ``Retry-After`` value; None when it cannot be read."""
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - now).total_seconds())


def transport_error(exc: requests.RequestException, config: ModelConfig) -> ModelCallError:
    """Our own words for a failed request; the exception text (it names URLs) is not reused."""
    where = _where(config)
    if isinstance(exc, requests.Timeout):
        which = "connect" if isinstance(exc, requests.ConnectTimeout) else "read"
        limit = config.connect_timeout if which == "connect" else config.read_timeout
        return ModelCallError(
            TIMEOUT,
            f"{where} did not answer within {limit:g} s ({which} timeout)",
            "raise QMEM_LLM_TIMEOUT or check that the endpoint is up",
        )
    if isinstance(exc, requests.exceptions.SSLError):
        return ModelCallError(TLS, f"TLS handshake with {where} failed", "check the base URL")
    if _is_dns_failure(exc):
        return ModelCallError(
            DNS, f"cannot resolve host {where}", "check the base URL and your network/DNS"
        )
    if isinstance(exc, requests.ConnectionError):
        return ModelCallError(
            CONNECTION,
            f"cannot connect to {display_url(config.base_url)}",
            "is the server running and the port right?",
        )
    return ModelCallError(CONNECTION, f"request to {where} failed ({type(exc).__name__})")


def _is_dns_failure(exc: BaseException) -> bool:
    """urllib3 2 raises NameResolutionError; older versions only say so in the message."""
    resolution_error: type[BaseException] | None = getattr(
        urllib3_errors, "NameResolutionError", None
    )  # urllib3 >= 2
    seen: set[int] = set()
    pending: list[object] = [exc]
    while pending:
        item = pending.pop()
        if id(item) in seen or not isinstance(item, BaseException):
            continue
        seen.add(id(item))
        if resolution_error is not None and isinstance(item, resolution_error):
            return True
        text = str(item)
        if "Name or service not known" in text or "nodename nor servname" in text:
            return True
        pending += [getattr(item, "reason", None), item.__cause__, item.__context__, *item.args]
    return False


def status_error(response: Answer, config: ModelConfig) -> ModelCallError:
    """A non-2xx answer as a ModelCallError naming the likely cause."""
    status = response.status_code
    detail = error_detail(response, config)
    suffix = f": {detail}" if detail else ""
    if status in (401, 403):
        return ModelCallError(
            AUTH,
            f"the endpoint rejected the API key (HTTP {status}){suffix}",
            "set QMEM_LLM_API_KEY (or DASHSCOPE_API_KEY / OPENAI_API_KEY) to a valid key",
            status,
        )
    if status in (404, 405):
        return ModelCallError(
            PROTOCOL,
            f"no chat-completions API at {display_url(config.endpoint)} (HTTP {status})",
            "the base URL must be the OpenAI-compatible one, usually ending in /v1",
            status,
        )
    if status == 429:
        return ModelCallError(RATE_LIMITED, f"rate limited (HTTP 429){suffix}", "", status)
    if status >= 500:
        return ModelCallError(SERVER_ERROR, f"server error (HTTP {status}){suffix}", "", status)
    return ModelCallError(HTTP_ERROR, f"HTTP {status}{suffix}", "check the model name", status)


def error_detail(response: Answer, config: ModelConfig) -> str:
    """The server's own error message (``error.message``), scrubbed and cut short."""
    try:
        data = response.json()
    except ValueError:
        return ""
    error = data.get("error") if isinstance(data, dict) else None
    message = error.get("message") if isinstance(error, dict) else error
    if not isinstance(message, str):
        return ""
    text = " ".join(scrub(message, config).split())
    return text if len(text) <= MAX_ERROR_DETAIL else text[: MAX_ERROR_DETAIL - 1] + "…"


def answer_text(response: Answer, config: ModelConfig) -> str:
    """``choices[0].message.content`` of a 2xx chat-completions response."""
    if not 200 <= response.status_code < 300:
        raise status_error(response, config)
    try:
        data = response.json()
    except ValueError:
        raise _not_chat_completions(config, "the response is not JSON") from None
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise _not_chat_completions(config, "the response has no choices")
    message = choices[0].get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str):
        raise _not_chat_completions(config, "the first choice has no message content")
    return content


def _not_chat_completions(config: ModelConfig, why: str) -> ModelCallError:
    return ModelCallError(
        PROTOCOL,
        f"{display_url(config.endpoint)} is not OpenAI-compatible: {why}",
        "the base URL must be the OpenAI-compatible one, usually ending in /v1",
    )


def parse_json_answer(content: str) -> object:
    """The answer's JSON value; a surrounding markdown code fence is tolerated."""
    fenced = _FENCE.match(content)
    text = fenced.group(1) if fenced else content
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise ModelCallError(INVALID_ANSWER, "the model's answer is not valid JSON") from None


def check_endpoint(
    config: ModelConfig, *, clock: Callable[[], float] = time.monotonic
) -> EndpointReport:
    """One short request without retries: does the endpoint answer, and how fast?"""
    quick = ModelConfig(
        base_url=config.base_url,
        model=config.model,
        api_key=config.api_key,
        connect_timeout=config.connect_timeout,
        read_timeout=config.read_timeout,
        max_retries=0,
        max_retry_wait=0.0,
        source=config.source,
    )
    client = ChatClient(quick, clock=clock)
    url = display_url(config.endpoint)
    started = clock()
    try:
        content = client.complete(
            'Answer with the JSON object {"ok": true} and nothing else.', "ping", max_tokens=16
        )
    except ModelCallError as exc:
        return EndpointReport(False, config.model, url, None, exc.kind, exc.message, exc.hint)
    elapsed = int((clock() - started) * 1000)
    warning = None
    try:
        parse_json_answer(content)
    except ModelCallError:
        warning = "the model answered, but not with JSON; planners will fall back to heuristics"
    return EndpointReport(True, config.model, url, elapsed, warning=warning)
