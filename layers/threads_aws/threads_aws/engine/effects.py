"""Effects: a call that may change the world runs at most as its record says (semantics.md §4,
C3).

Ordering: `effect_begin` is durable and fenced before the tool body runs, and right before it
runs one consistent read of the branch record checks the lease is still ours and no
`cancel_requested` barrier landed after our begin (`clear_to_dispatch`). A timeout or transport
error after dispatch becomes `effect_unknown` + `parked` (a human resolves it), never an error
result. A committed or confirmed effect's result comes from its settlement record
(`materialized_from_commit`), never from a new dispatch; inside an idempotent provider's dedup
window a re-send under the same effect key is safe (`safe_to_retry`).

On a stub-mode branch an external effect never runs: after its begin it is answered from the
fork's recordings or, on a miss, settled `not_sent` and the turn ends (`sandbox.stubs`).
"""

from __future__ import annotations

import json
from typing import Any

from ..core.canonical import canonical_bytes
from ..core.fold import Call, Fold
from ..sandbox import stubs
from ..writer import Draft, View
from .loop import HOST, StepBase, result
from .tools import Executor, ToolContext, ToolNotSent, ToolOutput, ToolUncertain

DEDUP_RESOLUTIONS = frozenset({"safe_to_retry", "not_sent", "assume_not_done"})
MAX_NOT_SENT = 3  # attempts that never reached the tool before the call closes with an error
ASSUMED_DONE_PREVIEW = "The effect was confirmed done; its output is not available."


