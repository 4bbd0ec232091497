"""Anthropic Messages API adapter (official `anthropic` SDK), `adapter: {name: anthropic, version: "1"}`.

One `complete` = one HTTP request: the SDK's retries are off (`max_retries=0`) so every attempt
is a `model_request` of its own; timeouts are explicit (connect 10 s, 300 s between stream
chunks, overridable by `adapter.settings.timeout_s`). It streams by default (`settings.stream`,
default true), handing text/thinking deltas to `on_delta`; the log gets the final message.

Request: system as one text block and the tools, with `cache_control: ephemeral` on the
declared prefix (the system block, else the last tool: Anthropic caches tools → system →
messages, so that breakpoint covers all of line 0); `settings.cache: "history"` adds a second
breakpoint on the last message block, `"off"` none. model_params: max_tokens (required),
temperature, top_p, stop_sequences, tool_choice (`auto|any|none|{name}`), thinking
(`{budget_tokens}` → enabled, or a full Anthropic thinking object). Reasoning parts
(`anthropic_thinking`: thinking / redacted_thinking blocks with their signature) and hosted
blocks (`anthropic_block`) go back exactly as received.

Answer: text, tool_use (the provider's `toolu_…` id kept), thinking → reasoning part, any
other block (server tools) → hosted_tool part; stop reasons mapped 1:1
(`model_context_window_exceeded` → `context_window_exceeded`, unknown → `other`); usage as
reported: input_tokens (uncached), cache_read_input_tokens, cache_creation_input_tokens.
"""

from __future__ import annotations

import base64
import os
import re
import threading
from typing import Any

from ..models import ArtifactAccess, DeltaCallback, ModelError, ModelResult
from . import common
from .common import Blobs, Conversation, unsupported
from .keys import api_key

PROVIDER = "anthropic"
THINKING = "anthropic_thinking"
BLOCK = "anthropic_block"
ID_RE = re.compile(r"^[a-zA-Z0-9_-]+$")
ID_MAX = 128
STOP = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "pause_turn": "pause_turn",
    "refusal": "refusal",
    "model_context_window_exceeded": "context_window_exceeded",
}
TEXT_DOCS = frozenset({"text/plain", "text/markdown", "text/html", "text/csv", "application/json"})

_clients: dict[tuple[str, str | None, float], Any] = {}
_lock = threading.Lock()


def _client(key: str, base_url: str | None, timeout_s: float) -> Any:
    with _lock:
        c = _clients.get((key, base_url, timeout_s))
        if c is None:
            import anthropic
            import httpx2

            c = anthropic.Anthropic(
                api_key=key,
                base_url=base_url,
                max_retries=0,
                timeout=httpx2.Timeout(timeout_s, connect=10.0),
            )
            _clients[(key, base_url, timeout_s)] = c
        return c


class AnthropicAdapter:
    def __init__(self, client: Any = None) -> None:
        self.client = client  # tests pass an SDK client built on an httpx MockTransport
        self._prepared: tuple[bytes, Conversation, Blobs, dict[str, Any]] | None = None

    def preflight(self, request: bytes, artifacts: ArtifactAccess | None = None) -> None:
        """The capability pre-check, before the request is stored: build the Messages request
        (a part Anthropic can't take raises `unsupported`: content_unsupported /
        continuation_unsupported); `complete` sends what was built here."""
        conv = common.parse_request(request)
        blobs = Blobs(artifacts)
        self._prepared = (request, conv, blobs, build_request(conv, blobs))

    def complete(
        self,
        request: bytes,
        *,
        settings: dict[str, Any],
        request_event_id: str,
        branch_id: str,
        artifacts: ArtifactAccess | None = None,
        on_delta: DeltaCallback | None = None,
    ) -> ModelResult:
        if self._prepared is None or self._prepared[0] != request:
            self.preflight(request, artifacts)
        assert self._prepared is not None
        _, conv, blobs, kwargs = self._prepared
        self._prepared = None
        client = self.client or _client(
            api_key(PROVIDER),
            os.environ.get("ANTHROPIC_BASE_URL") or None,
            float(conv.settings.get("timeout_s", 300)),
        )
        try:
            if conv.settings.get("stream", True) is False:
                message = client.messages.create(**kwargs)
            else:
                with client.messages.stream(**kwargs) as stream:
                    for event in stream:
                        if event.type == "content_block_delta":
                            d = event.delta
                            if d.type == "text_delta":
                                common.emit(on_delta, "text", d.text)
                            elif d.type == "thinking_delta":
                                common.emit(on_delta, "thinking", d.thinking)
                    message = stream.get_final_message()
        except ModelError:
            raise
        except Exception as exc:  # noqa: BLE001 - every SDK/transport failure is classified
            raise classify(exc) from exc
        if message.stop_reason is None:  # the stream ended without message_delta/message_stop
            raise ModelError("stream_broken", outcome="unknown", message="stream ended without a stop reason")
        return read_message(message.model_dump(mode="json"), request, blobs, str(conv.model.get("name")))


def classify(exc: BaseException) -> ModelError:
    import anthropic

    if isinstance(exc, anthropic.APIStatusError):
        return common.classify_status(
            exc.status_code,
            headers=exc.response.headers,
            err_type=exc.type,
            err_code=exc.error_code,
            message=exc.api_message or str(exc),
        )
    return common.classify_transport(exc)


# ------------------------------------------------------------------ request


