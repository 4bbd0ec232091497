"""Run tracking (semantics §4 "Runs and completion") and the ``run`` projection.

`track_runs` is the one pass every run reader shares: the ``run`` projection, the HTTP
``RunOutcome`` (`outcomes`) and the host's run routes all read the `RunTrack` it builds, so they
can never disagree about which run an event belongs to or when a run ended.

Ordering: a run's outcome freezes at the **first** point its completion holds (output, no open
turn, no open park, no unfinished background child); later wake turns attributed to it don't
change it. Run completion never reads time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._chain import RESPONSE_TYPES, Event, JsonObj, data_of

# turn_completed reasons that end a run with a status of their own (any other reason: failed).
_TERMINAL_STATUS = {"cancelled": "cancelled", "budget_exhausted": "budget_exhausted", "handoff": "handed_off"}


def _addr_key(addr: Any) -> tuple[str, str] | None:
    if isinstance(addr, Mapping) and isinstance(addr.get("kind"), str) and isinstance(addr.get("id"), str):
        return (addr["kind"], addr["id"])
    return None


@dataclass(slots=True)
class RunTrack:
    """Everything the run projection and RunOutcome need about one run."""

    run_id: str
    turn_open: bool = True
    parks: dict[tuple[str, str], str] = field(default_factory=dict)  # address -> reason, open order
    bg_children: set[str] = field(default_factory=set)
    last_response: Event | None = None
    has_output: bool = False
    accepted: tuple[bool, Any] = (False, None)
    budget: Mapping[str, Any] | None = None
    handoff_to: str | None = None
    # settled outcome, frozen at the first point the run ends
    status: str | None = None
    output_event: Event | None = None
    output_accepted: tuple[bool, Any] = (False, None)
    reason: str | None = None
    code: str | None = None
    abandoned: Mapping[str, Any] | None = None  # the run's latest model_attempt_abandoned data

    def current_status(self) -> str:
        if self.status is not None:
            return self.status
        return "parked" if self.parks else "running"

    def _check_completed(self) -> None:
        if (
            self.status is None
            and self.has_output
            and not self.turn_open
            and not self.parks
            and not self.bg_children
        ):
            self.status = "completed"
            self.output_event = self.last_response
            self.output_accepted = self.accepted


def track_runs(events: Iterable[Event]) -> list[RunTrack]:
    """One pass over the chain: every run (one per ``user_input``) in order.

    A turn is opened by ``user_input`` (a new run) or, for a wake, by ``woken`` or a
    ``model_request`` with no open turn (attributed to the log's last run). Events inside a turn
    belong to that turn's run; outside a turn, ``agent_finished``/``parked{child}`` belong to the
    run that spawned the child, ``resumed`` to the run holding the park, anything else to the
    last run.

    A turn that ends ``error`` (no code) right after closing a call ``not_executed`` that never
    went out (its effect settled ``not_sent``, or no effect at all), no model request between,
    is a stub-mode miss that failed closed (`sandbox.stubs`): its run fails
    ``unmatched_external_op``. A live loop asks the model again after such a result (or ends
    the turn ``cancelled``), so the shape only arises from a miss.
    """
    runs: list[RunTrack] = []
    cur: RunTrack | None = None  # run of the open turn
    child_owner: dict[Any, RunTrack] = {}
    purposes: dict[Any, Any] = {}
    went_out: set[Any] = set()  # calls whose latest effect event isn't a not_sent settlement
    missed = False  # a call that never went out closed not_executed since the last model request
    for ev in events:
        t = ev.get("type")
        d = data_of(ev)
        last = runs[-1] if runs else None
        if t in ("effect_begin", "effect_commit", "effect_unknown", "effect_resolved"):
            if t == "effect_resolved" and d.get("outcome") == "not_sent":
                went_out.discard(d.get("call_id"))
            else:
                went_out.add(d.get("call_id"))
        elif t == "tool_result" and d.get("origin") == "not_executed" and d.get("call_id") not in went_out:
            missed = True
        elif t in ("model_request", "user_input"):
            missed = False
        if t == "user_input":
            cur = RunTrack(run_id=ev["event_id"])
            runs.append(cur)
            continue
        if cur is None and (t == "woken" or t == "model_request") and last is not None:
            cur = last
            cur.turn_open = True
        r = cur if cur is not None else last
        if t == "model_request":
            purposes[ev["event_id"]] = d.get("purpose", "turn")
        elif t == "model_attempt_abandoned":
            if r is not None and r.status is None:
                r.abandoned = d
        elif t in RESPONSE_TYPES:
            if r is not None and purposes.get(d.get("request_event_id"), "turn") == "turn":
                r.last_response = ev
        elif t == "agent_spawned":
            cid = d.get("child_thread_id")
            if r is not None and isinstance(cid, str):
                child_owner[cid] = r
                if d.get("mode") == "background":
                    r.bg_children.add(cid)
        elif t == "agent_finished":
            owner = child_owner.get(d.get("child_thread_id"))
            if owner is not None:
                owner.bg_children.discard(d["child_thread_id"])
                owner._check_completed()
        elif t == "parked":
            key = _addr_key(d.get("address"))
            if key is None:
                continue
            holder = r
            if cur is None and key[0] == "child" and key[1] in child_owner:
                holder = child_owner[key[1]]
            if holder is not None:
                holder.parks[key] = str(d.get("reason"))
        elif t == "resumed":
            key = _addr_key(d.get("address"))
            for cand in reversed(runs):
                if key in cand.parks:
                    del cand.parks[key]
                    cand._check_completed()
                    break
        elif t == "output_validated":
            if r is not None and d.get("outcome") == "accepted":
                r.accepted = (True, d.get("value"))
        elif t == "budget_exceeded":
            if r is not None:
                r.budget = d
        elif t == "handoff":
            if r is not None and isinstance(d.get("to_thread_id"), str):
                r.handoff_to = d["to_thread_id"]
        elif t == "cancelled":
            if r is not None and not r.turn_open and r.status is None:
                r.status = "cancelled"
        elif t == "turn_completed":
            if cur is None:
                continue
            cur.turn_open = False
            reason = d.get("reason")
            if cur.status is None:
                if reason == "end_turn":
                    cur.has_output = cur.last_response is not None
                    cur._check_completed()
                else:
                    cur.status = _TERMINAL_STATUS.get(str(reason), "failed")
                    cur.reason = str(reason)
                    code = d.get("code")
                    cur.code = code if isinstance(code, str) else None
                    if cur.code is None and reason == "error" and missed:
                        cur.code = "unmatched_external_op"
            cur = None
    return runs


def run(events: Iterable[Event], *, now: int | None = None) -> JsonObj | None:
    """The log's last run (from its last ``user_input``): ``{status, output_event_id}``.

    ``status`` ∈ running|parked|completed|failed|cancelled|budget_exhausted|handed_off;
    ``output_event_id`` is the output response's event_id when completed, else None. ``None``
    when the log has no ``user_input``. ``now`` is accepted for a uniform signature; run
    completion never reads time.
    """
    del now
    runs = track_runs(events)
    if not runs:
        return None
    r = runs[-1]
    status = r.current_status()
    out_id = r.output_event.get("event_id") if status == "completed" and r.output_event else None
    return {"status": status, "output_event_id": out_id}
