"""Which budgets cover a model attempt, what it reserves of each, and what its answer settles
(semantics §Budgets). Everything here derives from the logs alone (the branch's fold and its
ancestors'), so the reservation and the settlement compute the same rows without a stored plan.

Covering budgets of a request on a branch: its thread's `policy.budget` (scope `thread`), its
run's `user_input.budget` (scope `run`: the turn's opener), and each ancestor's, following
`thread_started.parent` up (subagent and handoff alike: a handoff target counts the source's
budgets as ancestors): the ancestor thread's `policy.budget` and the budget of the ancestor's run
that holds the parent event (scope `ancestor`, `owner_thread_id` = that thread). Ancestry never
changes once written, so it is cached per process.

Ordering and crash recovery:
- the reservation is the set of companions of the `model_request` append (`store.budget_ledger`):
  one transaction holds the request line, the head update, each (budget, limit) row and each
  running total's conditional increment. The request exists iff its reservation does: there is
  no window between them to recover, and a lost head race (`seq_conflict`) rolls both back;
- the settlement is the set of companions of the append holding the attempt's answer
  (`model_response`, `model_response_recovered`, `model_attempt_abandoned`: whoever appends it,
  the live step, recovery or a cancel), so a total always equals the sum of the log's attempts,
  each at its actual usage once answered and at its bound until then. An answer whose rows are
  missing (a request older than its budget's ledger) commits without them (`settle_failed`):
  the ledger stays conservative, never blocks the log.
"""

from __future__ import annotations

import bisect
import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.budgets import EXACT_LIMITS, LEDGER_LIMITS, LIMITS, MAX_SAFE_INT, Attempt, settled
from ..core.fold import Fold
from ..core.lines import StoredLine
from ..store.budget_ledger import used_of
from ..store.protocol import BudgetLedgerStore
from ..store.records import Companion, Item, NotFound
from ..writer import Companions, View
from .context import EngineContext

log = logging.getLogger("threads_aws.engine")

ANSWERS = frozenset({"model_response", "model_response_recovered", "model_attempt_abandoned"})
MAX_DEPTH = 32  # ancestors followed (a deeper tree is a loop or a bug)
ANCESTRY_CACHE = 1024
SETTLE_TAG = "settle"


@dataclass(frozen=True, slots=True)
class Covering:
    """One budget covering the branch's requests."""

    scope: str  # thread | run | ancestor
    budget_id: str
    budget: Mapping[str, Any]
    owner_thread_id: str | None  # iff ancestor
    start_ms: int  # when its wall time started: its thread_started or its run's user_input


@dataclass(frozen=True, slots=True)
class Hold:
    """What one attempt reserves of one (budget, limit)."""

    covering: Covering
    limit: str
    amount: int


@dataclass(frozen=True, slots=True)
class Refusal:
    """A reservation that cannot be made: `budget_exceeded` data."""

    data: dict[str, Any]


# ------------------------------------------------------------------------------- covering


def _started_ms(f: Fold) -> int:
    first = f.events[0] if f.events else None
    return int(first["time"]) if first is not None and first["type"] == "thread_started" else 0


def _own(f: Fold) -> list[Covering]:
    out: list[Covering] = []
    thread_id = str(f.thread_id)
    tb = f.policy.get("budget")
    if isinstance(tb, Mapping) and tb:
        out.append(Covering("thread", f"thread:{thread_id}", tb, None, _started_ms(f)))
    opener = f.turn.opener
    rb = opener["data"].get("budget") if opener is not None else None
    if opener is not None and isinstance(rb, Mapping) and rb:
        out.append(Covering("run", f"run:{thread_id}:{opener['event_id']}", rb, None, int(opener["time"])))
    return out


_ancestry: OrderedDict[tuple[str, str], tuple[Covering, ...]] = OrderedDict()
_ancestry_lock = threading.Lock()


