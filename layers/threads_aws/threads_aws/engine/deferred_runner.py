"""The deferred-call runner: each `DeferredCallQueue` message runs one deferred call off the
turn and records its real result as `tool_result_late` (semantics rule 7), exactly once.

Per message (`run_one`), everything is decided from the log, so a redelivery (a crash anywhere,
SQS's at-least-once) repeats nothing that is recorded and loses nothing that isn't:
1. the token must be this deployment's HMAC of the message's (tenant, thread, branch, call)
   (`store.deferred_calls`), and the branch must be that tenant's thread's: else dropped;
2. the call: no placeholder yet but still pending → retried later (the worker sends before it
   appends); closed otherwise, or its late result (or an effect settlement) already recorded →
   done, nothing appended;
3. a `cancel_requested` after the call, before the body started → `effect_resolved{not_sent}`
   (if it has an effect) + an error late result: nothing ran;
4. the tool body runs (the effect key is its idempotency key: a redelivery after a crash mid-body
   re-sends under the same key); its answer → `effect_commit` + `tool_result_late` in one append
   (a lost head race re-checks step 2 on the new head and appends on it);
5. no answer (a lost response, an exception) → retried by redelivery until `MAX_RECEIVES`, then
   `effect_unknown` + `parked{effect}` (a human settles it; engine.deferred) or, read-only, an
   error late result; a tool that could not be reached likewise ends as an error late result
   after `effect_resolved{not_sent}`;
6. after an append the branch is woken (its step requests the model with the late result).

Appends are controls (the writer epoch, as the API's), never under the worker's lease.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from ..core.canonical import canonical_bytes
from ..core.errors import LogError
from ..core.fold import Call
from ..store.records import NotFound
from ..writer import Draft, View
from .bindings import executor_for
from .context import EngineContext
from .deferred import late
from .loop import HOST, TOOL
from .tools import ToolContext, ToolNotSent, ToolOutput, ToolUncertain

log = logging.getLogger("threads_aws.engine")

MAX_RECEIVES = 4  # a call without an answer this many times is in doubt
APPEND_RETRIES = 8
CANCELLED = "Not executed: the turn was cancelled before the call started."


class RetryLater(Exception):
    """Leave the message for a later receive (the placeholder isn't there yet, or no answer)."""


def run_one(ctx: EngineContext, message: dict[str, Any], *, receive_count: int = 1) -> str:
    """One deferred call's message: its outcome (`appended`, `done`, `dropped`); raises
    RetryLater to have it redelivered."""
    queue = ctx.deferred_calls
    if queue is None or not queue.verify(message):
        return "dropped"
    try:
        view = ctx.writer.load(message["branch_id"])
    except (LogError, NotFound):
        return "dropped"
    if view.thread_id != message["thread_id"] or view.record.tenant != message["tenant"]:
        return "dropped"
    call = view.fold.calls.get(message["call_id"])
    state = _state(view, call)
    if state != "run":
        if state == "wait":
            raise RetryLater(message["call_id"])
        return state
    assert call is not None
    if view.fold.last_cancel_seq > call.seq:
        return _append(ctx, view.branch_id, call.call_id, lambda c: _not_sent(c, CANCELLED))
    executor = executor_for(ctx, view.fold, call.name)
    if executor is None:
        text = f"Not executed: tool {call.name} is not available."
        return _append(ctx, view.branch_id, call.call_id, lambda c: _not_sent(c, text))
    tc = ToolContext(
        tenant=view.record.tenant,
        thread_id=view.thread_id,
        branch_id=view.branch_id,
        call_id=call.call_id,
        effect_key=None if call.effect_class == "read_only" else call.effect_key,
        attempt=max(call.attempt, 1),
        clock=ctx.clock,
        stores=ctx.stores,
        workspace=view.fold.workspace,
        principal=view.fold.turn.principal,  # the call's turn is open while it runs (rule 7)
    )
    try:
        out = executor(call.input, tc)
    except ToolNotSent as exc:
        if exc.retryable and receive_count < MAX_RECEIVES:
            raise RetryLater(call.call_id) from exc
        text = f"Not executed: the tool could not be reached ({exc.reason})."
        return _append(ctx, view.branch_id, call.call_id, lambda c: _not_sent(c, text))
    except Exception as exc:  # noqa: BLE001 - no answer: the outcome is unknown
        if receive_count < MAX_RECEIVES:
            raise RetryLater(call.call_id) from exc
        reason = (
            exc.reason if isinstance(exc, ToolUncertain) and exc.reason == "timeout" else "transport_error"
        )
        return _append(ctx, view.branch_id, call.call_id, lambda c: _in_doubt(c, reason))
    return _append(ctx, view.branch_id, call.call_id, lambda c: _answered(ctx, c, out))


def _state(view: View, call: Call | None) -> str:
    """`run`, `wait` (no placeholder yet), `done` (recorded) or `dropped` (not a deferred call)."""
    if call is None:
        return "dropped"  # a message is sent only for a recorded call
    if call.call_id in view.fold.pending:
        return "wait"
    if not call.deferred:
        return "dropped"
    if call.call_id not in view.fold.running:  # its late result (or a settlement) is recorded
        return "done"
    entry = view.fold.effects.get(call.effect_key)
    if entry is not None and entry["status"] != "begun":
        return "done"  # settled (or in doubt): the worker's and the human's from here
    return "run"


def _answered(ctx: EngineContext, call: Call, out: ToolOutput) -> list[Draft]:
    drafts = []
    if call.effect_class != "read_only":
        body = canonical_bytes({"is_error": out.is_error, "text": out.text})
        commit: dict[str, Any] = {
            "call_id": call.call_id,
            "result_ref": ctx.artifacts.put(body, "application/json"),
        }
        if out.receipt is not None:
            commit["provider_receipt"] = out.receipt
        drafts.append(Draft("effect_commit", commit, HOST))
    return [*drafts, late(call.call_id, out.text, out.is_error, TOOL)]


def _not_sent(call: Call, text: str) -> list[Draft]:
    drafts = []
    if call.effect_class != "read_only":
        data = {"by": "adapter", "call_id": call.call_id, "outcome": "not_sent"}
        drafts.append(Draft("effect_resolved", data, HOST))
    return [*drafts, late(call.call_id, text, True)]


def _in_doubt(call: Call, reason: str) -> list[Draft]:
    if call.effect_class == "read_only":
        return [late(call.call_id, "Error: the tool gave no answer.", True)]
    park = {"address": {"id": call.effect_key, "kind": "effect"}, "reason": "effect_unknown"}
    return [
        Draft("effect_unknown", {"call_id": call.call_id, "reason": reason}, HOST),
        Draft("parked", park, HOST),
    ]


def _append(ctx: EngineContext, branch_id: str, call_id: str, build: Any) -> str:
    """Append `build(call)` unless the call's outcome got recorded meanwhile (a redelivery, a
    second message of the same call): exactly one late result per call."""
    for _ in range(APPEND_RETRIES):
        try:
            view = ctx.writer.load(branch_id)
        except NotFound:
            return "dropped"  # the thread was deleted while the body ran: nothing to record on
        call = view.fold.calls[call_id]
        if _state(view, call) != "run":
            return "done"
        try:
            ctx.writer.append(branch_id, build(call))
        except NotFound:
            return "dropped"
        except LogError as exc:
            if exc.code == "seq_conflict":
                continue  # the head moved: re-check on the new head
            raise
        _wake(ctx, branch_id)
        return "appended"
    raise RetryLater(call_id)


def _wake(ctx: EngineContext, branch_id: str) -> None:
    if ctx.steps is None:
        return
    try:
        ctx.steps.enqueue(branch_id, reason="late_result")
    except Exception:  # noqa: BLE001 - the heartbeat timer wakes it anyway
        log.exception("could not wake %s after a late result", branch_id)


def handle_batch(event: dict[str, Any], context: Any, *, engine: EngineContext) -> dict[str, Any]:
    """The runner's SQS batch (a standard queue): each record's call; one left for later is a
    partial batch failure (redelivered after the queue's visibility timeout)."""
    failures = []
    for record in event.get("Records") or []:
        try:
            message = json.loads(record["body"])
            count = int((record.get("attributes") or {}).get("ApproximateReceiveCount", "1"))
            if not isinstance(message, dict):
                continue
            run_one(engine, message, receive_count=count)
        except ValueError:
            continue  # not a message of ours: nothing to redeliver
        except RetryLater:
            failures.append({"itemIdentifier": record["messageId"]})
        except Exception:  # noqa: BLE001 - reported; the record comes back
            log.exception("deferred call failed")
            failures.append({"itemIdentifier": record["messageId"]})
    _back_off(engine, event, {f["itemIdentifier"] for f in failures})
    return {"batchItemFailures": failures}


def _back_off(engine: EngineContext, event: dict[str, Any], failed: set[str]) -> None:
    """Failed records come back after their receive count's backoff (2, 6, 18, ... s)."""
    from .queue import retry_delay_s

    if not failed or engine.deferred_calls is None:
        return
    for r in event.get("Records") or []:
        if r.get("messageId") not in failed or "receiptHandle" not in r:
            continue
        count = int((r.get("attributes") or {}).get("ApproximateReceiveCount", "1"))
        try:
            engine.deferred_calls.retry_later(r["receiptHandle"], retry_delay_s(count))
        except Exception:  # noqa: BLE001 - the queue's visibility timeout brings it back
            log.exception("could not shorten a deferred call's visibility")
