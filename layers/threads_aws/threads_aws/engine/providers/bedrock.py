"""Amazon Bedrock adapter (boto3 `bedrock-runtime` Converse / ConverseStream, IAM only),
`adapter: {name: bedrock, version: "1"}`; `model.name` is a model id or an inference profile id
(e.g. `us.anthropic.claude-sonnet-4-20250514-v1:0`).

One `complete` = one HTTP request: botocore retries off (`total_max_attempts: 1`), connect 10 s, read
300 s (`adapter.settings.timeout_s`; botocore's 60 s default is too short for long answers).
`AWS_ENDPOINT_URL_BEDROCK_RUNTIME` points it elsewhere (botocore reads it); region from
`adapter.settings.region`, else the environment. Streams by default (`settings.stream`).
`use_session` (`threads-aws dev --real-bedrock`) signs these requests alone with another
credential chain than the rest of the process's boto3 (which dev points at moto).
`$THREADS_BEDROCK_UNAVAILABLE` (set by dev when it has no Bedrock to offer) fails every request
before it is sent, with that text: a moto server answers Converse with a 500 that would be retried.

Request: `system` text then a `cachePoint` (the declared prefix: Bedrock caches tools → system,
so a checkpoint after system covers all of line 0; with no system it goes after the tools);
`settings.cache: "history"` adds one after the last message, `"off"` none (models without prompt
caching reject cachePoint). model_params: max_tokens, temperature, top_p, stop_sequences →
`inferenceConfig`; tool_choice `auto|any|{name}`; thinking → `additionalModelRequestFields.thinking`
(Anthropic models). Reasoning parts (`bedrock_reasoning`) go back as `reasoningContent`.

Answer: text, toolUse (its `tooluse_…` id kept), reasoningContent (text + signature, or
redacted bytes) → reasoning part; stop reasons mapped (guardrail_intervened / content_filtered →
refusal, model_context_window_exceeded → context_window_exceeded, malformed_* → other); usage as
reported: inputTokens (non-cached only, so it is the contract's input_tokens), outputTokens,
cacheReadInputTokens, cacheWriteInputTokens (null when a cachePoint was sent but the count is
absent; absent when none was sent).
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

PROVIDER = "bedrock"
REASONING = "bedrock_reasoning"
ID_RE = re.compile(r"^[a-zA-Z0-9_-]+$")
ID_MAX = 64
STOP = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "guardrail_intervened": "refusal",
    "content_filtered": "refusal",
    "model_context_window_exceeded": "context_window_exceeded",
}
IMAGE_FORMATS = {"image/png": "png", "image/jpeg": "jpeg", "image/gif": "gif", "image/webp": "webp"}
DOC_FORMATS = {
    "application/pdf": "pdf",
    "text/plain": "txt",
    "text/markdown": "md",
    "text/html": "html",
    "text/csv": "csv",
    "application/json": "txt",
}
# ClientError code -> (reason, retryable); the HTTP status comes from the response.
ERRORS = {
    "ThrottlingException": ("rate_limited", True),
    "ServiceQuotaExceededException": ("rate_limited", True),
    "ModelNotReadyException": ("overloaded", True),
    "ServiceUnavailableException": ("overloaded", True),
    "InternalServerException": ("server_error", True),
    "ModelErrorException": ("server_error", True),
    "ModelStreamErrorException": ("server_error", True),
    "ModelTimeoutException": ("timeout", True),
}
_TOO_LONG = re.compile(r"too long|too many (input )?tokens|context (length|window)", re.I)

UNAVAILABLE_VAR = "THREADS_BEDROCK_UNAVAILABLE"
ENDPOINT_VAR = "AWS_ENDPOINT_URL_BEDROCK_RUNTIME"

_clients: dict[tuple[str | None, float], Any] = {}
_lock = threading.Lock()
_session: Any = None  # a boto3 Session of its own for bedrock-runtime (use_session)


def use_session(session: Any) -> None:
    """Sign every later Bedrock Runtime request with `session` (its credentials and, unless the
    agent's settings name one, its region), at $AWS_ENDPOINT_URL_BEDROCK_RUNTIME if set, else
    AWS's own endpoint: the process-wide AWS_ENDPOINT_URL is ignored (under `threads-aws dev` it
    is moto). Only this client changes. `None` goes back to the environment's chain."""
    global _session
    with _lock:
        _session = session
        _clients.clear()


