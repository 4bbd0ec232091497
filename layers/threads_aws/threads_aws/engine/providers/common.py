"""What the three provider adapters share: Render v1 read into a provider-neutral conversation,
artifact refs resolved (sha256 + length verified), call-id mapping, model_params, retry-after,
and the reasoning parts' stored provider material.

Render v1 → `Conversation`:
- line 0 gives system, tools (a deferred tool is sent with an open object schema: the model sees
  what Render v1 shows it), params and the adapter settings;
- a later `{"role":"tools"}` line replaces the tool list (providers take one list per request);
- user lines and tool results merge into one user message (Bedrock requires strict alternation,
  Anthropic wants every tool_result first in the message after its tool_use): tool results
  first, then the other parts, each group in log order;
- a result that cannot pair with a call of the assistant message right before it (a
  `tool_result_late`, or a result whose call is further back) becomes a user text part
  `<late_tool_result ...>` (no provider pairs a result with an older call);
- empty text parts are dropped (every provider rejects blank text blocks), and a message left
  with no parts disappears (then neighbours of one role merge).

Call ids: a provider id that fits the contract's CallId (`^[A-Za-z0-9_.-]{1,128}$`) is kept as
is, so the same id goes back to the provider; anything else maps to `call_<sha256[:32]>` of it.
Outbound, an id that doesn't fit a provider's own pattern or length is mapped the same way for
both its tool_use and its result, so pairs stay paired (e.g. after a fallback between providers).
"""

from __future__ import annotations

import email.utils
import json
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ...config.adapters import MODEL_PARAMS
from ...core.canonical import sha256_hex
from ...core.render import escape
from ..models import ArtifactAccess, ModelError

CALL_ID_RE = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
OPEN_SCHEMA: dict[str, Any] = {"properties": {}, "type": "object"}



@dataclass
class Message:
    role: str  # user | assistant
    parts: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Conversation:
    adapter: dict[str, Any]
    model: dict[str, Any]
    params: dict[str, Any]
    system: str
    tools: list[dict[str, Any]]
    messages: list[Message]

    @property
    def settings(self) -> dict[str, Any]:
        s = self.adapter.get("settings")
        return s if isinstance(s, dict) else {}


def unsupported(code: str, message: str) -> ModelError:
    """A request this adapter cannot express: never sent, never retried; the turn should end
    `error` with `code` (content_unsupported / continuation_unsupported / ...)."""
    return ModelError("provider_error", outcome="not_sent", retryable=False, code=code, message=message)


def parse_request(request: bytes) -> Conversation:
    lines = [json.loads(raw) for raw in request.split(b"\n") if raw.strip()]
    if not lines or "model" not in lines[0]:
        raise unsupported("model_error", "not a Render v1 request (no line 0)")
    head = lines[0]
    tools = [tool_spec(t) for t in head.get("tools", [])]
    messages: list[Message] = []
    last_calls: set[str] = set()  # tool_use ids of the assistant message before the user side
    for line in lines[1:]:
        role = line.get("role")
        if role == "tools":
            tools = [tool_spec(t) for t in line.get("tools", [])]
            continue
        if role == "assistant":
            parts = [p for p in line.get("content", []) if not _blank(p)]
            last_calls = {p["call_id"] for p in parts if p.get("type") == "tool_use"}
            _add(messages, "assistant", parts)
        elif role == "user":
            _add(messages, "user", [p for p in line.get("content", []) if not _blank(p)])
        elif role == "tool":
            if line.get("late") or line.get("call_id") not in last_calls:
                _add(messages, "user", late_result_parts(line))
            else:
                part = {
                    "call_id": line["call_id"],
                    "content": [p for p in line.get("content", []) if not _blank(p)],
                    "is_error": bool(line.get("is_error")),
                    "type": "tool_result",
                }
                _add(messages, "user", [part])
    for m in messages:
        if m.role == "user":  # tool results first, in order; then the rest, in order
            m.parts.sort(key=lambda p: p.get("type") != "tool_result")
    return Conversation(
        adapter=head.get("adapter", {}),
        model=head.get("model", {}),
        params=head.get("params", {}),
        system=head.get("system", ""),
        tools=tools,
        messages=messages,
    )


def _blank(part: dict[str, Any]) -> bool:
    return part.get("type") == "text" and not str(part.get("text", "")).strip()


def _add(messages: list[Message], role: str, parts: list[dict[str, Any]]) -> None:
    if not parts:
        return
    if messages and messages[-1].role == role:
        messages[-1].parts.extend(parts)
    else:
        messages.append(Message(role, list(parts)))


def late_result_parts(line: dict[str, Any]) -> list[dict[str, Any]]:
    text = "\n".join(p.get("text", "") for p in line.get("content", []) if p.get("type") == "text")
    err = "true" if line.get("is_error") else "false"
    wrapped = (
        f'<late_tool_result call_id="{escape(str(line.get("call_id", "")))}" is_error="{err}">\n'
        f"{escape(text)}\n</late_tool_result>"
    )
    media = [p for p in line.get("content", []) if p.get("type") in ("image_ref", "document_ref")]
    return [{"text": wrapped, "type": "text"}, *media]