def _ancestors(ctx: EngineContext, parent: Mapping[str, Any], depth: int = 0) -> tuple[Covering, ...]:
    key = (str(parent["branch_id"]), str(parent["event_id"]))
    with _ancestry_lock:
        hit = _ancestry.get(key)
    if hit is not None:
        return hit
    if depth >= MAX_DEPTH:
        raise ValueError(f"thread_started.parent chain deeper than {MAX_DEPTH}")
    try:
        f = ctx.writer.load(key[0]).fold
    except NotFound:
        log.warning("ancestor branch %s is gone: its budgets no longer cover its children", key[0])
        return ()
    seq = f.seq_of.get(key[1])
    if seq is None:  # the child was started from an event its parent doesn't hold (yet)
        log.warning("parent event %s is not on branch %s", key[1], key[0])
        return ()
    thread_id = str(f.thread_id)
    out: list[Covering] = []
    tb = f.policy.get("budget")
    if isinstance(tb, Mapping) and tb:
        out.append(Covering("ancestor", f"thread:{thread_id}", tb, thread_id, _started_ms(f)))
    i = bisect.bisect_right(f.inputs, seq)
    if i:
        opener = f.events[f.inputs[i - 1] - 1]
        rb = opener["data"].get("budget")
        if isinstance(rb, Mapping) and rb:
            bid = f"run:{thread_id}:{opener['event_id']}"
            out.append(Covering("ancestor", bid, rb, thread_id, int(opener["time"])))
    grand = (f.started or {}).get("parent")
    if isinstance(grand, Mapping):
        out += _ancestors(ctx, grand, depth + 1)
    found = tuple(out)
    with _ancestry_lock:
        _ancestry[key] = found
        while len(_ancestry) > ANCESTRY_CACHE:
            _ancestry.popitem(last=False)
    return found


def covering(ctx: EngineContext, view: View) -> list[Covering]:
    """Every budget covering the branch's next request, own first, each budget once."""
    f = view.fold
    out = _own(f)
    parent = (f.started or {}).get("parent")
    if isinstance(parent, Mapping):
        out += _ancestors(ctx, parent)
    seen: set[str] = set()
    unique = []
    for c in out:
        if c.budget_id not in seen:
            seen.add(c.budget_id)
            unique.append(c)
    return unique


def attempt_of(f: Fold, request: Mapping[str, Any] | None = None) -> Attempt:
    """The bounds of an attempt under the current settings epoch (rule 18: the epoch cannot
    change while an attempt awaits its answer, so it is the request's epoch until answered)."""
    settings = f.settings or {}
    model = settings.get("model") or {}
    entry = next(
        (
            m
            for m in f.policy.get("models") or ()
            if m.get("provider") == model.get("provider") and m.get("name") == model.get("name")
        ),
        None,
    )
    ib = (request or {}).get("data", {}).get("input_bound_tokens")
    return Attempt(entry, settings.get("model_params") or {}, ib if isinstance(ib, int) else None)


# ---------------------------------------------------------------------------- reservation


def _exceeded(c: Covering, limit: str, value: int, observed: int, upper: bool) -> Refusal:
    data: dict[str, Any] = {
        "limit": limit,
        "limit_value": value,
        "observed": min(observed, MAX_SAFE_INT),
        "observed_is_upper_bound": upper or observed > MAX_SAFE_INT,
        "scope": c.scope,
    }
    if c.owner_thread_id is not None:
        data["owner_thread_id"] = c.owner_thread_id
    return Refusal(data)