def _client(settings_region: str | None, timeout_s: float) -> Any:
    with _lock:
        c = _clients.get((settings_region, timeout_s))
        if c is None:
            import boto3
            from botocore.config import Config

            # total_max_attempts counts the first call (botocore's max_attempts counts retries
            # only: max_attempts=1 would still retry once). The stubs lack the endpoint option.
            options: dict[str, Any] = {
                "retries": {"mode": "standard", "total_max_attempts": 1},
                "connect_timeout": 10,
                "read_timeout": timeout_s,
                "ignore_configured_endpoint_urls": _session is not None,
            }
            cfg = Config(**options)
            if _session is not None:
                c = _session.client(
                    "bedrock-runtime",
                    region_name=settings_region or _session.region_name,
                    endpoint_url=os.environ.get(ENDPOINT_VAR) or None,
                    config=cfg,
                )
            else:
                region = settings_region or os.environ.get("AWS_REGION") or None
                c = boto3.session.Session().client("bedrock-runtime", region_name=region, config=cfg)
            _clients[(settings_region, timeout_s)] = c
        return c


def unavailable() -> ModelError | None:
    """The configuration error every request fails with, before anything is sent, if any."""
    note = os.environ.get(UNAVAILABLE_VAR, "")
    if not note or _session is not None or os.environ.get(ENDPOINT_VAR):
        return None
    return ModelError("provider_error", outcome="not_sent", retryable=False, message=note)


class BedrockAdapter:
    def __init__(self, client: Any = None) -> None:
        self.client = client  # tests pass a client pointed at a local endpoint or stubbed
        self._prepared: tuple[bytes, Conversation, Blobs, dict[str, Any], bool] | None = None

    def preflight(self, request: bytes, artifacts: ArtifactAccess | None = None) -> None:
        """The capability pre-check, before the request is stored: build the Converse request
        (a part Bedrock can't take raises `unsupported`); `complete` sends what was built here."""
        conv = common.parse_request(request)
        blobs = Blobs(artifacts)
        kwargs, cached = build_request(conv, blobs)
        self._prepared = (request, conv, blobs, kwargs, cached)

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
        _, conv, blobs, kwargs, cached = self._prepared
        self._prepared = None
        if self.client is None and (missing := unavailable()) is not None:
            raise missing
        client = self.client or _client(
            conv.settings.get("region"), float(conv.settings.get("timeout_s", 300))
        )
        try:
            if conv.settings.get("stream", True) is False:
                out = client.converse(**kwargs)
            else:
                out = _stream(client.converse_stream(**kwargs)["stream"], on_delta)
        except ModelError:
            raise
        except Exception as exc:  # noqa: BLE001 - every botocore failure is classified
            raise classify(exc) from exc
        return read_output(out, request, blobs, str(conv.model.get("name")), cached)


def classify(exc: BaseException) -> ModelError:
    from botocore.exceptions import ClientError

    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        code = str(err.get("Code", ""))
        code = code[:1].upper() + code[1:]  # stream error events are lowerCamel (throttlingException)
        meta = exc.response.get("ResponseMetadata", {})
        status = int(meta.get("HTTPStatusCode") or 0) or None
        message = str(err.get("Message", "")) or str(exc)
        after = common.retry_after_ms(meta.get("HTTPHeaders"))
        if code in ERRORS:
            reason, retryable = ERRORS[code]
            return ModelError(reason, status, after, retryable=retryable, message=message)
        if code == "ValidationException" and _TOO_LONG.search(message):
            return ModelError("prompt_too_long", status, retryable=False, message=message)
        if status is not None and status >= 500:
            return ModelError("server_error", status, after, message=message)
        return ModelError("provider_error", status, retryable=False, message=f"{code}: {message}")
    names = {c.__name__ for c in type(exc).__mro__}
    if names & {
        "EndpointConnectionError",
        "ConnectTimeoutError",
        "NoCredentialsError",
        "ProxyConnectionError",
    }:
        retryable = "NoCredentialsError" not in names
        return ModelError("provider_error", outcome="not_sent", retryable=retryable, message=str(exc))
    if "ReadTimeoutError" in names:
        return ModelError("timeout", outcome="unknown", message=str(exc))
    return ModelError("stream_broken", outcome="unknown", message=str(exc) or type(exc).__name__)


# ------------------------------------------------------------------ request


