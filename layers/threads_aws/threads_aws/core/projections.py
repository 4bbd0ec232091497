"""Named projections of a resolved chain (conformance README "Projections"; semantics §4, §8).

Every function here is pure: it takes the resolved chain as a sequence of parsed event objects
(envelope keys ``seq, event_id, type, epoch, actor, time, data, ...``; no header or head lines),
oldest first, and derives its value in one pass. Nothing is stored (semantics §8 "Derived, never
stored"). Rules only ever match known event types, so unknown non-critical events are skipped.

Public API::

    cost(events) -> dict | None
    cache_breaks(events) -> list[dict] | None
    compaction(events) -> {"consecutive_failures": int, "breaker_open": bool}
    todos(events) -> list
    children(events) -> list[{"child_thread_id", "status"}]
    pending_wakes(events) -> list[{"branch_id", "child_thread_id"}]
    team_tasks(events) -> list[{"task_id", "status", "owner"?}]
    mode(events) -> str
    model(events) -> {"provider", "name"} | None
    output(events) -> {"outcome", "value"?}
    run(events, *, now=None) -> {"status", "output_event_id"} | None
    run_outcome(events, run_id, *, thread_id, branch_id) -> dict | None
    all_projections(events, now=None) -> dict
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from .budgets import Attempt, not_billed, response_cost
from .fold import epoch_settings

Event = Mapping[str, Any]
JsonObj = dict[str, Any]

MAX_SAFE_INT = 2**53 - 1

RESPONSE_TYPES = frozenset({"model_response", "model_response_recovered"})
CACHE_BREAK_CAUSES = frozenset({"settings_changed", "compacted", "context_edited", "tools_changed"})
PROJECTION_KEYS = (
    "cost",
    "cache_breaks",
    "compaction",
    "todos",
    "children",
    "run",
    "pending_wakes",
    "team_tasks",
    "mode",
    "model",
    "output",
)

# turn_completed reasons that are RunErrorCodes as they stand.
_REASON_ERROR_CODES = frozenset(
    {
        "model_unavailable",
        "context_exhausted",
        "max_output",
        "max_turns",
        "output_invalid",
        "input_denied",
        "stop_hook_limit",
    }
)
_TERMINAL_STATUS = {"cancelled": "cancelled", "budget_exhausted": "budget_exhausted", "handoff": "handed_off"}


def _data(ev: Event) -> Mapping[str, Any]:
    d = ev.get("data")
    return d if isinstance(d, Mapping) else {}


def _is_int(v: object) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


# --------------------------------------------------------------------------------------------
# Settings epochs
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class SettingsEpoch:
    """The pinned policy and the settings epoch current at a point of the chain.

    Feed every event to :meth:`observe` in order; it returns True for ``thread_started`` and
    ``settings_changed`` (the events that start an epoch).
    """

    policy: Mapping[str, Any] | None = None
    model: Mapping[str, Any] | None = None
    model_params: Mapping[str, Any] = field(default_factory=dict)
    _models: dict[tuple[Any, Any], Mapping[str, Any]] = field(default_factory=dict)

    def observe(self, ev: Event) -> bool:
        t = ev.get("type")
        if t == "thread_started":
            d = _data(ev)
            pol = d.get("policy")
            self.policy = pol if isinstance(pol, Mapping) else None
            self._models = {}
            if self.policy is not None:
                for m in self.policy.get("models") or ():
                    if isinstance(m, Mapping):
                        self._models.setdefault((m.get("provider"), m.get("name")), m)
            self._set(epoch_settings(ev) or {})
            return True
        if t == "settings_changed":
            s = epoch_settings(ev)
            if s is not None:
                self._set(s)
            return True
        return False

    def _set(self, s: Mapping[str, Any]) -> None:
        m = s.get("model")
        self.model = m if isinstance(m, Mapping) else None
        p = s.get("model_params")
        self.model_params = p if isinstance(p, Mapping) else {}

    def model_entry(self) -> Mapping[str, Any] | None:
        """The ``policy.models[]`` entry of the current epoch's model, if listed."""
        if self.model is None:
            return None
        return self._models.get((self.model.get("provider"), self.model.get("name")))


def settings_at(events: Iterable[Event]) -> SettingsEpoch:
    """The settings epoch after the given events."""
    st = SettingsEpoch()
    for ev in events:
        st.observe(ev)
    return st


def _policy_section(policy: Mapping[str, Any] | None, name: str) -> Mapping[str, Any] | None:
    if policy is None:
        return None
    s = policy.get(name)
    return s if isinstance(s, Mapping) else None


