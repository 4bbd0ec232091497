"""Deferred (non-blocking) calls, the worker's side (semantics §4 "Effects and exactly-once":
`tool_result{origin: deferred}`; rule 7; Render v1 `heartbeat`, `tool_result_late`).

A tool the pinned agent declares `deferred` (a Lambda tool or a built-in: `agents._binding`)
does not block its turn:
1. dispatch: the call is sent to the deferred-call runner (`store.deferred_calls`: a signed
   message per call) first, then one append records `effect_begin` (unless read_only: the effect
   is potentially sent from here) and `tool_result{origin: deferred}` (the placeholder the model
   sees). The model turn continues at once.
2. the runner (`engine.deferred_runner`) runs the tool and appends its real result as
   `tool_result_late` (with `effect_commit`), exactly once, then wakes the branch.
3. while the turn's latest answer is final and deferred calls still run, the turn stays open
   (the run is not complete with background work unfinished): a late result the model hasn't
   seen is requested at once; otherwise, `policy.retry.heartbeat_ms` after the latest answer and
   then after waits that double (up to 10 min), a `heartbeat{running_call_ids}` wakes the model
   with the running ids;
   in between the step ends `wait` with its wake-up armed on the step timer (a late result
   wakes it sooner). Under `stop_when_idle` it waits for the results but asks nothing new.
4. a begun deferred effect is the runner's, not a crashed worker's (no `crash_after_begin`).
   One whose outcome the runner could not learn parks (`effect_unknown` + `parked{effect}`)
   like any unknown effect; once a human resolves it, its late result is the resolution's.
5. a cancel waits for running deferred effects (rule 11: no `cancelled` while one is begun
   or unknown); the runner settles a call it has not started after a barrier `not_sent`.
"""

from __future__ import annotations

from typing import Any

from ..core.fold import Call, Fold, Turn
from ..writer import Draft, View
from . import retry
from .bindings import is_deferred
from .effects import ASSUMED_DONE_PREVIEW, Effects, _read_result
from .loop import HOST, result
from .subagents import Subagents, child_park_reason

PLACEHOLDER = "Running in the background (call {call_id}); its result arrives later."
NO_RUNNER = "Tool {name} runs in the background, and this deployment has no deferred-call queue."
NOT_DONE = "Not executed: the call was settled as not done."
#: heartbeats in one turn before its running tool calls are given up (about 20 min at the
#: default heartbeat_ms: 20 + 40 + 80 + 160 + 320 + 600 s): the runner settles a call within
#: MAX_RECEIVES receives, so a call still running by then lost its message
MAX_HEARTBEATS = 6
#: Each heartbeat is a billed model request: the wait before the next one doubles from
#: heartbeat_ms up to this, so a background child working for an hour (never given up: it has
#: a log of its own) costs ten requests, not 180.
MAX_HEARTBEAT_GAP_MS = 600_000
GAVE_UP = "Error: no result arrived; the call was given up."
#: hold_for_deferred: no deferred work holds the turn (the caller goes on)
GO_ON = "go_on"
#: hold_for_deferred: request the model now (it hasn't seen a late result or heartbeat)
REQUEST = "request"


def heartbeat_gap_ms(f: Fold, beats: int) -> int:
    """The wait after the turn's latest answer before heartbeat number `beats` + 1."""
    return min(int(retry.policy(f)["heartbeat_ms"]) << min(beats, 20), MAX_HEARTBEAT_GAP_MS)


def late(call_id: str, text: str, is_error: bool, actor: dict[str, Any] = HOST) -> Draft:
    data = {"call_id": call_id, "completeness": "complete", "is_error": is_error, "preview": text}
    return Draft("tool_result_late", data, actor)


def runners_effect(f: Fold, entry: dict[str, str]) -> bool:
    """A begun effect of a running deferred call: its runner's, not a crashed worker's."""
    call = f.calls.get(entry["call_id"])
    return call is not None and call.call_id in f.running