def build_request(conv: Conversation, blobs: Blobs) -> tuple[dict[str, Any], bool]:
    params = common.check_params(conv)
    if "reasoning_effort" in params:
        raise unsupported("model_error", "bedrock maps thinking, not reasoning_effort")
    kw: dict[str, Any] = {"modelId": conv.model["name"]}
    inference = {
        theirs: params[ours]
        for ours, theirs in (
            ("max_tokens", "maxTokens"),
            ("temperature", "temperature"),
            ("top_p", "topP"),
            ("stop_sequences", "stopSequences"),
        )
        if ours in params
    }
    if inference:
        kw["inferenceConfig"] = inference
    if "thinking" in params:
        t = params["thinking"]
        thinking = t if "type" in t else {"budget_tokens": t["budget_tokens"], "type": "enabled"}
        kw["additionalModelRequestFields"] = {"thinking": thinking}
    cache = conv.settings.get("cache", "prefix")
    point = {"cachePoint": {"type": "default"}}
    tools: list[dict[str, Any]] = [
        {
            "toolSpec": {
                "description": t["description"],
                "inputSchema": {"json": t["input_schema"]},
                "name": t["name"],
            }
        }
        for t in conv.tools
    ]
    system: list[dict[str, Any]] = [{"text": conv.system}] if conv.system else []
    cached = cache in ("prefix", "history") and bool(conv.system or tools)
    if cached:
        (system if system else tools).append(point)
    if system:
        kw["system"] = system
    if tools:
        kw["toolConfig"] = {"tools": tools}
        if "tool_choice" in params:
            kw["toolConfig"]["toolChoice"] = _tool_choice(params["tool_choice"])
    messages: list[dict[str, Any]] = []
    for m in conv.messages:
        blocks = [b for b in (_block(p, m.role, conv, blobs) for p in m.parts) if b is not None]
        if blocks:
            messages.append({"content": blocks, "role": m.role})
    if cache == "history" and messages:
        messages[-1]["content"].append(point)
    kw["messages"] = messages
    return kw, cached


def _tool_choice(choice: Any) -> dict[str, Any]:
    if choice in ("auto", "any"):
        return {choice: {}}
    if isinstance(choice, dict) and "name" in choice:
        return {"tool": {"name": choice["name"]}}
    raise unsupported("model_error", f"bedrock tool_choice {choice!r}")


def _doc_name(part: dict[str, Any]) -> str:
    # Bedrock: alphanumerics, single spaces, hyphens, parentheses, square brackets.
    name = re.sub(r"[^A-Za-z0-9 ()\[\]-]", "-", part.get("title") or "")
    name = re.sub(r"\s+", " ", name).strip()
    return name[:200] or "doc-" + part["ref"]["sha256"][:12]


def _block(part: dict[str, Any], role: str, conv: Conversation, blobs: Blobs) -> dict[str, Any] | None:
    t = part.get("type")
    if t == "text":
        return {"text": part["text"]}
    if t == "citation":
        return None
    if role == "assistant":
        if t == "tool_use":
            tid = common.outbound_call_id(part["call_id"], ID_RE, ID_MAX)
            return {"toolUse": {"input": part["input"], "name": part["name"], "toolUseId": tid}}
        if t == "reasoning":
            common.own_material(part, PROVIDER, (REASONING,))
            raw = blobs.json(part["ref"])
            if "redactedContent_b64" in raw:
                return {"reasoningContent": {"redactedContent": base64.b64decode(raw["redactedContent_b64"])}}
            return {"reasoningContent": {"reasoningText": raw["reasoningText"]}}
        raise unsupported("continuation_unsupported", f"an assistant {t} part cannot be sent to bedrock")
    if t == "tool_result":
        content = [b for b in (_block(p, "user", conv, blobs) for p in part["content"]) if b is not None]
        return {
            "toolResult": {
                "content": content or [{"json": {}}],
                "status": "error" if part["is_error"] else "success",
                "toolUseId": common.outbound_call_id(part["call_id"], ID_RE, ID_MAX),
            }
        }
    if t == "image_ref":
        ref = part["ref"]
        return {"image": {"format": IMAGE_FORMATS[ref["media_type"]], "source": {"bytes": blobs.get(ref)}}}
    if t == "document_ref":
        ref = part["ref"]
        fmt = DOC_FORMATS.get(ref["media_type"])
        if fmt is None:
            raise unsupported("content_unsupported", f"document {ref['media_type']}")
        return {"document": {"format": fmt, "name": _doc_name(part), "source": {"bytes": blobs.get(ref)}}}
    if t == "audio_ref":
        return _block(common.audio_as_text(conv, part), role, conv, blobs)
    raise unsupported("content_unsupported", f"a {t} part cannot be sent to bedrock")