# --------------------------------------------------------------------------------------------
# cost
# --------------------------------------------------------------------------------------------


def cost(events: Iterable[Event]) -> JsonObj | None:
    """Cost of every model_request on the chain, one disposition each, priced by
    `core.budgets` (the same functions the worker's budget reservations use; a pinned
    non-positive max_tokens is no output bound, so such an attempt without a response leaves
    the cost unbounded).

    Returns ``{currency, known_nanos, upper_bound_nanos, complete, bounded}``; ``None`` when
    ``policy.currency`` or ``policy.models`` is absent; ``{"error": "cost_overflow"}`` when either
    amount passes 2^53−1 nanos.
    """
    st = SettingsEpoch()
    attempts: dict[str, Attempt] = {}
    answers: dict[str, Event] = {}
    for ev in events:
        t = ev.get("type")
        if st.observe(ev):
            continue
        if t == "model_request":
            ib = _data(ev).get("input_bound_tokens")
            attempts[ev["event_id"]] = Attempt(st.model_entry(), st.model_params, ib if _is_int(ib) else None)
        elif t in RESPONSE_TYPES or t == "model_attempt_abandoned":
            rid = _data(ev).get("request_event_id")
            if isinstance(rid, str):
                answers.setdefault(rid, ev)
    policy = st.policy
    if policy is None or "currency" not in policy or "models" not in policy:
        return None
    known = 0
    upper = 0
    complete = True
    bounded = True
    for rid, att in attempts.items():
        ans = answers.get(rid)
        if ans is not None and ans.get("type") == "model_attempt_abandoned":
            if not_billed(ans):
                continue
            ans = None
        price = att.price
        if price is None:
            # An unlisted or unpriced model: nothing about this attempt can be priced.
            complete = False
            bounded = False
            continue
        need_bound = True
        if ans is not None:
            usage = _data(ans).get("usage")
            k, unknown = response_cost(usage if isinstance(usage, Mapping) else {}, price)
            known += k
            upper += k
            need_bound = unknown
        if need_bound:
            complete = False
            b = att.cost_bound()
            if b is None:
                bounded = False
            else:
                upper += b
    if known > MAX_SAFE_INT or upper > MAX_SAFE_INT:
        return {"error": "cost_overflow"}
    return {
        "currency": policy["currency"],
        "known_nanos": known,
        "upper_bound_nanos": upper,
        "complete": complete,
        "bounded": bounded,
    }


# --------------------------------------------------------------------------------------------
# cache_breaks, compaction
# --------------------------------------------------------------------------------------------


def cache_breaks(events: Iterable[Event]) -> list[JsonObj] | None:
    """``{request_event_id, likely_cause}`` per turn response whose cache reads dropped.

    A drop is ``20·now < 19·prev`` and ``prev − now ≥ 2000`` against the previous turn response.
    ``likely_cause`` is the type of the first settings_changed / compacted / context_edited /
    tools_changed between the two responses, else ``ttl_expired`` when the responses' ``time``
    gap exceeds ``policy.context.cache_ttl_ms``, else ``unknown``. ``None`` without
    ``policy.context``.
    """
    policy: Mapping[str, Any] | None = None
    purposes: dict[Any, Any] = {}
    prev_reads: int | None = None
    prev_time: int | None = None
    seen_prev = False
    first_cause: str | None = None
    out: list[JsonObj] = []
    for ev in events:
        t = ev.get("type")
        d = _data(ev)
        if t == "thread_started":
            p = d.get("policy")
            policy = p if isinstance(p, Mapping) else None
        if t in CACHE_BREAK_CAUSES:
            if first_cause is None:
                first_cause = str(t)
        elif t == "model_request":
            purposes[ev["event_id"]] = d.get("purpose", "turn")
        elif t in RESPONSE_TYPES:
            rid = d.get("request_event_id")
            if purposes.get(rid, "turn") != "turn":
                continue  # a compaction side response is not a turn response
            usage = d.get("usage")
            reads = usage.get("cache_read_tokens") if isinstance(usage, Mapping) else None
            now_reads = reads if _is_int(reads) else None
            t_now = ev.get("time")
            if seen_prev and prev_reads is not None and now_reads is not None:
                if 20 * now_reads < 19 * prev_reads and prev_reads - now_reads >= 2000:
                    cause = first_cause
                    if cause is None:
                        ctx = _policy_section(policy, "context") or {}
                        ttl = ctx.get("cache_ttl_ms")
                        if (
                            _is_int(ttl)
                            and _is_int(t_now)
                            and prev_time is not None
                            and t_now - prev_time > ttl
                        ):
                            cause = "ttl_expired"
                        else:
                            cause = "unknown"
                    out.append({"request_event_id": rid, "likely_cause": cause})
            seen_prev = True
            prev_reads = now_reads
            prev_time = t_now if _is_int(t_now) else None
            first_cause = None
    if _policy_section(policy, "context") is None:
        return None
    return out