def plan(ctx: EngineContext, view: View, now: int) -> list[Hold] | Refusal:
    """What the branch's next request reserves, or why it may not be made. A limit is never
    skipped: a missing bound (or one past 2^53-1) counts as exceeding, and wall time is checked
    as elapsed time since the budget's start."""
    f = view.fold
    covers = covering(ctx, view)
    if not covers:
        return []
    att = attempt_of(f)
    first = not f.turn.first_request_seq  # the turn's first request holds its unit
    ledger = ctx.stores.budget_ledger
    holds: list[Hold] = []
    for c in covers:
        for limit in LIMITS:
            value = c.budget.get(limit)
            if not isinstance(value, int):
                continue
            if limit == "max_wall_ms":
                elapsed = max(0, now - c.start_ms)
                if elapsed >= value:
                    return _exceeded(c, limit, value, elapsed, False)
                continue
            bound = att.bound(limit, first_of_turn=first)
            if bound == 0:
                continue
            if bound is None or bound > MAX_SAFE_INT:
                return _exceeded(c, limit, value, ledger.used(c.budget_id, limit), False)
            if bound > value:
                used = ledger.used(c.budget_id, limit)
                return _exceeded(c, limit, value, used + bound, limit not in EXACT_LIMITS)
            holds.append(Hold(c, limit, bound))
    return holds


def reservations(
    ledger: BudgetLedgerStore, holds: Sequence[Hold], attempt_key: str
) -> tuple[list[Companion], dict[str, Hold]]:
    """The companions reserving `holds` for the attempt, and the hold each total's tag names."""
    companions: list[Companion] = []
    tags: dict[str, Hold] = {}
    for i, h in enumerate(holds):
        tag = f"budget:{i}"
        tags[tag] = h
        companions += ledger.reserve(
            tag,
            h.covering.budget_id,
            h.limit,
            attempt_key,
            h.amount,
            int(h.covering.budget[h.limit]),
            exact=h.limit in EXACT_LIMITS,
        )
    return companions, tags


def refused(hold: Hold, stored_total: Item | None) -> Refusal:
    """The refusal a failed total's condition means: its stored `used` plus this attempt."""
    c = hold.covering
    value = int(c.budget[hold.limit])
    observed = used_of(stored_total) + hold.amount
    return _exceeded(c, hold.limit, value, observed, hold.limit not in EXACT_LIMITS)


# ----------------------------------------------------------------------------- settlement


def settlement(ctx: EngineContext, view: View, lines: Sequence[StoredLine]) -> list[Companion]:
    """Companions settling the rows of every attempt answered in `lines` (the view's fold has
    the lines already). Exact limits were settled at reservation."""
    answers = [ln.event for ln in lines if ln.type in ANSWERS and ln.event is not None]
    if not answers:
        return []
    f = view.fold
    covers: list[Covering] | None = None
    out: list[Companion] = []
    for n, ans in enumerate(answers):
        seq = f.seq_of.get(ans["data"]["request_event_id"])
        req = f.events[seq - 1] if seq is not None else None
        if req is None or req["type"] != "model_request" or req["branch_id"] != view.branch_id:
            continue
        if covers is None:
            covers = covering(ctx, view)
        att = attempt_of(f, req)
        first = f.turn.first_request_seq == seq
        key = f"{req['branch_id']}:{seq}"
        i = 0
        for c in covers:
            for limit in LEDGER_LIMITS:
                if limit in EXACT_LIMITS or not isinstance(c.budget.get(limit), int):
                    continue
                bound = att.bound(limit, first_of_turn=first)
                if not bound:
                    continue
                amount = settled(limit, att, ans, bound)
                tag = f"{SETTLE_TAG}:{n}:{i}"
                i += 1
                out += ctx.stores.budget_ledger.settle(tag, c.budget_id, limit, key, amount, amount - bound)
    return out


def with_settlement(ctx: EngineContext, companions: Companions | None) -> Companions:
    """`companions` plus the settlement of any answer among the appended lines."""

    def both(view: View, lines: list[StoredLine]) -> list[Companion]:
        own = list(companions(view, lines)) if companions is not None else []
        return own + settlement(ctx, view, lines)

    return both


def is_settlement(tag: str) -> bool:
    return tag.startswith(SETTLE_TAG + ":")