# ------------------------------------------------------------------ answer


def _stream(events: Any, on_delta: DeltaCallback | None) -> dict[str, Any]:
    """Fold ConverseStream events into Converse's output shape."""
    blocks: dict[int, dict[str, Any]] = {}
    stop: str | None = None
    usage: dict[str, Any] | None = None
    for ev in events:
        if "contentBlockStart" in ev:
            s = ev["contentBlockStart"]
            tool = s.get("start", {}).get("toolUse")
            if tool is not None:
                blocks[s["contentBlockIndex"]] = {"toolUse": {**tool, "input": ""}}
        elif "contentBlockDelta" in ev:
            d = ev["contentBlockDelta"]
            delta = d["delta"]
            b = blocks.setdefault(d["contentBlockIndex"], {})
            if "text" in delta:
                b["text"] = b.get("text", "") + delta["text"]
                common.emit(on_delta, "text", delta["text"])
            elif "toolUse" in delta:
                b.setdefault("toolUse", {"input": ""})["input"] += delta["toolUse"].get("input", "")
            elif "reasoningContent" in delta:
                rc = b.setdefault("reasoningContent", {})
                r = delta["reasoningContent"]
                if "text" in r:
                    rt = rc.setdefault("reasoningText", {"text": ""})
                    rt["text"] += r["text"]
                    common.emit(on_delta, "thinking", r["text"])
                if "signature" in r:
                    rc.setdefault("reasoningText", {"text": ""})["signature"] = r["signature"]
                if "redactedContent" in r:
                    rc["redactedContent"] = rc.get("redactedContent", b"") + r["redactedContent"]
        elif "messageStop" in ev:
            stop = ev["messageStop"].get("stopReason")
        elif "metadata" in ev:
            usage = ev["metadata"].get("usage")
    if stop is None:
        raise ModelError("stream_broken", outcome="unknown", message="stream ended without messageStop")
    content = []
    for _, b in sorted(blocks.items()):
        if "toolUse" in b:
            b["toolUse"]["input"] = common.tool_input(b["toolUse"].get("input"))
        content.append(b)
    return {
        "output": {"message": {"content": content, "role": "assistant"}},
        "stopReason": stop,
        "usage": usage,
    }


def read_output(out: dict[str, Any], request: bytes, blobs: Blobs, model: str, cached: bool) -> ModelResult:
    content: list[dict[str, Any]] = []
    for i, block in enumerate(((out.get("output") or {}).get("message") or {}).get("content") or []):
        if "text" in block:
            content.append({"text": block["text"], "type": "text"})
        elif "toolUse" in block:
            tu = block["toolUse"]
            content.append(
                {
                    "call_id": common.inbound_call_id(tu.get("toolUseId"), request, i),
                    "input": common.tool_input(tu.get("input")),
                    "name": common.tool_name(tu.get("name")),
                    "type": "tool_use",
                }
            )
        elif "reasoningContent" in block:
            rc = block["reasoningContent"]
            if "redactedContent" in rc:
                raw: dict[str, Any] = {
                    "redactedContent_b64": base64.b64encode(rc["redactedContent"]).decode()
                }
                summary = None
            else:
                raw = {"reasoningText": rc.get("reasoningText", {})}
                summary = raw["reasoningText"].get("text")
            content.append(common.reasoning_part(blobs, PROVIDER, model, REASONING, raw, summary))
    u = out.get("usage")
    if not u:
        usage: dict[str, int | None] = {"input_tokens": None, "output_tokens": None}
    else:
        usage = {"input_tokens": u.get("inputTokens"), "output_tokens": u.get("outputTokens")}
    for ours, theirs in (
        ("cache_read_tokens", "cacheReadInputTokens"),
        ("cache_write_tokens", "cacheWriteInputTokens"),
    ):
        if u and theirs in u:
            usage[ours] = u[theirs]
        elif cached:
            usage[ours] = None
    return ModelResult(content, STOP.get(str(out.get("stopReason")), "other"), usage)
