"""The Responses API half of the OpenAI adapter (`openai`): the request built from a
Conversation, the call (streamed or not; background and polled when recovery is on) and the
answer read back, reasoning and hosted-tool items kept as material that can be sent back."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from ..models import DeltaCallback, ModelError, ModelResult
from . import common
from .common import Blobs, Conversation, unsupported
from .openai_common import ID_RE, PROVIDER, _data_url, _filename, _params, _text_doc, _usage

REASONING = "openai_reasoning"
ITEM = "openai_item"
RESPONSES_ID_MAX = 64
DONE = ("completed", "incomplete")  # a response with its final output
TERMINAL = (*DONE, "failed", "cancelled")
POLL_S = 0.5  # the first wait; each later one doubles, up to POLL_MAX_S
POLL_MAX_S = 8.0


def build_responses(conv: Conversation, blobs: Blobs) -> dict[str, Any]:
    params = _params(conv)
    if "stop_sequences" in params:
        raise unsupported("model_error", "the Responses API has no stop sequences (use settings.api: chat)")
    kw: dict[str, Any] = {"input": [], "model": conv.model["name"], "store": False}
    if conv.settings.get("recover") is True:  # kept at OpenAI, running on without us (recovery)
        kw.update(background=True, store=True)
    if conv.system:
        kw["instructions"] = conv.system
    if conv.tools:
        kw["tools"] = [
            {
                "description": t["description"],
                "name": t["name"],
                "parameters": t["input_schema"],
                "strict": False,
                "type": "function",
            }
            for t in conv.tools
        ]
    if "max_tokens" in params:
        kw["max_output_tokens"] = params["max_tokens"]
    for k in ("temperature", "top_p"):
        if k in params:
            kw[k] = params[k]
    if "tool_choice" in params:
        c = params["tool_choice"]
        kw["tool_choice"] = (
            {"any": "required"}.get(c, c) if isinstance(c, str) else {"name": c["name"], "type": "function"}
        )
    if "reasoning_effort" in params:
        kw["reasoning"] = {"effort": params["reasoning_effort"], "summary": "auto"}
    if "reasoning_effort" in params or conv.settings.get("encrypted_reasoning") is True:
        kw["include"] = ["reasoning.encrypted_content"]
    items: list[dict[str, Any]] = kw["input"]
    for m in conv.messages:
        if m.role == "assistant":
            items.extend(_assistant_items(m.parts, blobs))
            continue
        content: list[dict[str, Any]] = []
        for p in m.parts:
            if p["type"] == "tool_result":
                items.append(
                    {
                        "call_id": _rid(p["call_id"]),
                        "output": _result_output(p["content"], blobs, conv),
                        "type": "function_call_output",
                    }
                )
            else:
                content.extend(_input_parts(p, blobs, conv))
        if content:
            items.append({"content": content, "role": "user", "type": "message"})
    return kw


def _rid(call_id: str) -> str:
    return common.outbound_call_id(call_id, ID_RE, RESPONSES_ID_MAX)


def _assistant_items(parts: list[dict[str, Any]], blobs: Blobs) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in parts:
        t = p["type"]
        if t == "text":
            out.append({"content": p["text"], "role": "assistant", "type": "message"})
        elif t == "tool_use":
            out.append(
                {
                    "arguments": json.dumps(p["input"], separators=(",", ":")),
                    "call_id": _rid(p["call_id"]),
                    "name": p["name"],
                    "type": "function_call",
                }
            )
        elif t == "reasoning":
            common.own_material(p, PROVIDER, (REASONING,))
            out.append(dict(blobs.json(p["ref"])))
        elif t == "hosted_tool":
            common.own_material(p, PROVIDER, (ITEM,))
            out.append(dict(blobs.json(p["ref"])))
        elif t != "citation":
            raise unsupported("continuation_unsupported", f"an assistant {t} part cannot be sent to openai")
    return out


def _input_parts(p: dict[str, Any], blobs: Blobs, conv: Conversation) -> list[dict[str, Any]]:
    t = p["type"]
    if t == "text":
        return [{"text": p["text"], "type": "input_text"}]
    if t == "image_ref":
        return [{"detail": "auto", "image_url": _data_url(blobs, p["ref"]), "type": "input_image"}]
    if t == "document_ref":
        if p["ref"]["media_type"] == "application/pdf":
            return [{"file_data": _data_url(blobs, p["ref"]), "filename": _filename(p), "type": "input_file"}]
        return [{"text": _text_doc(blobs, p), "type": "input_text"}]
    if t == "audio_ref":
        return _input_parts(common.audio_as_text(conv, p), blobs, conv)
    if t == "citation":
        return []
    raise unsupported("content_unsupported", f"a {t} part cannot be sent to openai")


def _result_output(parts: list[dict[str, Any]], blobs: Blobs, conv: Conversation) -> Any:
    if all(p["type"] in ("text", "citation") for p in parts):
        return "".join(p["text"] for p in parts if p["type"] == "text")
    out: list[dict[str, Any]] = []
    for p in parts:
        out.extend(_input_parts(p, blobs, conv))
    return out


def _settled(client: Any, response_id: str, deadline: float) -> dict[str, Any]:
    """`GET /responses/{id}` until the response is terminal or `deadline` (monotonic) passes.
    The waits double (0.5, 1, 2, 4, 8, 8 ... s): a long background answer costs a few dozen GETs
    over the 300 s wait, not 600, and a quick one is still read within a second."""
    wait = POLL_S
    while True:
        resp: dict[str, Any] = client.responses.retrieve(response_id).model_dump(mode="json")
        now = time.monotonic()
        if resp.get("status") in TERMINAL or now >= deadline:
            return resp
        time.sleep(min(wait, max(0.0, deadline - now)))
        wait = min(wait * 2, POLL_MAX_S)


def _responses(
    client: Any,
    kw: dict[str, Any],
    stream: bool,
    on_delta: DeltaCallback | None,
    on_accepted: Callable[[str], None] | None = None,
    wait_s: float = 300.0,
) -> dict[str, Any]:
    if not stream:
        resp = client.responses.create(**kw).model_dump(mode="json")
        if kw.get("background") and resp.get("id"):  # queued: it answers when it is done
            if on_accepted is not None:
                on_accepted(resp["id"])
            resp = _settled(client, resp["id"], time.monotonic() + wait_s)
        if resp.get("status") == "failed":
            _failed(resp)
        if resp.get("status") not in DONE:
            raise ModelError("timeout", outcome="unknown", message=f"response {resp.get('status')}")
        return dict(resp)
    final: dict[str, Any] | None = None
    for ev in client.responses.create(stream=True, **kw):
        t = ev.type
        if t == "response.created" and on_accepted is not None:
            on_accepted(ev.response.id)  # before the answer: a worker that dies can look it up
        elif t == "response.output_text.delta":
            common.emit(on_delta, "text", ev.delta)
        elif t in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            common.emit(on_delta, "thinking", ev.delta)
        elif t in ("response.completed", "response.incomplete"):
            final = ev.response.model_dump(mode="json")
        elif t == "response.failed":
            _failed(ev.response.model_dump(mode="json"))
        elif t == "error":
            raise common.classify_status(
                200, err_code=getattr(ev, "code", None), message=str(getattr(ev, "message", ""))
            )
    if final is None:
        raise ModelError(
            "stream_broken", outcome="unknown", message="stream ended without response.completed"
        )
    return final


def _failed(resp: dict[str, Any]) -> None:
    err = resp.get("error") or {}
    raise common.classify_status(
        200, err_type=err.get("code"), err_code=err.get("code"), message=str(err.get("message", ""))
    )


def read_response(resp: dict[str, Any], request: bytes, blobs: Blobs, model: str) -> ModelResult:
    content: list[dict[str, Any]] = []
    refused = False
    for i, item in enumerate(resp.get("output") or []):
        t = item.get("type")
        if t == "message":
            for c in item.get("content") or []:
                if c.get("type") == "output_text":
                    content.append({"text": c.get("text", ""), "type": "text"})
                elif c.get("type") == "refusal":
                    refused = True
                    content.append({"text": c.get("refusal", ""), "type": "text"})
        elif t == "function_call":
            content.append(
                {
                    "call_id": common.inbound_call_id(item.get("call_id"), request, i),
                    "input": common.tool_input(item.get("arguments")),
                    "name": common.tool_name(item.get("name")),
                    "type": "tool_use",
                }
            )
        elif t == "reasoning":
            raw = {k: v for k, v in item.items() if v is not None and k != "status"}
            summary = "\n\n".join(s.get("text", "") for s in item.get("summary") or [])
            content.append(common.reasoning_part(blobs, PROVIDER, model, REASONING, raw, summary or None))
        else:
            raw = {k: v for k, v in item.items() if v is not None}
            content.append(
                {
                    "format": ITEM,
                    "model": model,
                    "name": common.tool_name(t),
                    "provider": PROVIDER,
                    "ref": blobs.put_json(raw),
                    "type": "hosted_tool",
                }
            )
    status = resp.get("status")
    reason = ((resp.get("incomplete_details") or {}).get("reason")) if status == "incomplete" else None
    if reason == "max_output_tokens":
        stop = "max_tokens"
    elif reason == "content_filter" or refused:
        stop = "refusal"
    elif status == "incomplete":
        stop = "other"
    elif any(p["type"] == "tool_use" for p in content):
        stop = "tool_use"
    else:
        stop = "end_turn"
    return ModelResult(content, stop, _usage(resp.get("usage"), "input_tokens", "output_tokens"))