def build_request(conv: Conversation, blobs: Blobs) -> dict[str, Any]:
    params = common.check_params(conv)
    if not isinstance(params.get("max_tokens"), int):
        raise unsupported("model_error", "anthropic needs model_params.max_tokens")
    if "reasoning_effort" in params:
        raise unsupported("model_error", "anthropic maps thinking, not reasoning_effort")
    kw: dict[str, Any] = {"max_tokens": params["max_tokens"], "model": conv.model["name"]}
    if "stop_sequences" in params:
        kw["stop_sequences"] = params["stop_sequences"]
    # The SDK no longer types temperature/top_p (newer models refuse them); models that take
    # them still get them, as body fields.
    extra = {k: params[k] for k in ("temperature", "top_p") if k in params}
    if extra:
        kw["extra_body"] = extra
    if "tool_choice" in params:
        kw["tool_choice"] = _tool_choice(params["tool_choice"])
    if "thinking" in params:
        t = params["thinking"]
        kw["thinking"] = t if "type" in t else {"budget_tokens": t["budget_tokens"], "type": "enabled"}
    cache = conv.settings.get("cache", "prefix")
    tools = [dict(t) for t in conv.tools]
    if tools:
        kw["tools"] = tools
    if conv.system:
        kw["system"] = [{"text": conv.system, "type": "text"}]
    if cache in ("prefix", "history"):
        target = kw["system"][-1] if conv.system else (tools[-1] if tools else None)
        if target is not None:
            target["cache_control"] = {"type": "ephemeral"}
    messages: list[dict[str, Any]] = []
    for m in conv.messages:
        blocks = [b for b in (_block(p, m.role, conv, blobs) for p in m.parts) if b is not None]
        if blocks:
            messages.append({"content": blocks, "role": m.role})
    if cache == "history" and messages:
        messages[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    kw["messages"] = messages
    return kw


def _tool_choice(choice: Any) -> dict[str, Any]:
    if choice in ("auto", "any", "none"):
        return {"type": choice}
    if isinstance(choice, dict) and "name" in choice:
        return {"name": choice["name"], "type": "tool"}
    raise unsupported("model_error", f"tool_choice {choice!r}")


def _call_id(call_id: str) -> str:
    return common.outbound_call_id(call_id, ID_RE, ID_MAX)


def _block(part: dict[str, Any], role: str, conv: Conversation, blobs: Blobs) -> dict[str, Any] | None:
    t = part.get("type")
    if t == "text":
        return {"text": part["text"], "type": "text"}
    if t == "citation":
        return None  # annotations of the text before them: display only
    if role == "assistant":
        if t == "tool_use":
            return {
                "id": _call_id(part["call_id"]),
                "input": part["input"],
                "name": part["name"],
                "type": "tool_use",
            }
        if t == "reasoning":
            common.own_material(part, PROVIDER, (THINKING,))
            return dict(blobs.json(part["ref"]))
        if t == "hosted_tool":
            common.own_material(part, PROVIDER, (BLOCK,))
            return dict(blobs.json(part["ref"]))
        raise unsupported("continuation_unsupported", f"an assistant {t} part cannot be sent to anthropic")
    if t == "tool_result":
        content = [_block(p, "user", conv, blobs) for p in part["content"]]
        return {
            "content": [c for c in content if c is not None],
            "is_error": part["is_error"],
            "tool_use_id": _call_id(part["call_id"]),
            "type": "tool_result",
        }
    if t == "image_ref":
        ref = part["ref"]
        data = base64.b64encode(blobs.get(ref)).decode()
        return {"source": {"data": data, "media_type": ref["media_type"], "type": "base64"}, "type": "image"}
    if t == "document_ref":
        ref = part["ref"]
        if ref["media_type"] == "application/pdf":
            source = {
                "data": base64.b64encode(blobs.get(ref)).decode(),
                "media_type": "application/pdf",
                "type": "base64",
            }
        elif ref["media_type"] in TEXT_DOCS:
            source = {"data": blobs.text(ref), "media_type": "text/plain", "type": "text"}
        else:
            raise unsupported("content_unsupported", f"document {ref['media_type']}")
        block: dict[str, Any] = {"source": source, "type": "document"}
        if part.get("title"):
            block["title"] = part["title"]
        return block
    if t == "audio_ref":
        return _block(common.audio_as_text(conv, part), role, conv, blobs)
    raise unsupported("content_unsupported", f"a {t} part cannot be sent to anthropic")


# ------------------------------------------------------------------ answer


def read_message(msg: dict[str, Any], request: bytes, blobs: Blobs, model: str) -> ModelResult:
    content: list[dict[str, Any]] = []
    for i, block in enumerate(msg.get("content") or []):
        t = block.get("type")
        if t == "text":
            content.append({"text": block.get("text", ""), "type": "text"})
        elif t == "tool_use":
            content.append(
                {
                    "call_id": common.inbound_call_id(block.get("id"), request, i),
                    "input": common.tool_input(block.get("input")),
                    "name": common.tool_name(block.get("name")),
                    "type": "tool_use",
                }
            )
        elif t in ("thinking", "redacted_thinking"):
            raw = {k: v for k, v in block.items() if v is not None}
            content.append(
                common.reasoning_part(blobs, PROVIDER, model, THINKING, raw, block.get("thinking"))
            )
        else:
            raw = {k: v for k, v in block.items() if v is not None}
            content.append(
                {
                    "format": BLOCK,
                    "model": model,
                    "name": common.tool_name(block.get("name") or t),
                    "provider": PROVIDER,
                    "ref": blobs.put_json(raw),
                    "type": "hosted_tool",
                }
            )
    u = msg.get("usage") or {}
    usage: dict[str, int | None] = {
        "cache_read_tokens": u.get("cache_read_input_tokens"),
        "cache_write_tokens": u.get("cache_creation_input_tokens"),
        "input_tokens": u.get("input_tokens"),
        "output_tokens": u.get("output_tokens"),
    }
    return ModelResult(content, STOP.get(str(msg.get("stop_reason")), "other"), usage)
