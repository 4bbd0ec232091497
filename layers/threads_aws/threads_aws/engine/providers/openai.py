"""OpenAI adapter (official `openai` SDK), `adapter: {name: openai, version: "1", settings: {api}}`.

Two wire flavours, picked by `adapter.settings.api` (part of line 0, so pinned in the log):
- `responses` (default): the Responses API, stateless (`store: false`, the whole input every
  time, as Render v1 renders it). It is the only OpenAI API that returns reasoning as items
  that can be sent back (`include: ["reasoning.encrypted_content"]`, asked for when
  model_params has `reasoning_effort` or settings `encrypted_reasoning: true`), which is what
  `reasoning_carryover: keep` needs across tool calls. It has no stop sequences.
- `chat`: Chat Completions, for OpenAI-compatible gateways behind OPENAI_BASE_URL (vLLM,
  Ollama, LiteLLM proxies, ...) that don't speak Responses. Reasoning can't be carried (a
  reasoning part in the history is continuation_unsupported), tool results are text only.

Recovery (`settings.recover: true`, Responses only; `engine.recovery`): the request goes out
`store: true, background: true` with `metadata.client_request_id = <branch_id>:<request event
id>`, and the id OpenAI assigns (the stream's `response.created`) is handed to `on_accepted` as
soon as it arrives. A background response keeps running at OpenAI when the worker dies; `recover`
fetches it with `GET /v1/responses/{id}` (waiting up to `recover_wait_s` while it is queued or in
progress), checks its metadata names this request, and reads it as a live answer. Stored
responses are kept by OpenAI (30 days), so this is opt-in per agent, never the default.

Both: SDK retries off (`max_retries=0`), explicit timeouts, streaming by default with text and
reasoning-summary deltas handed to `on_delta`; OpenAI caches prompt prefixes by itself (line 0
renders first, so the prefix is stable). Usage: OpenAI's input count includes cached tokens, the
contract's excludes them: input_tokens = input - cached, cache_read_tokens = cached (absent when
the endpoint reports no cached count: then it has no such category), reasoning_tokens as reported.
"""

from __future__ import annotations

import base64
import json
import os
import re
import threading
import time
from collections.abc import Callable
from typing import Any

from ..models import ArtifactAccess, DeltaCallback, ModelError, ModelResult
from ..recovery import RECOVERED, UNKNOWN, Recovery
from . import common
from .common import Blobs, Conversation, unsupported
from .keys import api_key

PROVIDER = "openai"
REASONING = "openai_reasoning"
ITEM = "openai_item"
ID_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
CHAT_ID_MAX = 40  # Chat Completions rejects longer tool_call ids
RESPONSES_ID_MAX = 64
DONE = ("completed", "incomplete")  # a response with its final output
TERMINAL = (*DONE, "failed", "cancelled")
RECOVER_WAIT_S = 60.0
POLL_S = 0.5
FINISH = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}

_clients: dict[tuple[str, str | None, float], Any] = {}
_lock = threading.Lock()


def _client(key: str, base_url: str | None, timeout_s: float) -> Any:
    with _lock:
        c = _clients.get((key, base_url, timeout_s))
        if c is None:
            import httpx2
            import openai

            c = openai.OpenAI(
                api_key=key, base_url=base_url, max_retries=0, timeout=httpx2.Timeout(timeout_s, connect=10.0)
            )
            _clients[(key, base_url, timeout_s)] = c
        return c