class Effects(StepBase):
    def park_effect(self, call: Call) -> Draft:
        park = {"address": {"id": call.effect_key, "kind": "effect"}, "reason": "effect_unknown"}
        return Draft("parked", park, HOST)

    def dedup_covers(self, f: Fold, call: Call) -> bool:
        """An idempotent provider dedups on the effect key inside its window, counted from the
        first dispatch: re-sending under the same key is safe (`safe_to_retry`)."""
        spec = f.tools.get(call.name) or {}
        window = spec.get("dedup_window_ms")
        if call.effect_class != "idempotent" or not isinstance(window, int):
            return False
        return call.first_begin_time is not None and self.ctx.clock() < call.first_begin_time + window

    @staticmethod
    def may_have_run(call: Call) -> bool:
        """A resolution that allows a retry without saying the effect didn't happen
        (`safe_to_retry`: the provider dedups, so a re-send is harmless, not a no-op)."""
        return call.resolution == "safe_to_retry"

    def settled_result(self, f: Fold, call: Call) -> Draft | None:
        """A committed or confirmed effect whose call has no result yet: the result comes from the
        settlement record (`materialized_from_commit`), never from a new dispatch."""
        entry = f.effects.get(call.effect_key)
        if entry is None or entry["status"] not in ("committed", "resolved") or not call.settled_seq:
            return None
        # The status is the latest effect event's, so the latest settlement is of that kind.
        settlement = f.events[call.settled_seq - 1]["data"]
        if entry["status"] == "resolved" and settlement["outcome"] in DEDUP_RESOLUTIONS:
            return None
        ref = settlement.get("result_ref")
        text, is_error = ASSUMED_DONE_PREVIEW, False
        if ref is not None:
            text, is_error = _read_result(self.ctx.artifacts.get_ref(ref))
        return result(call.call_id, text, "materialized_from_commit", is_error)

    def dispatch_effect(self, call: Call, executor: Executor, tc: ToolContext, view: View) -> None:
        """Begin (durable, fenced), check the fence again, run the body, record what happened."""
        self.maybe_renew(force=True)
        lines = self.append(
            view, [Draft("effect_begin", {"attempt": tc.attempt, "call_id": call.call_id}, HOST)]
        )
        if not self.clear_to_dispatch(lines[-1].seq):
            # A cancel barrier landed after our begin: we know the body never started.
            data = {"by": "adapter", "call_id": call.call_id, "outcome": "not_sent"}
            self.append_sticky(lambda v: [Draft("effect_resolved", data, HOST)])
            return
        try:
            if view.record.stubs_sha256 is not None and stubs.is_external(call):
                out = self.stubbed(view, call)  # nothing goes live
                if out is None:
                    return
            else:
                with self.heartbeat(view):  # the lease outlives a long tool body
                    out = executor(call.input, tc)
        except ToolNotSent as exc:
            self.record_not_sent(call, tc.attempt, exc)
            return
        except ToolUncertain as exc:
            reason = exc.reason if exc.reason in ("timeout", "transport_error") else "transport_error"
            self.record_unknown(call, reason)
            return
        except Exception:  # noqa: BLE001 - after dispatch, any failure is an unknown outcome
            self.record_unknown(call, "transport_error")
            return
        body = canonical_bytes({"is_error": out.is_error, "text": out.text})
        ref = self.ctx.artifacts.put(body, "application/json")
        commit: dict[str, Any] = {"call_id": call.call_id, "result_ref": ref}
        if out.receipt is not None:
            commit["provider_receipt"] = out.receipt
        self.append_sticky(
            lambda v: [
                Draft("effect_commit", commit, HOST),
                result(call.call_id, out.text, "executed", out.is_error),
            ]
        )

    def stubbed(self, view: View, call: Call, *, begun: bool = True) -> ToolOutput | None:
        """A stub-mode branch's answer for an external call: its recording, or None after a miss
        failed closed (an effect settled `not_sent`, every call of the turn closed, the turn
        ended: `sandbox.stubs`)."""
        assert view.record.stubs_sha256 is not None
        found = stubs.match(stubs.load(self.ctx.artifacts, view.record.stubs_sha256), view.fold, call)
        if not isinstance(found, stubs.Miss):
            return ToolOutput(str(found["output"]), bool(found.get("is_error", False)))
        drafts = []
        if begun:  # its effect_begin is in the log
            data = {"by": "adapter", "call_id": call.call_id, "outcome": "not_sent"}
            drafts.append(Draft("effect_resolved", data, HOST))
        drafts.append(result(call.call_id, found.message(), "not_executed", True))
        drafts += [
            result(c, "Not executed: the run ended at an unmatched external operation.", "not_executed", True)
            for c in view.fold.pending
            if c != call.call_id and view.fold.calls[c].attempt == 0
        ]
        drafts.append(Draft("turn_completed", {"reason": "error"}, HOST))
        self.append_sticky(lambda v: drafts)
        return None

    def stubbed_read(self, view: View, call: Call) -> None:
        """An external call without effect events on a stub-mode branch (a read-only call; a
        spawn_agent or handoff, which would start a live thread): its recorded result, never a
        call. The parent records neither composition call, so those always miss: fail closed."""
        out = self.stubbed(view, call, begun=False)
        if out is not None:
            self.append(view, [result(call.call_id, out.text, "executed", out.is_error)])

    def clear_to_dispatch(self, begin_seq: int) -> bool:
        """Fencing right before a tool body starts, with one consistent read of the branch
        record: the lease is still ours (else `stale_epoch`: stop, recovery settles the begun
        effect), and no `cancel_requested` barrier landed after our `effect_begin`."""
        rec = self.ctx.store.head(self.branch_id)
        if (
            rec is None
            or rec.lease_holder != self.lease.holder_id
            or rec.lease_epoch != self.lease.epoch
            or rec.lease_expires_at <= self.ctx.clock()
        ):
            self.maybe_renew(force=True)  # raises stale_epoch when the lease is gone
        if rec is None or rec.head_seq == begin_seq:
            return True
        return self.ctx.writer.load(self.branch_id, record=rec).fold.last_cancel_seq < begin_seq

    def record_not_sent(self, call: Call, attempt: int, exc: ToolNotSent) -> None:
        """The request never reached the tool: settled `not_sent` (by the adapter). The next
        decision re-sends under the same key (attempt+1), unless it can't work or the attempts
        ran out: then the call closes with an error result (nothing ran)."""
        data = {"by": "adapter", "call_id": call.call_id, "outcome": "not_sent"}
        drafts = [Draft("effect_resolved", data, HOST)]
        if not exc.retryable or attempt >= MAX_NOT_SENT:
            text = f"Not executed: the tool could not be reached ({exc.reason})."
            drafts.append(result(call.call_id, text, "not_executed", True))
        self.append_sticky(lambda v: drafts)

    def reconcile_tool(self, view: View, call: Call, executor: Executor | None) -> bool:
        """An unknown effect of a `reconcilable` tool: look its outcome up with finality. Found:
        `confirmed_success` (by reconcile, its result stored as the settlement); not found:
        `safe_to_retry` (by reconcile; it never ran). False when there is no lookup, or it
        could not tell (the effect parks)."""
        lookup = getattr(executor, "reconcile", None)
        if call.effect_class != "reconcilable" or lookup is None:
            return False
        rec = view.record
        tc = ToolContext(
            tenant=rec.tenant,
            thread_id=rec.thread_id,
            branch_id=self.branch_id,
            call_id=call.call_id,
            effect_key=call.effect_key,
            attempt=call.attempt,
            clock=self.ctx.clock,
            stores=self.ctx.stores,
        )
        try:
            found: ToolOutput | None = lookup(call.input, tc)
        except Exception:  # noqa: BLE001 - no finality: a human decides
            return False
        data: dict[str, object] = {"by": "reconcile", "call_id": call.call_id}
        if found is None:
            data["outcome"] = "safe_to_retry"
        else:
            body = canonical_bytes({"is_error": found.is_error, "text": found.text})
            ref = self.ctx.artifacts.put(body, "application/json")
            data.update(outcome="confirmed_success", result_ref=ref)
        self.append_sticky(lambda v: [Draft("effect_resolved", data, HOST)])
        return True

    def record_unknown(self, call: Call, reason: str) -> None:
        """An unknown outcome. An unguarded (or sandbox_local) effect parks for a human at once;
        an idempotent or reconcilable one is settled by the next decision (a re-send inside the
        dedup window, a lookup), which parks only when that can't settle it."""
        drafts = [Draft("effect_unknown", {"call_id": call.call_id, "reason": reason}, HOST)]
        if call.effect_class not in ("idempotent", "reconcilable"):
            drafts.append(self.park_effect(call))
        self.append_sticky(lambda v: drafts)


def _read_result(body: bytes) -> tuple[str, bool]:
    v = json.loads(body)
    return str(v.get("text", "")), bool(v.get("is_error", False))
