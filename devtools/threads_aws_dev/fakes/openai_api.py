"""The OpenAI API fake: Responses (`POST /v1/responses`) and Chat Completions (`POST
/v1/chat/completions`), JSON or SSE, written from the public reference — Responses stream events
carry a `sequence_number`; Chat streams end with a usage chunk and `data: [DONE]`. OpenAI caches
by itself: a Responses request counts its `instructions` + `tools` prefix, Chat none.

Stored responses (`store: true`, the default of the real API; `background: true` needs it): the
response is kept with its `metadata`, `store` and `background` fields and `GET
/v1/responses/{id}` returns it (404 `invalid_request_error` for an unknown id, as the real API).
The fake's model answers at once, so a background response is `completed` when it is stored; a
non-streamed background request answers `queued` (then retrieve it), as the real API does. A
stored response that is retrieved is not billed again: the ledger (`/_fake/requests`) holds the
POSTs only, retrievals are counted apart (`FakeState.retrievals`)."""

from __future__ import annotations

import json
import time
from typing import Any

from .model_base import FakeHandler, answer, call_id, pieces, texts

FAILURES = {
    "rate_limited": (429, "requests", "rate_limit_exceeded", "Rate limit reached for requests"),
    "overloaded": (503, "server_error", None, "The engine is currently overloaded, please try again later"),
    "server_error": (500, "server_error", None, "The server had an error while processing your request."),
    "prompt_too_long": (
        400,
        "invalid_request_error",
        "context_length_exceeded",
        "Your input exceeds the context window of this model.",
    ),
}


def failure_body(mode: str) -> tuple[int, dict[str, Any]]:
    status, kind, code, msg = FAILURES[mode]
    return status, {"error": {"code": code, "message": msg, "param": None, "type": kind}}


# ------------------------------------------------------------------ Responses


NOT_FOUND = "Response with id '{}' not found."


def retrieve(h: FakeHandler, response_id: str) -> None:
    st = h.server.state
    with st.lock:
        st.retrievals.append(response_id)
        resp = st.stored.get(response_id)
    if resp is None:
        err = {"code": None, "message": NOT_FOUND.format(response_id), "param": None}
        return h.send_json(404, {"error": {**err, "type": "invalid_request_error"}})
    h.send_json(200, resp)


def responses(h: FakeHandler, body: dict[str, Any], raw: bytes, drop: bool, hang: bool = False) -> None:
    items = body.get("input") or []
    last = items[-1] if items else {}
    result = last.get("output") if last.get("type") == "function_call_output" else None
    if isinstance(result, list):
        result = texts(result)
    kind, text = answer(texts(last.get("content")), result)
    u = h.usage(raw, json.dumps([body.get("instructions"), body.get("tools")], sort_keys=True))
    if kind == "tool":
        item: dict[str, Any] = {
            "arguments": "{}",
            "call_id": call_id(raw, "call_"),
            "id": call_id(raw, "fc_"),
            "name": "time",
            "status": "completed",
            "type": "function_call",
        }
    else:
        item = {
            "content": [{"annotations": [], "text": text, "type": "output_text"}],
            "id": call_id(raw, "msg_"),
            "role": "assistant",
            "status": "completed",
            "type": "message",
        }
    usage = {
        "input_tokens": u["input"] + u["read"] + u["write"],
        "input_tokens_details": {"cached_tokens": u["read"]},
        "output_tokens": u["output"],
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": u["input"] + u["read"] + u["write"] + u["output"],
    }
    resp = {
        "created_at": int(time.time()),
        "id": call_id(raw, "resp_"),
        "model": body.get("model"),
        "object": "response",
        "output": [item],
        "parallel_tool_calls": True,
        "status": "completed",
        "tool_choice": "auto",
        "tools": [],
        "usage": usage,
        "metadata": body.get("metadata") or {},
        "store": body.get("store", True) is not False,
        "background": bool(body.get("background")),
    }
    if resp["store"]:
        with h.server.state.lock:
            h.server.state.stored[resp["id"]] = resp
    if not body.get("stream"):
        if resp["background"]:  # accepted; its output is read with GET /v1/responses/{id}
            return h.send_json(200, {**resp, "output": [], "status": "queued", "usage": None})
        return h.send_json(200, resp)
    seq = iter(range(1_000_000))
    h.send_stream(
        "text/event-stream",
        (
            f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': next(seq)})}\n\n".encode()
            for e in _response_events(resp, item, kind, str(text))
        ),
        drop,
        3 if hang else None,  # created, the item added, a first delta: then nothing
    )