def tool_spec(t: dict[str, Any]) -> dict[str, Any]:
    schema = t.get("input_schema") if isinstance(t.get("input_schema"), dict) else OPEN_SCHEMA
    return {"description": t.get("description", ""), "input_schema": schema, "name": t["name"]}


# ------------------------------------------------------------------ artifacts


class Blobs:
    """Artifact reads for one request: sha256 and length verified here again (a lenient store
    can't substitute bytes); a failure is never sent around (`artifact_missing`/`_corrupt`)."""

    def __init__(self, artifacts: ArtifactAccess | None) -> None:
        self.artifacts = artifacts

    def get(self, ref: dict[str, Any]) -> bytes:
        if self.artifacts is None:
            raise unsupported("artifact_missing", "no artifact store given to the adapter")
        try:
            data = self.artifacts.get_ref(ref)
        except ModelError:
            raise
        except Exception as exc:  # noqa: BLE001 - LogError(artifact_*), S3 errors: never sent
            code = getattr(exc, "code", "artifact_missing")
            raise unsupported(str(code), f"artifact {ref.get('sha256')}: {exc}") from exc
        if data is None or len(data) != ref.get("bytes"):
            raise unsupported("artifact_corrupt", f"artifact {ref.get('sha256')} has the wrong length")
        if sha256_hex(data) != ref.get("sha256"):
            raise unsupported("artifact_corrupt", f"artifact {ref.get('sha256')} does not verify")
        return data

    def text(self, ref: dict[str, Any]) -> str:
        try:
            return self.get(ref).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise unsupported("artifact_corrupt", "document text is not UTF-8") from exc

    def json(self, ref: dict[str, Any]) -> Any:
        try:
            return json.loads(self.get(ref))
        except ValueError as exc:
            raise unsupported("artifact_corrupt", "provider material is not JSON") from exc

    def put_json(self, value: Any) -> dict[str, Any]:
        if self.artifacts is None:
            raise unsupported("artifact_missing", "no artifact store given to the adapter")
        data = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode()
        return self.artifacts.put(data, "application/json")


def reasoning_part(
    blobs: Blobs, provider: str, model: str, fmt: str, raw: Any, summary: str | None
) -> dict[str, Any]:
    """A ReasoningPart: the provider's exact block stored as an artifact (durable before the
    model_response that references it), its readable summary for display only."""
    part: dict[str, Any] = {
        "format": fmt,
        "model": model,
        "provider": provider,
        "ref": blobs.put_json(raw),
        "type": "reasoning",
    }
    if summary:
        part["summary"] = summary
    return part


def own_material(part: dict[str, Any], provider: str, formats: Iterable[str]) -> bool:
    """Whether a reasoning/hosted_tool part can go back to this provider; otherwise the request
    is `continuation_unsupported` (never silently dropped: only `omit_prior` omits them)."""
    if part.get("provider") == provider and part.get("format") in set(formats):
        return True
    raise unsupported(
        "continuation_unsupported",
        f"a {part.get('type')} part of {part.get('provider')}/{part.get('format')} "
        f"cannot be sent to {provider}",
    )


def text_document(blobs: Blobs, part: dict[str, Any]) -> str:
    return blobs.text(part["ref"])


def audio_as_text(conv: Conversation, part: dict[str, Any]) -> dict[str, Any]:
    """Audio: no adapter here takes audio input; its transcript is shown when the agent opts in
    (`adapter.settings.audio_transcripts: true`), else the request is content_unsupported."""
    if conv.settings.get("audio_transcripts") is True and isinstance(part.get("transcript"), str):
        return {"text": part["transcript"], "type": "text"}
    raise unsupported("content_unsupported", "audio input is not supported by this adapter")


# ------------------------------------------------------------------ ids, names


def inbound_call_id(provider_id: Any, request: bytes, index: int) -> str:
    if isinstance(provider_id, str) and CALL_ID_RE.match(provider_id):
        return provider_id
    if isinstance(provider_id, str) and provider_id:
        return "call_" + sha256_hex(provider_id.encode())[:32]
    return f"call_{sha256_hex(request)[:16]}_{index}"


def outbound_call_id(call_id: str, pattern: re.Pattern[str], max_len: int) -> str:
    if len(call_id) <= max_len and pattern.match(call_id):
        return call_id
    return ("c" + sha256_hex(call_id.encode()))[: min(max_len, 33)]


def tool_name(name: Any) -> str:
    """A provider-proposed tool name as a contract Name (a name outside it can't be recorded;
    the mapped name matches no tool, so the worker answers 'not available')."""
    if isinstance(name, str) and NAME_RE.match(name):
        return name
    cleaned = re.sub(r"[^a-z0-9_]", "_", str(name).lower())[:56].strip("_") or "tool"
    if not cleaned[0].isalpha():
        cleaned = "t_" + cleaned
    return (cleaned + "_" + sha256_hex(str(name).encode())[:6])[:64]


