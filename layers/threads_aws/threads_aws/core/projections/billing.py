"""The ``cost`` projection: every model_request's price, one disposition each.

Prices come from `core.budgets`, the same functions the worker's budget reservations use, so a
budget can never disagree with the cost the API reports. Each request is
priced by the model of its own settings epoch (`epochs.SettingsEpoch`), and its answer is the
first response or abandonment naming it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..budgets import MAX_SAFE_INT, Attempt, not_billed, response_cost
from ._chain import RESPONSE_TYPES, Event, JsonObj, data_of, is_int
from .epochs import SettingsEpoch


def cost(events: Iterable[Event]) -> JsonObj | None:
    """Cost of every model_request on the chain, one disposition each, priced by
    `core.budgets` (a pinned non-positive max_tokens is no output bound, so such an attempt
    without a response leaves the cost unbounded).

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
            ib = data_of(ev).get("input_bound_tokens")
            attempts[ev["event_id"]] = Attempt(st.model_entry(), st.model_params, ib if is_int(ib) else None)
        elif t in RESPONSE_TYPES or t == "model_attempt_abandoned":
            rid = data_of(ev).get("request_event_id")
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
            usage = data_of(ans).get("usage")
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