class Deferred(Effects, Subagents):
    def deferred(self, view: View, call: Call) -> bool:
        return is_deferred(self.ctx, view.fold, call.name)

    def dispatch_deferred(self, view: View, call: Call, *, attempt: int) -> str | None:
        """Send the call to its runner, then record it begun (unless read-only) with its
        placeholder result, one append. A lost race re-decides and sends again: the runner
        records one late result per call, whatever the messages."""
        queue = self.ctx.deferred_calls
        if queue is None:
            self.append(view, [result(call.call_id, NO_RUNNER.format(name=call.name), "not_executed", True)])
            return None
        rec = view.record
        self.maybe_renew(force=True)
        coords = {
            "branch_id": self.branch_id,
            "call_id": call.call_id,
            "tenant": rec.tenant,
            "thread_id": rec.thread_id,
        }
        queue.send(coords)  # first: a failed send fails the step (retried), nothing recorded
        drafts = []
        if call.effect_class != "read_only":
            drafts.append(Draft("effect_begin", {"attempt": attempt, "call_id": call.call_id}, HOST))
        drafts.append(result(call.call_id, PLACEHOLDER.format(call_id=call.call_id), "deferred", False))
        self.append(view, drafts)
        return None

    def settled_late(self, f: Fold) -> Draft | None:
        """A running deferred call whose effect a human (or the runner) settled without a late
        result: its late result from the settlement."""
        for call_id in f.running:
            call = f.calls[call_id]
            entry = f.effects.get(call.effect_key)
            if entry is None or entry["status"] != "resolved" or not call.settled_seq:
                continue
            settlement = f.events[call.settled_seq - 1]["data"]
            if settlement["outcome"] in ("confirmed_success", "assume_done"):
                ref = settlement.get("result_ref")
                text, is_error = ASSUMED_DONE_PREVIEW, False
                if ref is not None:
                    text, is_error = _read_result(self.ctx.artifacts.get_ref(ref))
                return late(call_id, text, is_error)
            return late(call_id, NOT_DONE, True)
        return None

    def hold_for_deferred(self, view: View, turn: Turn) -> str | None:
        """The turn's latest answer is final: GO_ON (complete it), REQUEST (the model hasn't
        seen a late result or heartbeat), or hold it open while deferred calls run (None after
        an append, `wait` until the next heartbeat)."""
        f = view.fold
        if turn.woken and not turn.stop_when_idle:
            return REQUEST
        if not f.running:
            return GO_ON
        for call_id in f.running:
            if call_id in f.spawned:
                held = self.background_child(view, f.calls[call_id])
                if held != GO_ON:
                    return held
        settled = self.settled_late(f)
        if settled is not None:
            self.append(view, [settled])
            return None
        due = turn.quiet_since + heartbeat_gap_ms(f, turn.heartbeats)
        if turn.stop_when_idle or self.ctx.clock() < due:
            return self.wait(due if not turn.stop_when_idle else self.ctx.clock() + self.heartbeat_ms(f))
        if turn.heartbeats >= MAX_HEARTBEATS:  # its runner is lost: stop paying for wake-ups
            self.append(view, self.give_up(f))
            return None
        self.append(view, [Draft("heartbeat", {"running_call_ids": list(f.running)}, HOST)])
        return None

    def give_up(self, f: Fold) -> list[Draft]:
        """The running calls after MAX_HEARTBEATS: a read-only one ends with an error late
        result (a late answer of its runner then finds it recorded); an effect is in doubt and
        parks for a human (C3). A background child is not given up: it has a log of its own."""
        drafts: list[Draft] = []
        for call_id in f.running:
            call = f.calls[call_id]
            if call_id in f.spawned:
                continue
            if call.effect_class == "read_only":
                drafts.append(late(call_id, GAVE_UP, True))
            elif f.effects.get(call.effect_key, {}).get("status") == "begun":
                drafts.append(Draft("effect_unknown", {"call_id": call_id, "reason": "timeout"}, HOST))
                drafts.append(self.park_effect(call))
        return drafts or [Draft("heartbeat", {"running_call_ids": list(f.running)}, HOST)]

    def hold_cancel(self, view: View) -> str | None:
        """Under a cancel: wait while a running deferred effect is begun (its runner settles
        it), park on one in doubt; GO_ON once none is open (rule 11)."""
        f = view.fold
        settled = self.settled_late(f)
        if settled is not None:
            self.append(view, [settled])
            return None
        for call_id in f.running:
            call = f.calls[call_id]
            if call_id in f.spawned:  # tree cancel: the barrier goes to the child; it ends first
                return self.cancel_spawn(view, call, f.events[f.last_cancel_seq - 1])
            entry = f.effects.get(call.effect_key)
            if entry is None:
                continue
            if entry["status"] == "unknown":
                if ("effect", call.effect_key) in f.parked:
                    return "parked"
                self.append(view, [self.park_effect(call)])
                return None
            if entry["status"] == "begun":
                return self.wait(self.ctx.clock() + self.heartbeat_ms(f))
        return GO_ON

    def start_background(self, view: View) -> None:
        """Background children not created yet (their agent_spawned and placeholder are
        durable): create each and wake it. A crash before repeats this, never twice a child."""
        f = view.fold
        for call_id in f.running:
            spawned = f.spawned.get(call_id)
            if spawned is None or spawned["data"]["agent_name"] not in (self.ctx.agents or {}):
                continue
            if self.child_view(view.record.tenant, spawned["data"]["child_thread_id"]) is None:
                child = self.create_child(view, spawned, str(f.calls[call_id].input.get("prompt", "")))
                self.wake(child.branch_id, "spawned")

    def background_child(self, view: View, call: Call) -> str | None:
        """A running background spawn: its end is agent_finished + its late result; a child that
        parks parks the parent (as a foreground one does); GO_ON while it runs."""
        f = view.fold
        spawned = f.spawned[call.call_id]
        child_id = spawned["data"]["child_thread_id"]
        child = self.child_view(view.record.tenant, child_id)
        if child is None:
            if spawned["data"]["agent_name"] in (self.ctx.agents or {}):
                self.start_background(view)
                return GO_ON
            data = {
                "child_thread_id": child_id,
                "status": "failed",
                "usage": {"input_tokens": 0, "output_tokens": 0},
            }
            text = f"failed: agent {spawned['data']['agent_name']} is not deployed here"
            self.append(view, [Draft("agent_finished", data, HOST), late(call.call_id, text, True)])
            return None
        if self.finish_if_ended(view, call, child):
            return None
        cf = child.fold
        if cf.parked and ("child", child_id) not in f.parked:
            kind, ident = next(iter(cf.parked))
            park = {
                "address": {"id": child_id, "kind": "child"},
                "reason": child_park_reason(cf, kind, ident),
            }
            self.append(view, [Draft("parked", park, HOST)])
            return None
        if cf.turn_open and cf.turn.last_model is None:  # not started: (re-)wake it
            self.wake(child.branch_id, "spawned")
        return GO_ON

    @staticmethod
    def heartbeat_ms(f: Fold) -> int:
        return int(retry.policy(f)["heartbeat_ms"])

    def wait(self, not_before: int) -> str:  # engine.retry_turn arms the step timer
        raise NotImplementedError