def tool_input(value: Any) -> dict[str, Any]:
    """Tool input as a JSON object (a provider may return a string or an empty stream)."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        if not value.strip():
            return {}
        try:
            parsed = json.loads(value)
        except ValueError:
            return {"_raw": value}
        return parsed if isinstance(parsed, dict) else {"_value": parsed}
    return {} if value is None else {"_value": value}


# ------------------------------------------------------------------ params, errors


def check_params(conv: Conversation) -> dict[str, Any]:
    unknown = sorted(set(conv.params) - MODEL_PARAMS)
    if unknown:
        raise unsupported("model_error", f"model_params this adapter does not map: {', '.join(unknown)}")
    return conv.params


def retry_after_ms(headers: Any, now: Callable[[], float] = time.time) -> int | None:
    """The provider's retry-after as ms: `retry-after-ms`, else `retry-after` (seconds or an
    HTTP date). None when absent or unreadable (never guessed)."""
    if headers is None:
        return None
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        try:
            return max(0, int(float(raw_ms)))
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        return max(0, int(float(raw) * 1000))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0, int((when.timestamp() - now()) * 1000))


def emit(on_delta: Callable[[str, str], None] | None, kind: str, text: str | None) -> None:
    if on_delta is not None and text:
        on_delta(kind, text)


# ------------------------------------------------------------------ error classification

_TOO_LONG = re.compile(
    r"prompt is too long|context length|context window|input is too long|too many tokens in the prompt"
    r"|maximum context|context_length_exceeded",
    re.I,
)


def classify_status(
    status: int,
    *,
    headers: Any = None,
    err_type: str | None = None,
    err_code: str | None = None,
    message: str = "",
) -> ModelError:
    """An HTTP rejection (or an error event inside a 200 stream, `status` 200) as a ModelError.

    | signal | reason | retryable |
    |---|---|---|
    | 429 `rate_limit*` (not `insufficient_quota`) | rate_limited (+ retry-after) | yes |
    | 529, `overloaded_error` | overloaded (+ retry-after) | yes |
    | 500-504, `api_error`/`server_error` | server_error (+ retry-after) | yes |
    | 408 / request_timeout | timeout (provider_outcome failed: it answered) | yes |
    | 413; 400 with a context-length code/message | prompt_too_long | no |
    | 401/403/404/400/422 and other 4xx, `insufficient_quota` | provider_error | no |
    """
    after = retry_after_ms(headers)
    kind = (err_type or "").lower()
    code = (err_code or "").lower()
    if code == "insufficient_quota":
        return ModelError("provider_error", status or None, retryable=False, message=message or code)
    if status == 429 or kind in ("rate_limit_error", "rate_limit_exceeded") or code == "rate_limit_exceeded":
        return ModelError("rate_limited", status or None, after, message=message)
    if status == 529 or kind == "overloaded_error":
        return ModelError("overloaded", status or None, after, message=message)
    if (
        status == 413
        or code == "context_length_exceeded"
        or (status in (0, 200, 400) and _TOO_LONG.search(message or ""))
    ):
        return ModelError("prompt_too_long", status or None, retryable=False, message=message)
    if status == 408 or kind in ("timeout_error", "request_timeout"):
        return ModelError("timeout", status or None, after, message=message)
    if status >= 500 or kind in ("api_error", "server_error"):
        return ModelError("server_error", status or None, after, message=message)
    return ModelError("provider_error", status or None, retryable=False, message=message or kind or code)


def classify_transport(exc: BaseException) -> ModelError:
    """A transport failure (httpx exceptions, or the SDK's wrappers of them, via __cause__).

    Connecting failed → never sent (`not_sent`, not billed). A timeout or a dropped connection
    once the request was on its way → the answer is lost and may have been billed: provider
    outcome `unknown`, reason `timeout` or `stream_broken`.
    """
    names: set[str] = set()
    e: BaseException | None = exc
    while e is not None:
        names.update(c.__name__ for c in type(e).__mro__)
        e = e.__cause__ or e.__context__
    if names & {"ConnectError", "ConnectTimeout", "PoolTimeout", "UnsupportedProtocol"}:
        return ModelError("provider_error", outcome="not_sent", retryable=True, message=str(exc))
    if names & {"TimeoutException", "ReadTimeout", "WriteTimeout", "APITimeoutError"}:
        return ModelError("timeout", outcome="unknown", message=str(exc) or "timeout")
    if names & {"TransportError", "StreamError", "APIConnectionError", "ProtocolError", "OSError"}:
        return ModelError("stream_broken", outcome="unknown", message=str(exc) or type(exc).__name__)
    # Not a transport failure (an SDK or adapter bug): whether it was sent is unknown, and a
    # re-send would fail the same way.
    return ModelError(
        "provider_error", outcome="unknown", retryable=False, message=f"{type(exc).__name__}: {exc}"
    )
