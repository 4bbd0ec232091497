"""The Bedrock Runtime Converse fake (`POST /model/{id}/converse` JSON, `…/converse-stream` AWS
event-stream frames, see `eventstream`), written from the botocore service model: the events in
the API's order (messageStart, content block deltas, contentBlockStop, messageStop, metadata with
usage) and the error bodies with their `x-amzn-ErrorType`. Prompt caching counts the `system` +
`toolConfig` prefix when either carries a `cachePoint`."""

from __future__ import annotations

import json
from typing import Any

from . import eventstream
from .model_base import FakeHandler, answer, call_id, has_key, pieces, texts

FAILURES = {
    "rate_limited": (429, "ThrottlingException", "Too many requests, please wait before trying again."),
    "overloaded": (
        503,
        "ServiceUnavailableException",
        "The service is temporarily unable to handle the request.",
    ),
    "server_error": (500, "InternalServerException", "The server encountered an internal error."),
    "prompt_too_long": (400, "ValidationException", "Input is too long for requested model."),
}


def failure_body(mode: str) -> tuple[int, dict[str, Any]]:
    status, kind, msg = FAILURES[mode]
    return status, {"__type": kind, "message": msg}


def converse(h: FakeHandler, body: dict[str, Any], raw: bytes, stream: bool, drop: bool) -> None:
    msgs = body.get("messages") or []
    blocks = (msgs[-1] if msgs else {}).get("content") or []
    results = [b["toolResult"] for b in blocks if "toolResult" in b]
    user = "".join(b.get("text", "") for b in blocks if "text" in b)
    kind, text = answer(user, texts(results[-1].get("content")) if results else None)
    cached = has_key(body.get("system"), "cachePoint") or has_key(body.get("toolConfig"), "cachePoint")
    prefix = json.dumps([body.get("system"), body.get("toolConfig")], sort_keys=True) if cached else None
    u = h.usage(raw, prefix)
    usage: dict[str, int] = {
        "inputTokens": u["input"],
        "outputTokens": u["output"],
        "totalTokens": u["input"] + u["output"] + u["read"] + u["write"],
    }
    if cached:
        usage.update(cacheReadInputTokens=u["read"], cacheWriteInputTokens=u["write"])
    tool_id = call_id(raw, "tooluse_")
    stop = "tool_use" if kind == "tool" else "end_turn"
    if not stream:
        block = (
            {"toolUse": {"input": {}, "name": "time", "toolUseId": tool_id}}
            if kind == "tool"
            else {"text": text}
        )
        out = {
            "metrics": {"latencyMs": 5},
            "output": {"message": {"content": [block], "role": "assistant"}},
            "stopReason": stop,
            "usage": usage,
        }
        return h.send_json(200, out)
    evs = [eventstream.event("messageStart", {"role": "assistant"})]
    if kind == "tool":
        start = {"toolUse": {"name": "time", "toolUseId": tool_id}}
        evs.append(eventstream.event("contentBlockStart", {"contentBlockIndex": 0, "start": start}))
        delta = {"toolUse": {"input": "{}"}}
        evs.append(eventstream.event("contentBlockDelta", {"contentBlockIndex": 0, "delta": delta}))
    else:
        for piece in pieces(str(text)):
            evs.append(
                eventstream.event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": piece}})
            )
    evs.append(eventstream.event("contentBlockStop", {"contentBlockIndex": 0}))
    evs.append(eventstream.event("messageStop", {"stopReason": stop}))
    evs.append(eventstream.event("metadata", {"metrics": {"latencyMs": 5}, "usage": usage}))
    h.send_stream("application/vnd.amazon.eventstream", evs, drop)
