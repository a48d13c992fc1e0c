"""Drive the real ``qwen -p`` against a scripted model server, both inside one network namespace.

Run as a script under ``unshare -n`` (``python headless.py RUN.json``); ``headless_common``
does the running. Here: OpenAI-style chat completions on 127.0.0.1 (streamed as SSE when asked,
tool calls included), replies picked by rules (see ``pick``) matched against each request.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # headless_common, run by path

from headless_common import Handler, Rule, main, matching_rule

LISTED = re.compile(r"- \[[a-z]+\] (.+?) \(\d{4}-\d\d-\d\dT[^)]*\): ")


def pick(rules: list[Rule], body: dict[str, Any], used: dict[int, int]) -> dict[str, Any]:
    """The reply of the first rule matching the request's last message; else the default.

    Matching the last message (not the whole request) tells Qwen's main turn from its side
    queries and from the continuation after a tool result, which repeat the earlier messages.
    """
    messages = body.get("messages") or [{}]
    last = json.dumps(messages[-1], ensure_ascii=False)
    rule = matching_rule(rules, last, used)
    if rule is None:
        return {"content": "OK."}
    reply = {**rule["reply"], "delay": rule.get("delay", 0)}
    if rule.get("select_listed"):
        reply["tool_calls"] = [select_listed(last)]
    return reply


def select_listed(text: str) -> dict[str, Any]:
    """Qwen's recall selector (``respond_in_schema``) choosing every memory its query lists.

    The query lists one memory a line: ``- [<type>] <absolute path> (<mtime>): <description>``.
    """
    body = json.loads(text).get("content")
    if isinstance(body, list):
        body = "".join(part.get("text", "") for part in body if isinstance(part, dict))
    listed = (LISTED.match(line) for line in str(body).splitlines())
    paths = [match.group(1) for match in listed if match]
    return {"name": "respond_in_schema", "arguments": {"selected_memories": paths}}


def completion(reply: dict[str, Any], model: str) -> dict[str, Any]:
    """A whole (non-streamed) chat completion for ``reply``."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.get("content", "")}
    calls = _tool_calls(reply)
    if calls:
        message["tool_calls"] = calls
    return {
        "id": "chatcmpl-qmem",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def chunks(reply: dict[str, Any], model: str) -> list[dict[str, Any]]:
    """The same reply as streamed chunks: role, content, each tool call, finish, usage."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-qmem",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    out = [chunk({"role": "assistant", "content": ""})]
    if reply.get("content"):
        out.append(chunk({"content": reply["content"]}))
    calls = _tool_calls(reply)
    for index, call in enumerate(calls):
        out.append(chunk({"tool_calls": [{"index": index, **call}]}))
    out.append(chunk({}, "tool_calls" if calls else "stop"))
    usage = chunk({})
    usage["choices"] = []
    usage["usage"] = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    out.append(usage)
    return out


def _tool_calls(reply: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "id": f"call_{index}_{call['name']}",
            "type": "function",
            "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])},
        }
        for index, call in enumerate(reply.get("tool_calls", []))
    ]


class Completions(Handler):
    """Chat completions, each request recorded; ``GET`` (the model list) answers an empty one."""

    def do_POST(self) -> None:
        body = self.json_body()
        reply, _ = self.server.answer(self, body, pick)
        model = str(body.get("model") or "test-model")
        if body.get("stream"):
            data = b"".join(
                b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks(reply, model)
            )
            self.send(data + b"data: [DONE]\n\n", "text/event-stream")
        else:
            self.send(json.dumps(completion(reply, model)).encode())

    def do_GET(self) -> None:
        self.send(b'{"object":"list","data":[]}')


if __name__ == "__main__":
    qwen = {"client": "qwen", "handler": Completions, "url_variable": "OPENAI_BASE_URL"}
    sys.exit(main(sys.argv[1:], **qwen, url_path="/v1"))
