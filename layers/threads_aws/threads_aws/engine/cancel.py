"""Cancel: a `cancel_requested` barrier stops all dispatch (semantics.md §4).

Calls that never began close `not_executed`; one that began and may have taken effect closes
`interrupted` (never "didn't run"); a spawn call runs to its child's end first (the barrier is
copied to the child: tree cancel, `engine.subagents`); in-doubt effects settle or park first (rule 11: no
`cancelled` while an effect is begun or unknown); then every open park is resumed by the cancel,
and `cancelled` + `turn_completed{cancelled}` end the turn.
"""

from __future__ import annotations

from typing import Any

from ..core.fold import Fold
from ..writer import Draft, View
from .deferred import GO_ON, Deferred
from .loop import HOST, result
from .model_turn import abandon_open_attempts
from .subagents import Subagents

INTERRUPTED_PREVIEW = "Interrupted by a cancel: the call began and may or may not have taken effect."
NOT_EXECUTED_PREVIEW = "Not executed: the turn was cancelled."


def open_cancel(f: Fold) -> dict[str, Any] | None:
    """The latest cancel_requested if no `cancelled` names it yet (from the fold: no scan)."""
    if not f.last_cancel_seq:
        return None
    ev = f.events[f.last_cancel_seq - 1]
    return None if ev["event_id"] in f.cancels_settled else ev


class Cancel(Deferred, Subagents):
    def cancel_turn(self, view: View, cancel: dict[str, Any]) -> str | None:
        f = view.fold
        if f.awaiting:
            self.append(view, abandon_open_attempts(f, "cancelled"))
            return None
        for call_id in f.pending:
            if call_id in f.spawned:  # run to the child's end first (engine.subagents)
                return self.cancel_spawn(view, f.calls[call_id], cancel)
        if f.running:  # a running deferred effect settles first (engine.deferred)
            held = self.hold_cancel(view)
            if held != GO_ON:
                return held
        closing: list[Draft] = []
        for call_id in f.pending:
            call = f.calls[call_id]
            entry = f.effects.get(call.effect_key)
            if entry is not None and entry["status"] == "unknown":
                # In doubt: it settles through a human (C3) before `cancelled` (rule 11).
                if ("effect", call.effect_key) in f.parked:
                    return "parked"
                self.append(view, [self.park_effect(call)])
                return None
            settled = self.settled_result(f, call) if entry is not None else None
            if settled is None and entry is not None and self.may_have_run(call):
                # It began and nobody knows whether it took effect: never claim it didn't run.
                settled = result(call_id, INTERRUPTED_PREVIEW, "interrupted", True)
            closing.append(settled or result(call_id, NOT_EXECUTED_PREVIEW, "not_executed", True))
        for addr in f.parked.values():
            closing.append(
                Draft("resumed", {"address": dict(addr), "cause_event_id": cancel["event_id"]}, HOST)
            )
        closing.append(Draft("cancelled", {"request_event_id": cancel["event_id"]}, HOST))
        closing.append(Draft("turn_completed", {"reason": "cancelled"}, HOST))
        self.append(view, closing)
        return None