def _response_events(
    resp: dict[str, Any], item: dict[str, Any], kind: str, text: str
) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {
            "response": {**resp, "output": [], "status": "in_progress", "usage": None},
            "type": "response.created",
        },
        {"item": {**item, "status": "in_progress"}, "output_index": 0, "type": "response.output_item.added"},
    ]
    if kind == "text":
        for piece in pieces(text):
            events.append(
                {
                    "content_index": 0,
                    "delta": piece,
                    "item_id": item["id"],
                    "logprobs": [],
                    "output_index": 0,
                    "type": "response.output_text.delta",
                }
            )
    else:
        events.append(
            {
                "delta": "{}",
                "item_id": item["id"],
                "output_index": 0,
                "type": "response.function_call_arguments.delta",
            }
        )
    events.append({"item": item, "output_index": 0, "type": "response.output_item.done"})
    events.append({"response": resp, "type": "response.completed"})
    return events


# ------------------------------------------------------------------ Chat Completions


def chat(h: FakeHandler, body: dict[str, Any], raw: bytes, drop: bool) -> None:
    msgs = body.get("messages") or []
    last = msgs[-1] if msgs else {}
    result = texts(last.get("content")) if last.get("role") == "tool" else None
    kind, text = answer(texts(last.get("content")), result)
    u = h.usage(raw, None)
    usage = {
        "completion_tokens": u["output"],
        "prompt_tokens": u["input"],
        "prompt_tokens_details": {"cached_tokens": 0},
        "total_tokens": u["input"] + u["output"],
    }
    base = {"created": int(time.time()), "id": call_id(raw, "chatcmpl-"), "model": body.get("model")}
    call = {"function": {"arguments": "{}", "name": "time"}, "id": call_id(raw, "call_"), "type": "function"}
    if not body.get("stream"):
        message: dict[str, Any] = {"content": None if kind == "tool" else text, "role": "assistant"}
        if kind == "tool":
            message["tool_calls"] = [call]
        finish = "tool_calls" if kind == "tool" else "stop"
        choice = {"finish_reason": finish, "index": 0, "message": message}
        return h.send_json(200, {**base, "choices": [choice], "object": "chat.completion", "usage": usage})
    chunks: list[dict[str, Any]] = [
        {"choices": [{"delta": {"content": "", "role": "assistant"}, "finish_reason": None, "index": 0}]}
    ]
    if kind == "tool":
        tool_delta = {"tool_calls": [{**call, "index": 0}]}
        chunks.append({"choices": [{"delta": tool_delta, "finish_reason": None, "index": 0}]})
        chunks.append({"choices": [{"delta": {}, "finish_reason": "tool_calls", "index": 0}]})
    else:
        for piece in pieces(str(text)):
            chunks.append({"choices": [{"delta": {"content": piece}, "finish_reason": None, "index": 0}]})
        chunks.append({"choices": [{"delta": {}, "finish_reason": "stop", "index": 0}]})
    chunks.append({"choices": [], "usage": usage})
    lines = [
        f"data: {json.dumps({**base, 'object': 'chat.completion.chunk', **c})}\n\n".encode() for c in chunks
    ]
    h.send_stream("text/event-stream", [*lines, b"data: [DONE]\n\n"], drop)
