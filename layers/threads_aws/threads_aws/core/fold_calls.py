"""The fold's rules for tool calls and their effects: tool_call, permission_decision, the effect
events (rule 8) with each call's effect history, tool results (rule 7, answers per rule 25) and
deferred calls' late results and heartbeats."""

from __future__ import annotations

from typing import Any

from .fold_parks import check_answer
from .fold_state import Call, FoldState
from .manifest import manifest_of_receipt

EFFECT_STATUS = {
    "effect_begin": "begun",
    "effect_commit": "committed",
    "effect_unknown": "unknown",
    "effect_resolved": "resolved",
}


class CallRules(FoldState):
    """Tool calls, effects and results."""

    __slots__ = ()

    def _on_tool_call(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        call_id = d["call_id"]
        if call_id in self.calls:
            raise self._bad(seq, f"call_id {call_id} repeats along the resolved chain")  # rule 9
        spec = self.tools.get(d["name"])
        effect_class = spec["effect_class"] if spec else "unguarded"
        self.calls[call_id] = Call(call_id, seq, ev["branch_id"], d["name"], d["input"], effect_class)
        self.pending[call_id] = None

    def _on_permission_decision(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        call = self.calls.get(d["call_id"])
        if call is not None:
            call.decision = d["decision"]

    def _effect(self, ev: dict[str, Any], seq: int, d: dict[str, Any], kind: str) -> None:
        call = self.calls.get(d["call_id"])
        if call is not None and call.effect_class == "read_only":
            raise self._bad(seq, "read_only calls write no effect events")  # rule 8
        # No rule needs a tool_call before effect_commit/unknown/resolved (rule 8 covers
        # effect_begin); without one the key takes the event's own branch (inferred).
        key = call.effect_key if call is not None else f"{ev['branch_id']}:{d['call_id']}"
        entry = self.effects.get(key)
        before = entry["status"] if entry else None
        status = EFFECT_STATUS[kind]
        if entry is None:
            entry = self.effects[key] = {"effect_key": key, "call_id": d["call_id"], "status": status}
        entry["status"] = status
        self.open_effects += (status in ("begun", "unknown")) - (before in ("begun", "unknown"))
        if call is None:
            return
        if kind == "effect_begin":
            call.attempt = d["attempt"]
            if call.first_begin_time is None:
                call.first_begin_time = ev["time"]
        elif kind in ("effect_commit", "effect_resolved"):
            call.settled_seq = seq
            if kind == "effect_resolved":
                call.resolution = d["outcome"]

    def _on_effect_begin(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        call = self.calls.get(d["call_id"])
        if call is None:
            raise self._bad(seq, "effect_begin for an unknown call")
        if not (call.decision == "allow" or call.approved):
            raise self._bad(seq, "effect_begin without allow or a consumed approval")  # rule 8
        if self.last_cancel_seq > call.seq:
            raise self._bad(seq, "effect_begin after a cancel_requested barrier")  # rule 8
        self._effect(ev, seq, d, "effect_begin")

    def _on_effect_commit(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self._effect(ev, seq, d, "effect_commit")
        manifest = manifest_of_receipt(d.get("provider_receipt"))
        if manifest is not None:
            self.workspace = manifest

    def _on_effect_unknown(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self._effect(ev, seq, d, "effect_unknown")

    def _on_effect_resolved(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self._effect(ev, seq, d, "effect_resolved")

    def _on_tool_result(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        call_id = d["call_id"]
        if call_id not in self.pending:
            raise self._bad(seq, "tool_result without a pending tool_call")  # rule 7
        if d["origin"] == "answered":
            if ("input", call_id) not in self.parked:
                raise self._bad(seq, "answer without an open question")  # rule 25
            check_answer(seq, self.calls[call_id], d["preview"])
        del self.pending[call_id]
        call = self.calls[call_id]
        call.result_origin = d["origin"]
        call.deferred = d["origin"] == "deferred"
        if call.deferred:
            self.running[call_id] = None

    def _on_tool_result_late(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        call = self.calls.get(d["call_id"])
        if call is None or not call.deferred:
            raise self._bad(seq, "tool_result_late without a deferred tool_result")  # rule 7
        self.running.pop(call.call_id, None)
        if self.turn_open:
            self.turn.woken = True

    def _on_heartbeat(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        if self.turn_open:
            self.turn.woken = True
            self.turn.quiet_since = ev["time"]
            self.turn.heartbeats += 1
