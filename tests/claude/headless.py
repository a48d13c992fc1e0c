"""Drive the real ``claude -p`` against a scripted Anthropic Messages API, in one network namespace.

Run as a script under ``unshare -n`` (``python headless.py RUN.json``); ``headless_common``
does the running. Here: the Messages API on 127.0.0.1 (``POST /v1/messages``, streamed as SSE
when asked, ``tool_use`` blocks included, and ``POST /v1/messages/count_tokens``), every request
recorded (method, path, headers, body), replies picked by rules (see ``pick``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # headless_common, run by path

from headless_common import Handler, Rule, main, matching_rule

USAGE = {"input_tokens": 10, "output_tokens": 5}


def pick(rules: list[Rule], body: dict[str, Any], used: dict[int, int]) -> dict[str, Any]:
    """The reply of the first rule matching the request's new messages; else the default.

    The new messages are those after the last assistant message: the prompt (and the ``system``
    message carrying hook context) in the first request, the ``tool_result`` in a continuation.
    Matching them, not the whole request, tells the two apart: a continuation repeats the rest.
    """
    rule = matching_rule(rules, json.dumps(new_messages(body), ensure_ascii=False), used)
    return {**rule["reply"], "delay": rule.get("delay", 0)} if rule else {"text": "OK."}


def new_messages(body: dict[str, Any]) -> list[Any]:
    messages = body.get("messages") or []
    roles = [m.get("role") if isinstance(m, dict) else None for m in messages]
    start = max((i + 1 for i, role in enumerate(roles) if role == "assistant"), default=0)
    return list(messages[start:])


def blocks(reply: dict[str, Any]) -> list[dict[str, Any]]:
    """The reply's content blocks: its text, then one ``tool_use`` per scripted call."""
    out: list[dict[str, Any]] = []
    if reply.get("text"):
        out.append({"type": "text", "text": reply["text"]})
    for index, call in enumerate(reply.get("tool_uses", [])):
        tool_id = f"toolu_qmem{index}_{call['name']}"
        out.append(
            {"type": "tool_use", "id": tool_id, "name": call["name"], "input": call["input"]}
        )
    return out


def message(reply: dict[str, Any], model: str, number: int) -> dict[str, Any]:
    """A whole (non-streamed) Messages API answer for ``reply``."""
    content = blocks(reply)
    tools = any(block["type"] == "tool_use" for block in content)
    return {
        "id": f"msg_qmem{number}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if tools else "end_turn",
        "stop_sequence": None,
        "usage": USAGE,
    }


def events(reply: dict[str, Any], model: str, number: int) -> list[tuple[str, dict[str, Any]]]:
    """The same answer as the SSE events a streamed request gets, in order."""
    whole = message(reply, model, number)
    start = {**whole, "content": [], "stop_reason": None, "usage": {**USAGE, "output_tokens": 1}}
    out: list[tuple[str, dict[str, Any]]] = [("message_start", {"message": start})]
    for index, block in enumerate(whole["content"]):
        if block["type"] == "text":
            first = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            first = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        out.append(("content_block_start", {"index": index, "content_block": first}))
        out.append(("content_block_delta", {"index": index, "delta": delta}))
        out.append(("content_block_stop", {"index": index}))
    final = {"stop_reason": whole["stop_reason"], "stop_sequence": None}
    out.append(("message_delta", {"delta": final, "usage": {"output_tokens": 5}}))
    out.append(("message_stop", {}))
    return [(name, {"type": name, **data}) for name, data in out]


NOT_FOUND = b'{"type":"error","error":{"type":"not_found_error"}}'


class Messages(Handler):
    """The Messages API; any other path is a 404. Every request is recorded."""

    extra_headers = (("request-id", "req_qmem"),)

    def do_POST(self) -> None:
        body = self.json_body()
        path = self.path.split("?")[0]
        if path.endswith("/v1/messages/count_tokens"):
            self.server.record(self, body, "count_tokens")
            self.send(json.dumps({"input_tokens": 100}).encode())
            return
        if not path.endswith("/v1/messages"):
            self.server.record(self, body, "404")
            self.send(NOT_FOUND, status=404)
            return
        reply, number = self.server.answer(self, body, pick)
        model = str(body.get("model") or "test-model")
        if body.get("stream"):
            data = b"".join(
                f"event: {name}\ndata: {json.dumps(event)}\n\n".encode()
                for name, event in events(reply, model, number)
            )
            self.send(data, "text/event-stream")
        else:
            self.send(json.dumps(message(reply, model, number)).encode())

    def do_GET(self) -> None:
        self.server.record(self, None, "404")
        self.send(NOT_FOUND, status=404)

    do_HEAD = do_GET


if __name__ == "__main__":
    claude = {"client": "claude", "handler": Messages, "url_variable": "ANTHROPIC_BASE_URL"}
    sys.exit(main(sys.argv[1:], **claude, stdin=subprocess.DEVNULL))
