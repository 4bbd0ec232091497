"""The run-step worker's core: `advance` drives one branch as far as it can go.

Every decision is derived from the log alone (`Writer.load(branch).fold`: the fold carries the
open turn, each call's effect history, settings and rules), so crash recovery is the normal
path: a step that finds an open model request, a begun effect or an approved call it never
dispatched continues from there. One loop iteration = one decision = one atomic append (a few
events and their side rows in one transaction), then re-load and decide again, until the branch
is parked or idle.

Ordering guarantees (each module states its own):
- request bytes are put to S3 before `model_request` is appended, and `model_request` is durable
  before the model is called (C2; `model_turn`);
- `effect_begin` is durable and fenced before dispatch, and the lease is renewed right before the
  tool body runs; a timeout/transport error after dispatch becomes `effect_unknown` + `parked`
  (`effects`);
- a `cancel_requested` barrier stops all dispatch: calls that never began close `not_executed`,
  in-doubt effects settle or park first (rule 11), then `cancelled` + `turn_completed{cancelled}`
  (`cancel`).

Races: controls from the API (approvals, answers, cancel, settings, mode) append under
`View.writer_epoch()`, this worker under its lease epoch. A lost head race (`seq_conflict`)
before a dispatch re-loads and re-decides; after a dispatch the same facts are re-appended on
the new head ("sticky", `loop`). A `stale_epoch` means another worker took the lease: stop at
once and dispatch nothing more.

Modules: `context` (EngineContext), `loop` (lease, appends), `calls` (permission, approval,
questions, dispatch), `effects`, `model_turn`, `cancel`, `parks` (expired parks escalated); this
one holds the run loop.
"""

from __future__ import annotations

from typing import Any

from .. import observability
from ..core.errors import LogError
from ..core.fold import Turn
from ..store.records import NotFound
from ..writer import Draft, View
from .cancel import Cancel, open_cancel
from .context import EngineContext, StepOutcome
from .deferred import runners_effect
from .loop import HOST, RECOVERY, Stop
from .model_turn import ModelTurn
from .parks import Parks
from .replies import Replies, is_host_call
from .snapshots import snapshot_draft, snapshot_due

MAX_DECISIONS = 500  # per advance call; then `more`

__all__ = ["EngineContext", "StepOutcome", "advance"]


def advance(ctx: EngineContext, branch_id: str, *, holder_id: str, deadline_ms: int) -> StepOutcome:
    """Take the lease and drive the branch until it parks, goes idle, or the deadline nears."""
    try:
        lease = ctx.store.acquire_lease(branch_id, holder_id, ttl_ms=ctx.lease_ttl_ms, now_ms=ctx.clock())
    except LogError as exc:
        if exc.code == "branch_busy":
            return StepOutcome("busy", 0)
        raise
    except NotFound:
        return StepOutcome("idle", 0)  # a deleted thread's branch (a wake queued before): done
    step = _Step(ctx, branch_id, lease)
    try:
        state = step.run(deadline_ms)
        if state in ("idle", "parked"):  # the branch settled: send what its log says to send
            state = step.run_replies() or state
        if state == "idle":
            step.wake_inbox()
        if state in ("idle", "parked") and step.last_fold is not None:
            step.notify_parent(step.last_fold)  # a child that settled wakes the parent waiting on it
        return StepOutcome(state, step.appended, step.wake_at if state == "wait" else None, step.armed)
    finally:
        step.close_mcp()  # MCP connections live for one step, never across invocations
        try:
            ctx.store.release(branch_id, step.lease)
        except Exception:  # noqa: BLE001 - the lease lapses by itself; never mask the outcome
            pass