def compaction(events: Iterable[Event]) -> JsonObj:
    """``compaction_failed`` events since the last ``compacted``, and whether they reach
    ``policy.context.compact.max_failures`` (never open when that is absent)."""
    policy: Mapping[str, Any] | None = None
    failures = 0
    for ev in events:
        t = ev.get("type")
        if t == "thread_started":
            p = _data(ev).get("policy")
            policy = p if isinstance(p, Mapping) else None
        elif t == "compacted":
            failures = 0
        elif t == "compaction_failed":
            failures += 1
    compact = _policy_section(_policy_section(policy, "context"), "compact") or {}
    limit = compact.get("max_failures")
    return {"consecutive_failures": failures, "breaker_open": _is_int(limit) and failures >= limit}


# --------------------------------------------------------------------------------------------
# todos, children, pending_wakes, team_tasks, mode, model, output
# --------------------------------------------------------------------------------------------


def todos(events: Iterable[Event]) -> list[Any]:
    """The latest ``todos_updated.todos``, else ``[]``."""
    latest: Any = []
    for ev in events:
        if ev.get("type") == "todos_updated":
            latest = _data(ev).get("todos", [])
    return copy.deepcopy(list(latest))


def children(events: Iterable[Event]) -> list[JsonObj]:
    """``{child_thread_id, status}`` per ``agent_spawned`` in order; ``running`` until its
    ``agent_finished``, then that event's status."""
    out: dict[Any, JsonObj] = {}
    for ev in events:
        t = ev.get("type")
        if t == "agent_spawned":
            cid = _data(ev).get("child_thread_id")
            if isinstance(cid, str) and cid not in out:
                out[cid] = {"child_thread_id": cid, "status": "running"}
        elif t == "agent_finished":
            d = _data(ev)
            row = out.get(d.get("child_thread_id"))
            if row is not None and isinstance(d.get("status"), str):
                row["status"] = d["status"]
    return list(out.values())


def pending_wakes(events: Iterable[Event]) -> list[JsonObj]:
    """``{branch_id, child_thread_id}`` per background child with no ``agent_finished`` and no
    ``parked{kind: child}`` for it, sorted by (branch_id, child_thread_id). ``branch_id`` is the
    envelope branch of the ``agent_spawned`` event."""
    rows: dict[str, str] = {}
    dropped: set[Any] = set()
    for ev in events:
        t = ev.get("type")
        d = _data(ev)
        if t == "agent_spawned":
            cid = d.get("child_thread_id")
            if d.get("mode") == "background" and isinstance(cid, str):
                rows.setdefault(cid, str(ev.get("branch_id")))
        elif t == "agent_finished":
            dropped.add(d.get("child_thread_id"))
        elif t == "parked":
            addr = d.get("address")
            if isinstance(addr, Mapping) and addr.get("kind") == "child":
                dropped.add(addr.get("id"))
    live = [(b, c) for c, b in rows.items() if c not in dropped]
    return [{"branch_id": b, "child_thread_id": c} for b, c in sorted(live)]


def team_tasks(events: Iterable[Event]) -> list[JsonObj]:
    """``{task_id, status, owner?}`` per created task, in creation order. A claim sets
    ``claimed`` and the owner; ``completed``/``failed`` keep the owner; ``released`` returns the
    task to ``open`` without an owner."""
    tasks: dict[Any, JsonObj] = {}
    for ev in events:
        t = ev.get("type")
        d = _data(ev)
        tid = d.get("task_id")
        if t == "team_task_created":
            if isinstance(tid, str) and tid not in tasks:
                tasks[tid] = {"task_id": tid, "status": "open"}
        elif t == "team_task_claimed":
            row = tasks.get(tid)
            if row is not None:
                row["status"] = "claimed"
                row["owner"] = d.get("member")
        elif t == "team_task_updated":
            row = tasks.get(tid)
            if row is None:
                continue
            status = d.get("status")
            if status == "released":
                row["status"] = "open"
                row.pop("owner", None)
            elif status in ("completed", "failed"):
                row["status"] = status
    return list(tasks.values())


