"""Model adapters: the interface real providers implement, plus the two offline models.

An adapter turns Render v1 request bytes into one answer. It never sees the log: the worker
renders, stores the bytes, appends `model_request` (C2) and only then calls `complete`.

- `ScriptedModel(script)`: answers from a list, in order (tests). An entry is an answer dict
  `{content, stop_reason, usage?}`, `{"error": {reason, http_status?, retry_after_ms?}}`, or a
  callable `(request, request_event_id) -> entry`. `hook(request, request_event_id)` runs inside
  `complete` (tests use it to land a control while the call is "in flight"). With no script it
  answers `Done.` forever (the conformance `host` kind).
- `DemoModel`: the offline local model (see `DemoModel`).

Call ids are derived from the request bytes (`call_<sha256[:16]>_<i>`): a re-send of the same
request (after a crash) proposes the same ids, and distinct requests never collide because every
request renders the whole history.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..core.canonical import canonical_bytes, sha256_hex

PREVIEW_CHARS = 200


class ModelError(Exception):
    """A provider rejection before any content (`model_attempt_abandoned{failed}`)."""

    def __init__(self, reason: str, http_status: int | None = None, retry_after_ms: int | None = None):
        super().__init__(f"model error: {reason}")
        self.reason = reason
        self.http_status = http_status
        self.retry_after_ms = retry_after_ms


@dataclass(frozen=True)
class ModelResult:
    content: list[dict[str, Any]]
    stop_reason: str
    usage: dict[str, int | None]


class ModelAdapter(Protocol):
    def complete(
        self, request: bytes, *, settings: dict[str, Any], request_event_id: str, branch_id: str
    ) -> ModelResult: ...


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
        self, request: bytes, *, settings: dict[str, Any], request_event_id: str, branch_id: str
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
            e = entry["error"]
            raise ModelError(e["reason"], e.get("http_status"), e.get("retry_after_ms"))
        content = list(entry["content"])
        usage = entry.get("usage") or estimate_usage(request, content)
        return ModelResult(content, entry.get("stop_reason", "end_turn"), usage)


# ------------------------------------------------------------------ demo


class DemoModel:
    """The offline demo model. It reads the latest user line of the request:

    - `note: <text>` → tool_use `note {text}` (effectful: asks for approval by default);
    - `ask: <question>` → tool_use `ask_user {question}`;
    - `todo: a; b; c` → tool_use `todo_write` (ids t1.., status pending);
    - `time` → tool_use `time {}` (read-only);
    - anything else → the text `You said: "<line>"`.

    When the request ends with a tool result it answers `Done: <preview>` and ends the turn.
    """

    def complete(
        self, request: bytes, *, settings: dict[str, Any], request_event_id: str, branch_id: str
    ) -> ModelResult:
        content, stop = self.answer(request)
        return ModelResult(content, stop, estimate_usage(request, content))

    def answer(self, request: bytes) -> tuple[list[dict[str, Any]], str]:
        lines = request_lines(request)
        last = lines[-1] if len(lines) > 1 else {}
        if last.get("role") == "tool":
            preview = _text_of(last.get("content"))
            if len(preview) > PREVIEW_CHARS:
                preview = preview[:PREVIEW_CHARS] + "…"
            return [{"type": "text", "text": f"Done: {preview}"}], "end_turn"
        text = ""
        for line in reversed(lines[1:]):
            if line.get("role") == "user":
                text = _text_of(line.get("content")).strip()
                break
        use = self._tool_use(text)
        if use is None:
            return [{"type": "text", "text": f'You said: "{text}"'}], "end_turn"
        name, args = use
        return [
            {"type": "tool_use", "call_id": call_id_for(request, 0), "name": name, "input": args}
        ], "tool_use"

    @staticmethod
    def _tool_use(text: str) -> tuple[str, dict[str, Any]] | None:
        head, sep, rest = text.partition(":")
        cmd, rest = head.strip().lower(), rest.strip()
        if sep and cmd == "note" and rest:
            return "note", {"text": rest}
        if sep and cmd == "ask" and rest:
            return "ask_user", {"question": rest}
        if sep and cmd == "todo":
            items = [x.strip() for x in rest.split(";") if x.strip()]
            if items:
                todos = [{"id": f"t{i}", "content": c, "status": "pending"} for i, c in enumerate(items, 1)]
                return "todo_write", {"todos": todos}
        if text.strip().lower() == "time":
            return "time", {}
        return None


# ------------------------------------------------------------------ registry

_FACTORIES: dict[str, Callable[[], ModelAdapter]] = {"demo": DemoModel, "scripted": ScriptedModel}


def register_adapter(name: str, factory: Callable[[], ModelAdapter]) -> None:
    """Real providers register their adapter factory by adapter name."""
    _FACTORIES[name] = factory


def adapter_for(model_ref: dict[str, Any], adapter_ref: dict[str, Any]) -> ModelAdapter:
    """The adapter for a settings epoch (`adapter.name` picks it; the provider as fallback)."""
    name = adapter_ref.get("name") or model_ref.get("provider")
    factory = _FACTORIES.get(str(name)) or _FACTORIES.get(str(model_ref.get("provider")))
    if factory is None:
        raise LookupError(f"no model adapter {name!r}")
    return factory()