class _Step(ModelTurn, Cancel, Replies, Parks):
    def run(self, deadline_ms: int) -> str:
        for _ in range(MAX_DECISIONS):
            if self.ctx.clock() + self.ctx.margin_ms >= deadline_ms:
                return "more"
            try:
                self.maybe_renew()
                view = self.ctx.writer.load(self.branch_id)
                self.last_fold = view.fold
                opener = view.fold.turn.opener  # the latest run's user_input: its event id is the run id
                observability.branch_loaded(view.record.thread_id, opener["event_id"] if opener else None)
                state = self.decide(view)
            except Stop as stop:
                return stop.state
            except LogError as exc:
                if exc.code == "seq_conflict":
                    continue  # a control landed: re-load and re-decide
                if exc.code == "stale_epoch":
                    return "busy"  # another worker holds the branch now
                raise
            if state is not None:
                return state
        return "more"

    def decide(self, view: View) -> str | None:
        """The branch's next step: an outcome (idle, parked) or None after one append."""
        f = view.fold
        if view.record.state != "ready" or f.status() == "inspection_only":
            return "idle"
        if self.resume_satisfied(view):
            return None
        if f.parked and self.escalate_due(view):  # a park outlived its expires_at (engine.parks)
            return None
        # Only walk the effects when one is open (the fold counts them): a thread's settled
        # effects are never looked at again.
        for entry in f.effects.values() if f.open_effects else ():
            if entry["status"] == "begun" and not runners_effect(f, entry):  # its holder crashed
                data = {"call_id": entry["call_id"], "reason": "crash_after_begin"}
                self.append(view, [Draft("effect_unknown", data, RECOVERY)])
                return None
        if self.revert_if_due(view):  # a turn-scoped fallback outlived its turn (engine.fallback)
            return None
        cancel = open_cancel(f)
        if not f.turn_open:
            if f.handed_off and self.ensure_target(view):  # a crash before the target started
                return None
            if cancel is not None and f.open_effects == 0:
                self.append(view, [Draft("cancelled", {"request_event_id": cancel["event_id"]}, HOST)])
                return None
            if snapshot_due(f):
                return self.snapshot(view)
            return "parked" if f.parked else "idle"
        turn: Turn = f.turn
        opener_seq = turn.opener["seq"] if turn.opener else 0
        if cancel is not None and cancel["seq"] > opener_seq:
            return self.cancel_turn(view, cancel)
        if f.parked:
            return "parked"
        if f.awaiting:  # its worker died with the answer in flight: look it up, or abandon it
            self.recover_open_attempts(view)
            return None
        # A host call (a channel reply) is never the model's: `replies` sends and settles it.
        call_id = next((c for c in f.pending if not is_host_call(f.calls[c])), None)
        if call_id is not None:
            return self.advance_call(view, f.calls[call_id])
        if self.sync_mcp_tools(view):  # an MCP server's tools changed: tools_changed first
            return None
        if self.deliver_team_mail(view):  # teammates' messages first (engine.team)
            return None
        return self.next_model_step(view, turn)

    def wake_inbox(self) -> None:
        """Channel items that waited while this branch was busy or parked: wake their thread."""
        view = self.ctx.writer.load(self.branch_id)
        if not view.fold.item_keys or self.ctx.inbox_queue is None:
            return
        try:
            if self.ctx.stores.inbox.pending(view.thread_id, limit=1):
                self.ctx.inbox_queue.wake(view.thread_id, self.branch_id, reason="settled")
        except Exception:  # noqa: BLE001 - the items stay in the inbox; their own retries wake them
            pass

    def run_replies(self) -> str | None:
        try:
            state = self.issue_replies()
            if state is None and self.appended and self.ctx.writer.load(self.branch_id).fold.parked:
                return "parked"  # a send in doubt parked the branch
            return state
        except Stop as stop:
            return stop.state
        except LogError as exc:
            if exc.code in ("seq_conflict", "stale_epoch"):
                return "more" if exc.code == "seq_conflict" else "busy"
            raise

    def snapshot(self, view: View) -> str | None:
        """The turn changed the workspace: capture it as a fork point (`engine.snapshots`)."""
        draft = snapshot_draft(self.ctx.sandbox, view.fold, self.branch_id, self.ctx.clock())
        if draft is None:
            return "idle"  # the capture isn't durable: no fork point (the next turn tries again)
        self.append(view, [draft])
        return None

    def resume_satisfied(self, view: View) -> bool:
        """Close parks whose cause is settled but that nobody resumed (the API normally appends
        `resumed` with its decision; this makes the worker robust to a control that didn't)."""
        f = view.fold
        for (kind, ident), addr in f.parked.items():
            cause_seq = 0
            if kind == "child":  # the child is no longer parked (engine.subagents)
                cause_id = self.child_resumed(view, ident)
                cause_seq = f.seq_of[cause_id] if cause_id is not None else 0
            elif kind == "approval":
                ch = f.challenges.get(ident)
                if ch is not None and ch.consumed:
                    cause_seq = ch.decided_seq
            elif kind == "effect":
                entry = f.effects.get(ident)
                call = f.calls.get(entry["call_id"]) if entry is not None else None
                if entry is not None and call is not None and entry["status"] in ("resolved", "committed"):
                    cause_seq = call.settled_seq
            if cause_seq:
                cause: dict[str, Any] = f.events[cause_seq - 1]
                data = {"address": dict(addr), "cause_event_id": cause["event_id"]}
                self.append(view, [Draft("resumed", data, HOST)])
                return True
        return False
