"""Model adapters: the interface real providers implement, plus the two offline models.

An adapter turns Render v1 request bytes into one answer. It never sees the log: the worker
renders, stores the bytes, appends `model_request` (C2) and only then calls `complete`.

- `ScriptedModel(script)`: answers from a list, in order (tests). An entry is an answer dict
  `{content, stop_reason, usage?}`, `{"error": {reason, http_status?, retry_after_ms?}}`, or a
  callable `(request, request_event_id) -> entry`. `hook(request, request_event_id)` runs inside
  `complete` (tests use it to land a control while the call is "in flight"). With no script it
  answers `Done.` forever (the conformance `host` kind).
- `DemoModel`: the offline local model (`engine.demo_model`).

Call ids are derived from the request bytes (`call_<sha256[:16]>_<i>`): a re-send of the same
request (after a crash) proposes the same ids, and distinct requests never collide because every
request renders the whole history.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..config.adapters import ADAPTER_VERSIONS, PROVIDER_ADAPTERS, note_adapter
from ..core.canonical import canonical_bytes, sha256_hex


class ModelError(Exception):
    """A model attempt that produced no answer: `model_attempt_abandoned` data comes from here.

    - `outcome` is the contract's `provider_outcome`: `failed` (the provider answered with a
      rejection), `unknown` (the request was sent and the answer was lost: a timeout or a broken
      stream; it may have been billed), `not_sent` (it never left: connect failure, a request this
      adapter cannot express, a missing key).
    - `retryable`: whether re-sending the same request can succeed (rate limits, overload, 5xx,
      lost answers); authentication, invalid requests and prompt_too_long never can.
    - `billing`: `not_billed` only for `not_sent`; `unknown` for a lost answer; None (absent:
      unknown, charged at the bound) for a rejection, since a status code alone is no proof.
    - `code`: a RunErrorCode the turn should end with instead of retrying
      (`content_unsupported`, `continuation_unsupported`, `artifact_missing`, ...), if any.
    """

    def __init__(
        self,
        reason: str,
        http_status: int | None = None,
        retry_after_ms: int | None = None,
        *,
        outcome: str = "failed",
        retryable: bool | None = None,
        billing: str | None = None,
        code: str | None = None,
        message: str = "",
    ):
        super().__init__(f"model error: {reason}" + (f" ({message})" if message else ""))
        self.reason = reason
        self.http_status = http_status
        self.retry_after_ms = retry_after_ms
        self.outcome = outcome
        self.retryable = (reason in RETRYABLE_REASONS) if retryable is None else retryable
        if billing is None and outcome != "failed":
            billing = "not_billed" if outcome == "not_sent" else "unknown"
        self.billing = billing
        self.code = code
        self.message = message

    def abandoned(self, request_event_id: str, reasons: frozenset[str]) -> dict[str, Any]:
        """`model_attempt_abandoned` data (a reason outside `reasons` reads `provider_error`)."""
        data: dict[str, Any] = {
            "provider_outcome": self.outcome,
            "reason": self.reason if self.reason in reasons else "provider_error",
            "request_event_id": request_event_id,
        }
        if self.billing is not None:
            data["billing"] = self.billing
        if self.http_status is not None:
            data["http_status"] = self.http_status
        if self.retry_after_ms is not None:
            data["retry_after_ms"] = self.retry_after_ms
        return data


#: Rejection reasons a re-send of the same request can get past.
RETRYABLE_REASONS = frozenset({"rate_limited", "overloaded", "server_error", "timeout", "stream_broken"})

#: `on_delta(kind, text)`: kind is `text` or `thinking`; called as the provider streams. The log
#: records only the whole response; deltas are for live surfaces.
DeltaCallback = Callable[[str, str], None]


class ArtifactAccess(Protocol):
    """What an adapter needs of the artifact store: verified reads of the parts a request
    references, and a put for the provider's continuation material (reasoning parts' `ref`)."""

    def get_ref(self, ref: dict[str, Any]) -> bytes: ...

    def put(self, data: bytes, media_type: str) -> dict[str, Any]: ...


@dataclass(frozen=True)
class ModelResult:
    content: list[dict[str, Any]]
    stop_reason: str
    usage: dict[str, int | None]


class ModelAdapter(Protocol):
    def complete(
        self,
        request: bytes,
        *,
        settings: dict[str, Any],
        request_event_id: str,
        branch_id: str,
        artifacts: ArtifactAccess | None = None,
        on_delta: DeltaCallback | None = None,
    ) -> ModelResult: ...


def preflight(adapter: Any, request: bytes, artifacts: ArtifactAccess | None) -> ModelError | None:
    """The capability pre-check (semantics §4): an adapter with `preflight(request, artifacts)`
    builds its provider request before anything is stored; the refusal it raises (a ModelError
    with `code` content_unsupported / continuation_unsupported / ...) is returned, and the turn
    ends `error` without a model_request. Adapters without one (demo, scripted) take anything."""
    check = getattr(adapter, "preflight", None)
    if check is None:
        return None
    try:
        check(request, artifacts)
    except ModelError as exc:
        if exc.outcome != "not_sent":  # pragma: no cover - a pre-check sends nothing
            raise
        return exc
    return None


def estimate_usage(request: bytes, content: list[dict[str, Any]]) -> dict[str, int | None]:
    """Deterministic token estimates (bytes/4), as the offline models report them."""
    return {"input_tokens": len(request) // 4, "output_tokens": len(canonical_bytes(content)) // 4}


def call_id_for(request: bytes, i: int) -> str:
    return f"call_{sha256_hex(request)[:16]}_{i}"


def request_lines(request: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in request.splitlines() if line.strip()]


def _text_of(parts: Any) -> str:
    if not isinstance(parts, list):
        return ""
    return "".join(p.get("text", "") for p in parts if isinstance(p, dict) and p.get("type") == "text")


# ------------------------------------------------------------------ scripted

ScriptEntry = dict[str, Any] | Callable[[bytes, str], dict[str, Any]]


@dataclass
class ScriptedModel:
    script: Sequence[ScriptEntry] | None = None
    hook: Callable[[bytes, str], None] | None = None
    requests: list[bytes] = field(default_factory=list)

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
        self.requests.append(request)
        if self.hook is not None:
            self.hook(request, request_event_id)
        if self.script is None:
            entry: Any = {"content": [{"type": "text", "text": "Done."}], "stop_reason": "end_turn"}
        else:
            i = len(self.requests) - 1
            if i >= len(self.script):
                raise AssertionError(f"scripted model: no answer for request {i + 1}")
            entry = self.script[i]
        if callable(entry):
            entry = entry(request, request_event_id)
        if "error" in entry:
            e = dict(entry["error"])
            raise ModelError(e.pop("reason"), e.pop("http_status", None), e.pop("retry_after_ms", None), **e)
        content = list(entry["content"])
        usage = entry.get("usage") or estimate_usage(request, content)
        return ModelResult(content, entry.get("stop_reason", "end_turn"), usage)


# ------------------------------------------------------------------ registry

_FACTORIES: dict[str, Callable[[], ModelAdapter]] = {"scripted": ScriptedModel}
#: Offline adapters imported on first use, like the providers (the demo model's command parsing
#: is most of its module; a worker running a real provider never loads it).
_BUILTIN = {"demo": "threads_aws.engine.demo_model:DemoModel"}


def register_adapter(name: str, factory: Callable[[], ModelAdapter]) -> None:
    """Register (or replace, in tests) an adapter factory by adapter name."""
    _FACTORIES[name] = factory
    note_adapter(name)


def _factory(name: str) -> Callable[[], ModelAdapter] | None:
    factory = _FACTORIES.get(name)
    spec = _BUILTIN.get(name) or PROVIDER_ADAPTERS.get(name)
    if factory is None and spec is not None:
        import importlib

        module, _, cls = spec.partition(":")
        factory = getattr(importlib.import_module(module), cls)
        _FACTORIES[name] = factory
    return factory


def adapter_for(model_ref: dict[str, Any], adapter_ref: dict[str, Any]) -> ModelAdapter:
    """The adapter for a settings epoch (`adapter.name` picks it; the provider as fallback).
    A provider adapter also checks `adapter.version` (the wire mapping it implements)."""
    name = str(adapter_ref.get("name") or model_ref.get("provider"))
    factory = _factory(name)
    if factory is None:
        name = str(model_ref.get("provider"))
        factory = _factory(name)
    if factory is None:
        raise LookupError(f"no model adapter {name!r}")
    versions = ADAPTER_VERSIONS.get(name)
    if versions is not None and str(adapter_ref.get("version")) not in versions:
        raise LookupError(f"adapter {name!r} has no version {adapter_ref.get('version')!r}")
    return factory()