class OpenAIAdapter:
    def __init__(self, client: Any = None) -> None:
        self.client = client  # tests pass an SDK client built on an httpx MockTransport
        self._prepared: tuple[bytes, Conversation, Blobs, str, dict[str, Any]] | None = None

    def preflight(self, request: bytes, artifacts: ArtifactAccess | None = None) -> None:
        """The capability pre-check, before the request is stored: build the Responses or Chat
        request (a part OpenAI can't take raises `unsupported`); `complete` sends it."""
        conv = common.parse_request(request)
        blobs = Blobs(artifacts)
        api = conv.settings.get("api", "responses")
        if api not in ("responses", "chat"):
            raise unsupported("model_error", f"openai adapter api {api!r} (responses|chat)")
        kwargs = build_responses(conv, blobs) if api == "responses" else build_chat(conv, blobs)
        self._prepared = (request, conv, blobs, api, kwargs)

    @staticmethod
    def recoverable(settings: dict[str, Any]) -> bool:
        """Answers can be looked up by id: the Responses API with `recover: true` (line 0)."""
        adapter = settings.get("adapter") or {}
        s = adapter.get("settings") if isinstance(adapter, dict) else None
        s = s if isinstance(s, dict) else {}
        return s.get("recover") is True and s.get("api", "responses") == "responses"

    def _sdk(self, conv: Conversation) -> Any:
        return self.client or _client(
            api_key(PROVIDER),
            os.environ.get("OPENAI_BASE_URL") or None,
            float(conv.settings.get("timeout_s", 300)),
        )

    def complete(
        self,
        request: bytes,
        *,
        settings: dict[str, Any],
        request_event_id: str,
        branch_id: str,
        artifacts: ArtifactAccess | None = None,
        on_delta: DeltaCallback | None = None,
        client_request_id: str | None = None,
        on_accepted: Callable[[str], None] | None = None,
    ) -> ModelResult:
        if self._prepared is None or self._prepared[0] != request:
            self.preflight(request, artifacts)
        assert self._prepared is not None
        _, conv, blobs, api, kwargs = self._prepared
        self._prepared = None
        client = self._sdk(conv)
        stream = conv.settings.get("stream", True) is not False
        model = str(conv.model.get("name"))
        if api == "responses" and conv.settings.get("recover") is True and client_request_id:
            kwargs = {**kwargs, "metadata": {"client_request_id": client_request_id}}
        try:
            if api == "responses":
                wait_s = float(conv.settings.get("timeout_s", 300))
                resp = _responses(client, kwargs, stream, on_delta, on_accepted, wait_s)
                return read_response(resp, request, blobs, model)
            return read_chat(_chat(client, kwargs, stream, on_delta), request)
        except ModelError:
            raise
        except Exception as exc:  # noqa: BLE001 - every SDK/transport failure is classified
            raise classify(exc) from exc

    def recover(
        self,
        provider_request_id: str,
        *,
        client_request_id: str,
        request: bytes,
        settings: dict[str, Any],
        artifacts: ArtifactAccess | None = None,
    ) -> Recovery:
        """The stored response of a request whose worker died (engine.recovery): recovered only
        when it is done and its metadata names this request; a 404 of an id OpenAI gave us is a
        deleted or expired response, not proof it was never sent (unknown)."""
        import openai

        conv = common.parse_request(request)
        client = self._sdk(conv)
        wait_s = float(conv.settings.get("recover_wait_s", RECOVER_WAIT_S))
        try:
            resp = _settled(client, provider_request_id, time.monotonic() + wait_s)
        except openai.NotFoundError:
            return Recovery(UNKNOWN)
        if (resp.get("metadata") or {}).get("client_request_id") != client_request_id:
            return Recovery(UNKNOWN)  # another request's response: never taken for this one
        if resp.get("status") not in DONE:
            if resp.get("status") not in TERMINAL:  # still running past the wait: stop its billing
                try:
                    client.responses.cancel(provider_request_id)
                except Exception:  # noqa: BLE001 - best effort; the attempt is unknown either way
                    pass
            return Recovery(UNKNOWN)
        result = read_response(resp, request, Blobs(artifacts), str(conv.model.get("name")))
        return Recovery(RECOVERED, result, provider_request_id)


def classify(exc: BaseException) -> ModelError:
    import openai

    if isinstance(exc, openai.APIStatusError):
        body = exc.body if isinstance(exc.body, dict) else {}
        err = body.get("error", body) if isinstance(body, dict) else {}
        err = err if isinstance(err, dict) else {}
        return common.classify_status(
            exc.status_code,
            headers=exc.response.headers,
            err_type=err.get("type"),
            err_code=err.get("code") or getattr(exc, "code", None),
            message=str(err.get("message") or exc),
        )
    if isinstance(exc, openai.APIError) and not isinstance(exc, openai.APIConnectionError):
        # an `error` event inside a 200 stream
        return common.classify_status(
            200, err_type=getattr(exc, "type", None), err_code=getattr(exc, "code", None), message=str(exc)
        )
    return common.classify_transport(exc)


def _params(conv: Conversation) -> dict[str, Any]:
    params = common.check_params(conv)
    if "thinking" in params:
        raise unsupported("model_error", "openai maps reasoning_effort, not thinking")
    return params


def _data_url(blobs: Blobs, ref: dict[str, Any]) -> str:
    return f"data:{ref['media_type']};base64,{base64.b64encode(blobs.get(ref)).decode()}"


def _filename(part: dict[str, Any]) -> str:
    ext = {"application/pdf": "pdf"}.get(part["ref"]["media_type"], "bin")
    return f"{re.sub(r'[^A-Za-z0-9_.-]', '_', part.get('title') or part['ref']['sha256'][:16])}.{ext}"


def _text_doc(blobs: Blobs, part: dict[str, Any]) -> str:
    title = common.escape(part.get("title", ""))
    return f'<document title="{title}">\n{blobs.text(part["ref"])}\n</document>'


# ------------------------------------------------------------------ Responses API


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
    """`GET /responses/{id}` until the response is terminal or `deadline` (monotonic) passes."""
    while True:
        resp: dict[str, Any] = client.responses.retrieve(response_id).model_dump(mode="json")
        if resp.get("status") in TERMINAL or time.monotonic() >= deadline:
            return resp
        time.sleep(POLL_S)


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


def _usage(u: dict[str, Any] | None, inp: str, out: str) -> dict[str, int | None]:
    if not u:
        return {"input_tokens": None, "output_tokens": None}
    details = u.get(f"{inp}_details") or u.get("prompt_tokens_details")
    out_details = u.get(f"{out}_details") or u.get("completion_tokens_details")
    total_in = u.get(inp)
    usage: dict[str, int | None] = {"input_tokens": total_in, "output_tokens": u.get(out)}
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    if isinstance(cached, int):
        usage["cache_read_tokens"] = cached
        usage["input_tokens"] = total_in - cached if isinstance(total_in, int) else None
    if isinstance(out_details, dict) and isinstance(out_details.get("reasoning_tokens"), int):
        usage["reasoning_tokens"] = out_details["reasoning_tokens"]
    return usage


# ------------------------------------------------------------------ Chat Completions


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
