"""The Chat Completions half of the OpenAI adapter (`openai`, `settings.api: chat`): for
OpenAI-compatible gateways. Reasoning can't be carried and tool results are text only."""

from __future__ import annotations

import json
from typing import Any

from ..models import DeltaCallback, ModelError, ModelResult
from . import common
from .common import Blobs, Conversation, unsupported
from .openai_common import ID_RE, _data_url, _filename, _params, _text_doc, _usage

CHAT_ID_MAX = 40  # Chat Completions rejects longer tool_call ids
FINISH = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}


def build_chat(conv: Conversation, blobs: Blobs) -> dict[str, Any]:
    params = _params(conv)
    msgs: list[dict[str, Any]] = []
    kw: dict[str, Any] = {"messages": msgs, "model": conv.model["name"]}
    if conv.system:
        msgs.append({"content": conv.system, "role": "system"})
    if conv.tools:
        kw["tools"] = [
            {
                "function": {
                    "description": t["description"],
                    "name": t["name"],
                    "parameters": t["input_schema"],
                },
                "type": "function",
            }
            for t in conv.tools
        ]
    if "max_tokens" in params:
        kw[str(conv.settings.get("max_tokens_field", "max_completion_tokens"))] = params["max_tokens"]
    for ours, theirs in (
        ("temperature", "temperature"),
        ("top_p", "top_p"),
        ("stop_sequences", "stop"),
        ("reasoning_effort", "reasoning_effort"),
    ):
        if ours in params:
            kw[theirs] = params[ours]
    if "tool_choice" in params:
        c = params["tool_choice"]
        kw["tool_choice"] = (
            {"any": "required"}.get(c, c)
            if isinstance(c, str)
            else {"function": {"name": c["name"]}, "type": "function"}
        )
    for m in conv.messages:
        if m.role == "assistant":
            msgs.append(_chat_assistant(m.parts))
            continue
        content: list[dict[str, Any]] = []
        for p in m.parts:
            if p["type"] == "tool_result":
                if any(c["type"] not in ("text", "citation") for c in p["content"]):
                    raise unsupported("content_unsupported", "chat completions tool results are text only")
                text = "".join(c["text"] for c in p["content"] if c["type"] == "text")
                msgs.append({"content": text, "role": "tool", "tool_call_id": _cid(p["call_id"])})
            else:
                content.extend(_chat_parts(p, blobs, conv))
        if content:
            plain = all(c["type"] == "text" for c in content)
            msgs.append(
                {"content": "\n\n".join(c["text"] for c in content) if plain else content, "role": "user"}
            )
    return kw


def _cid(call_id: str) -> str:
    return common.outbound_call_id(call_id, ID_RE, CHAT_ID_MAX)


def _chat_assistant(parts: list[dict[str, Any]]) -> dict[str, Any]:
    texts = [p["text"] for p in parts if p["type"] == "text"]
    calls = [
        {
            "function": {"arguments": json.dumps(p["input"], separators=(",", ":")), "name": p["name"]},
            "id": _cid(p["call_id"]),
            "type": "function",
        }
        for p in parts
        if p["type"] == "tool_use"
    ]
    for p in parts:
        if p["type"] not in ("text", "tool_use", "citation"):
            raise unsupported(
                "continuation_unsupported", f"chat completions cannot carry an assistant {p['type']} part"
            )
    msg: dict[str, Any] = {"content": "".join(texts) if texts else None, "role": "assistant"}
    if calls:
        msg["tool_calls"] = calls
    return msg


def _chat_parts(p: dict[str, Any], blobs: Blobs, conv: Conversation) -> list[dict[str, Any]]:
    t = p["type"]
    if t == "text":
        return [{"text": p["text"], "type": "text"}]
    if t == "image_ref":
        return [{"image_url": {"url": _data_url(blobs, p["ref"])}, "type": "image_url"}]
    if t == "document_ref":
        if p["ref"]["media_type"] == "application/pdf":
            return [
                {"file": {"file_data": _data_url(blobs, p["ref"]), "filename": _filename(p)}, "type": "file"}
            ]
        return [{"text": _text_doc(blobs, p), "type": "text"}]
    if t == "audio_ref":
        return _chat_parts(common.audio_as_text(conv, p), blobs, conv)
    if t == "citation":
        return []
    raise unsupported("content_unsupported", f"a {t} part cannot be sent to openai chat")


def _chat(client: Any, kw: dict[str, Any], stream: bool, on_delta: DeltaCallback | None) -> dict[str, Any]:
    if not stream:
        return dict(client.chat.completions.create(**kw).model_dump(mode="json"))
    text: list[str] = []
    refusal: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finish: str | None = None
    usage: dict[str, Any] | None = None
    for chunk in client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw):
        if chunk.usage is not None:
            usage = chunk.usage.model_dump(mode="json")
        for choice in chunk.choices or []:
            d = choice.delta
            if d is not None and d.content:
                text.append(d.content)
                common.emit(on_delta, "text", d.content)
            if d is not None and getattr(d, "refusal", None):
                refusal.append(d.refusal)
            for tc in (d.tool_calls if d is not None else None) or []:
                acc = calls.setdefault(tc.index, {"arguments": "", "id": None, "name": None})
                if tc.id:
                    acc["id"] = tc.id
                if tc.function is not None:
                    acc["name"] = tc.function.name or acc["name"]
                    acc["arguments"] += tc.function.arguments or ""
            if choice.finish_reason:
                finish = choice.finish_reason
    if finish is None:
        raise ModelError("stream_broken", outcome="unknown", message="stream ended without a finish_reason")
    message: dict[str, Any] = {"content": "".join(text) or None, "refusal": "".join(refusal) or None}
    if calls:
        message["tool_calls"] = [
            {"function": {"arguments": c["arguments"], "name": c["name"]}, "id": c["id"], "type": "function"}
            for _, c in sorted(calls.items())
        ]
    return {"choices": [{"finish_reason": finish, "index": 0, "message": message}], "usage": usage}


def read_chat(resp: dict[str, Any], request: bytes) -> ModelResult:
    choices = resp.get("choices") or []
    if not choices:
        raise ModelError("provider_error", message="chat completion without choices")
    choice = choices[0]
    msg = choice.get("message") or {}
    content: list[dict[str, Any]] = []
    if msg.get("content"):
        content.append({"text": msg["content"], "type": "text"})
    if msg.get("refusal"):
        content.append({"text": msg["refusal"], "type": "text"})
    for i, tc in enumerate(msg.get("tool_calls") or []):
        fn = tc.get("function") or {}
        content.append(
            {
                "call_id": common.inbound_call_id(tc.get("id"), request, i),
                "input": common.tool_input(fn.get("arguments")),
                "name": common.tool_name(fn.get("name")),
                "type": "tool_use",
            }
        )
    stop = FINISH.get(str(choice.get("finish_reason")), "other")
    if msg.get("refusal"):
        stop = "refusal"
    return ModelResult(content, stop, _usage(resp.get("usage"), "prompt_tokens", "completion_tokens"))
