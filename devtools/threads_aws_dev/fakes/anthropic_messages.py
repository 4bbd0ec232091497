"""The Anthropic Messages API fake (`POST /v1/messages`, JSON or SSE), written from its public
reference: the message, its stream events in the API's order (message_start, content blocks,
message_delta with the final usage, message_stop), and the API's error bodies. Prompt caching
counts the `system` + `tools` prefix when either carries `cache_control`."""

from __future__ import annotations

import json
from typing import Any

from .model_base import FakeHandler, answer, call_id, has_key, pieces, texts

FAILURES = {
    "rate_limited": (429, "rate_limit_error", "Number of request tokens has exceeded your rate limit."),
    "overloaded": (529, "overloaded_error", "Overloaded"),
    "server_error": (500, "api_error", "Internal server error"),
    "prompt_too_long": (400, "invalid_request_error", "prompt is too long: 208656 tokens > 200000 maximum"),
}


def failure_body(mode: str) -> tuple[int, dict[str, Any]]:
    status, kind, msg = FAILURES[mode]
    return status, {"error": {"message": msg, "type": kind}, "request_id": "req_fake", "type": "error"}


def messages(h: FakeHandler, body: dict[str, Any], raw: bytes, drop: bool) -> None:
    msgs = body.get("messages") or []
    last = msgs[-1] if msgs else {}
    content = last.get("content")
    blocks: list[Any] = (
        content if isinstance(content, list) else [{"text": str(content or ""), "type": "text"}]
    )
    results = [b for b in blocks if b.get("type") == "tool_result"]
    kind, text = answer(texts(blocks), texts(results[-1].get("content")) if results else None)
    cached = has_key(body.get("system"), "cache_control") or has_key(body.get("tools"), "cache_control")
    prefix = json.dumps([body.get("system"), body.get("tools")], sort_keys=True) if cached else None
    u = h.usage(raw, prefix)
    usage = {
        "cache_creation_input_tokens": u["write"],
        "cache_read_input_tokens": u["read"],
        "input_tokens": u["input"],
        "output_tokens": u["output"],
    }
    if kind == "tool":
        block: dict[str, Any] = {
            "id": call_id(raw, "toolu_"),
            "input": {},
            "name": "time",
            "type": "tool_use",
        }
        stop = "tool_use"
    else:
        block = {"text": text, "type": "text"}
        stop = "end_turn"
    msg = {
        "content": [block],
        "id": "msg_" + call_id(raw, ""),
        "model": body.get("model"),
        "role": "assistant",
        "stop_reason": stop,
        "stop_sequence": None,
        "type": "message",
        "usage": usage,
    }
    if not body.get("stream"):
        return h.send_json(200, msg)
    events = _events(msg, block, kind, str(text), stop, u["output"])
    h.send_stream(
        "text/event-stream", (f"event: {n}\ndata: {json.dumps(d)}\n\n".encode() for n, d in events), drop
    )


def _events(
    msg: dict[str, Any], block: dict[str, Any], kind: str, text: str, stop: str, output_tokens: int
) -> list[tuple[str, dict[str, Any]]]:
    """The SSE events of a streamed `msg`: (event name, data)."""
    usage = msg["usage"]
    start = {**msg, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"message": start, "type": "message_start"})
    ]
    if kind == "tool":
        events.append(
            ("content_block_start", {"content_block": block, "index": 0, "type": "content_block_start"})
        )
        delta = {"partial_json": "{}", "type": "input_json_delta"}
        events.append(("content_block_delta", {"delta": delta, "index": 0, "type": "content_block_delta"}))
    else:
        empty = {"text": "", "type": "text"}
        events.append(
            ("content_block_start", {"content_block": empty, "index": 0, "type": "content_block_start"})
        )
        events.append(("ping", {"type": "ping"}))
        for piece in pieces(text):
            delta = {"text": piece, "type": "text_delta"}
            events.append(
                ("content_block_delta", {"delta": delta, "index": 0, "type": "content_block_delta"})
            )
    events.append(("content_block_stop", {"index": 0, "type": "content_block_stop"}))
    end = {"stop_reason": stop, "stop_sequence": None}
    events.append(
        ("message_delta", {"delta": end, "type": "message_delta", "usage": {"output_tokens": output_tokens}})
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events