def mode(events: Iterable[Event]) -> str:
    """``policy.permissions.mode`` (``default`` when absent), then the latest ``mode_changed.to``."""
    current = "default"
    for ev in events:
        t = ev.get("type")
        if t == "thread_started":
            pol = _data(ev).get("policy")
            p = _policy_section(pol if isinstance(pol, Mapping) else None, "permissions")
            if p is not None and isinstance(p.get("mode"), str):
                current = p["mode"]
        elif t == "mode_changed":
            to = _data(ev).get("to")
            if isinstance(to, str):
                current = to
    return current


def model(events: Iterable[Event]) -> JsonObj | None:
    """The ModelRef of the latest settings epoch; ``None`` before ``thread_started``."""
    m = settings_at(events).model
    return {"provider": m.get("provider"), "name": m.get("name")} if m is not None else None


def output(events: Iterable[Event]) -> JsonObj:
    """The latest ``output_validated`` as ``{outcome, value?}``, else ``{outcome: "none"}``."""
    latest: Mapping[str, Any] | None = None
    for ev in events:
        if ev.get("type") == "output_validated":
            latest = _data(ev)
    if latest is None:
        return {"outcome": "none"}
    res: JsonObj = {"outcome": latest.get("outcome")}
    if "value" in latest:
        res["value"] = copy.deepcopy(latest["value"])
    return res


# --------------------------------------------------------------------------------------------
# runs
# --------------------------------------------------------------------------------------------


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
        d = _data(ev)
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


def _final_text(resp: Event | None) -> str:
    if resp is None:
        return ""
    parts = _data(resp).get("content") or []
    return "".join(
        p["text"]
        for p in parts
        if isinstance(p, Mapping) and p.get("type") == "text" and isinstance(p.get("text"), str)
    )


def _error_code(reason: str | None, code: str | None) -> str:
    if reason in _REASON_ERROR_CODES:
        return str(reason)
    if reason == "error" and code is not None:
        return code
    return "model_error"  # error without code, interrupted


def outcome_of(r: RunTrack, *, thread_id: str, branch_id: str) -> JsonObj | None:
    """The HTTP ``RunOutcome`` of a tracked run, or None while it is running."""
    base: JsonObj = {"thread_id": thread_id, "branch_id": branch_id}
    status = r.current_status()
    if status == "running":
        return None
    base["status"] = status
    if status == "completed":
        has_value, value = r.output_accepted
        base["output"] = copy.deepcopy(value) if has_value else _final_text(r.output_event)
    elif status == "parked":
        base["reason"] = next(iter(r.parks.values()))  # the oldest open park's reason
        base["pending"] = [{"kind": k, "id": i} for k, i in r.parks]
    elif status == "failed":
        code = _error_code(r.reason, r.code)
        msg = f"turn ended: {r.reason}" + (f" ({r.code})" if r.code else "")
        base["error"] = {"code": code, "message": msg}
    elif status == "budget_exhausted":
        base["budget"] = copy.deepcopy(dict(r.budget)) if r.budget is not None else {}
    elif status == "handed_off":
        base["to_thread_id"] = r.handoff_to
    return base


def run_outcome(events: Iterable[Event], run_id: str, *, thread_id: str, branch_id: str) -> JsonObj | None:
    """The HTTP ``RunOutcome`` for the run whose ``user_input`` event_id is ``run_id``.

    Returns None while that run is still running (not settled and nothing parked): there is no
    outcome yet. Raises ``KeyError`` when no ``user_input`` has that event_id.
    """
    for r in track_runs(events):
        if r.run_id == run_id:
            return outcome_of(r, thread_id=thread_id, branch_id=branch_id)
    raise KeyError(run_id)


# --------------------------------------------------------------------------------------------
# all
# --------------------------------------------------------------------------------------------


def all_projections(events: Sequence[Event], now: int | None = None) -> JsonObj:
    """Every named projection, keyed as in the conformance README."""
    evs = events if isinstance(events, Sequence) else list(events)
    return {
        "cost": cost(evs),
        "cache_breaks": cache_breaks(evs),
        "compaction": compaction(evs),
        "todos": todos(evs),
        "children": children(evs),
        "run": run(evs, now=now),
        "pending_wakes": pending_wakes(evs),
        "team_tasks": team_tasks(evs),
        "mode": mode(evs),
        "model": model(evs),
        "output": output(evs),
    }
