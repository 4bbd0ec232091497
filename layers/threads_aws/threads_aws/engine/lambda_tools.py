"""Tools that are Lambda functions (an agent tool spec with `"lambda": ARN | logical id`).

The worker calls `LambdaTool` only after `effect_begin` is durable and the lease re-checked
(`effects.dispatch_effect`); a read-only Lambda tool runs without effect events. The request is
one synchronous Invoke (`store.functions`) with this payload, documented for tool authors:

    {"effect_key": "<branch_id>:<call_id>",   # the idempotency key: the same on every re-send
     "call_id": "...", "tool": "<tool name>", "input": {...the call's arguments...},
     "thread_id": "...", "tenant": "...", "branch_id": "...", "attempt": 1}

(`effect_key` is null for a read-only tool.) Deduplicate on `effect_key` (Powertools
Idempotency with `event_key_jmespath="effect_key"`: `functions/tool_example`). A reconcilable
tool is also called with `"reconcile": true` after an unknown outcome and answers
`{"found": true, "result": <answer>}` or, with finality, `{"found": false}`.

The function's answer: `{"text": str, "is_error"?: bool}`, a string, or any JSON value (its
canonical JSON is the result text). Outcomes (semantics.md §4 "Effects and exactly-once"):
- an answer → the result (committed with the effect);
- a function error (`FunctionError`: it raised) → an error result; Lambda's own timeout of the
  function (`Sandbox.Timedout`) → unknown (`timeout`): it may have done its work; Powertools'
  `IdempotencyAlreadyInProgressError` (an earlier attempt of the key still runs) → unknown;
- the answer lost (read timeout, broken connection) → `ToolUncertain` → `effect_unknown`, settled
  by the effect class (a re-send inside the dedup window, reconcile, or a park for a human);
- never sent (no connection, throttled, not found, access denied) → `ToolNotSent`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, ClassVar

from ..core.canonical import canonical_bytes
from ..store.functions import Functions, Invoked, NotSent, Uncertain
from .tools import ToolContext, ToolNotSent, ToolOutput, ToolUncertain

TIMED_OUT = ("Sandbox.Timedout",)
#: An earlier attempt of this effect key is still running (Powertools Idempotency's error): the
#: outcome is not known yet, so it is unknown, not an error result.
IN_PROGRESS = ("IdempotencyAlreadyInProgressError",)


def payload(name: str, args: dict[str, Any], tc: ToolContext, **extra: Any) -> bytes:
    return canonical_bytes(
        {
            "attempt": tc.attempt,
            "branch_id": tc.branch_id,
            "call_id": tc.call_id,
            "effect_key": tc.effect_key,
            "input": args,
            "tenant": tc.tenant,
            "thread_id": tc.thread_id,
            "tool": name,
            **extra,
        }
    )


def answer_output(value: Any) -> ToolOutput:
    if isinstance(value, dict) and isinstance(value.get("text"), str):
        return ToolOutput(value["text"], is_error=value.get("is_error") is True)
    if isinstance(value, str):
        return ToolOutput(value)
    return ToolOutput(canonical_bytes(value).decode())


def _error_output(body: bytes) -> ToolOutput:
    try:
        err = json.loads(body)
    except ValueError:
        err = {}
    if not isinstance(err, dict):
        err = {}
    kind, message = err.get("errorType") or "Error", err.get("errorMessage") or "the function failed"
    if kind in TIMED_OUT or "Task timed out" in str(message):
        raise ToolUncertain("timeout")  # Lambda stopped it mid-work: it may have done its effect
    if kind in IN_PROGRESS:
        raise ToolUncertain("transport_error")
    return ToolOutput(f"Error: {kind}: {message}", is_error=True)


@dataclass(frozen=True)
class LambdaTool:
    """The executor of one Lambda tool binding."""

    functions: Functions
    name: str
    function: str
    timeout_ms: int = 60_000
    #: every invocation is its own sandbox: read-only calls may run side by side (engine.parallel)
    concurrent: ClassVar[bool] = True

    def _invoke(self, body: bytes) -> Any:
        out = self.functions.invoke(self.function, body, timeout_ms=self.timeout_ms)
        if isinstance(out, Uncertain):
            raise ToolUncertain(out.reason)
        if isinstance(out, NotSent):
            raise ToolNotSent(out.reason, retryable=out.retryable)
        assert isinstance(out, Invoked)
        return out

    def __call__(self, args: dict[str, Any], tc: ToolContext) -> ToolOutput:
        out = self._invoke(payload(self.name, args, tc))
        if out.function_error:
            return _error_output(out.payload)
        try:
            value = json.loads(out.payload) if out.payload else None
        except ValueError:
            return ToolOutput(out.payload.decode("utf-8", "replace"))
        return answer_output(value)

    def reconcile(self, args: dict[str, Any], tc: ToolContext) -> ToolOutput | None:
        """The outcome of an earlier attempt with finality: its result, or None (it never ran).
        Anything short of finality raises ToolUncertain (the effect stays parked)."""
        try:
            out = self._invoke(payload(self.name, args, tc, reconcile=True))
        except ToolNotSent as exc:
            raise ToolUncertain("transport_error") from exc
        if out.function_error:
            raise ToolUncertain("transport_error")
        try:
            value = json.loads(out.payload)
        except ValueError:
            raise ToolUncertain("transport_error") from None
        if not isinstance(value, dict) or not isinstance(value.get("found"), bool):
            raise ToolUncertain("transport_error")
        return answer_output(value.get("result")) if value["found"] else None
