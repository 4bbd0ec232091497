"""Budgets as data (semantics §Budgets, §8 "Usage and cost"): each limit's per-attempt bound, the
amount a recorded answer settles an attempt at, and which limits a policy cannot bound.

One set of functions prices an attempt for both readers of it: the `cost` projection
(`core.projections.cost`) and the worker's reservations (`engine.budget_plan`), so a budget can
never disagree with the cost the API reports.

Bounds (a limit needs one per attempt; zero or a negative number is never a bound):
- output tokens: the epoch's `model_params.max_tokens` when pinned (a non-positive value is no
  bound), else the model's `policy.models[].max_output_tokens`;
- input tokens: the request's `input_bound_tokens`, else the model's `context_window` when its
  `input_billing_bound` is `context_window`;
- cost: input bound × the highest input-side price + output bound × the output price;
- model requests: 1;
- turns: 1, held by a turn's first model_request (later requests of the turn need no more);
- wall time: not consumed per attempt: the elapsed time since the budget's start is checked
  before every request (`engine.budget_plan`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

MAX_SAFE_INT = 2**53 - 1

LIMITS = (
    "max_cost_nanos",
    "max_input_tokens",
    "max_output_tokens",
    "max_model_requests",
    "max_turns",
    "max_wall_ms",
)
#: Limits whose attempts hold ledger rows (wall time is elapsed time: nothing to reserve).
LEDGER_LIMITS = LIMITS[:5]
#: Limits whose per-attempt amount is exact at reservation (settled at once).
EXACT_LIMITS = frozenset({"max_model_requests", "max_turns"})
#: Limits a policy can leave without a bound (setup's budget_unenforceable).
BOUNDED_BY_POLICY = frozenset({"max_cost_nanos", "max_input_tokens", "max_output_tokens"})


def is_int(v: object) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def _pos(v: object) -> int | None:
    return v if is_int(v) and v > 0 else None


# --------------------------------------------------------------------------------- bounds


@dataclass(frozen=True, slots=True)
class Attempt:
    """What bounds one model attempt: its epoch's `policy.models[]` entry (None if unlisted),
    its epoch's model_params and the request's own `input_bound_tokens`."""

    entry: Mapping[str, Any] | None
    model_params: Mapping[str, Any]
    input_bound_tokens: int | None = None

    @property
    def price(self) -> Mapping[str, Any] | None:
        p = self.entry.get("price") if self.entry is not None else None
        return p if isinstance(p, Mapping) else None

    def output_bound(self) -> int | None:
        if "max_tokens" in self.model_params:
            return _pos(self.model_params["max_tokens"])  # pinned: 0 or less is no bound
        return _pos((self.entry or {}).get("max_output_tokens"))

    def input_bound(self) -> int | None:
        if self.input_bound_tokens is not None:
            return _pos(self.input_bound_tokens)
        entry = self.entry or {}
        if entry.get("input_billing_bound") == "context_window":
            return _pos(entry.get("context_window"))
        return None

    def cost_bound(self) -> int | None:
        """input bound × the highest input-side price + output bound × the output price."""
        price = self.price
        in_tokens, out_tokens = self.input_bound(), self.output_bound()
        if price is None or in_tokens is None or out_tokens is None:
            return None
        in_prices = [v for k in ("input", "cache_read", "cache_write") if is_int(v := price.get(k))]
        out_price = price.get("output")
        if not in_prices or not is_int(out_price):
            return None
        return in_tokens * max(in_prices) + out_tokens * out_price

    def bound(self, limit: str, *, first_of_turn: bool) -> int | None:
        """The amount to reserve for `limit` (None: no bound; 0: nothing to reserve, only for
        max_turns after the turn's first request)."""
        if limit == "max_model_requests":
            return 1
        if limit == "max_turns":
            return 1 if first_of_turn else 0
        if limit == "max_output_tokens":
            return self.output_bound()
        if limit == "max_input_tokens":
            return self.input_bound()
        if limit == "max_cost_nanos":
            return self.cost_bound()
        raise ValueError(f"{limit} has no per-attempt bound")


# ------------------------------------------------------------------------------ settlement


def response_cost(usage: Mapping[str, Any], price: Mapping[str, Any]) -> tuple[int, bool]:
    """(known nanos, any field unknown). Cache tokens are not part of input_tokens (Usage);
    a cache field without its own price is billed at the input price."""
    in_price = price.get("input", 0)
    prices = {
        "input_tokens": in_price,
        "output_tokens": price.get("output", 0),
        "cache_read_tokens": price.get("cache_read", in_price),
        "cache_write_tokens": price.get("cache_write", in_price),
    }
    known = 0
    unknown = False
    for key, unit in prices.items():
        if key not in usage:
            # input/output are required (absence = unknown); a cache field is absent when the
            # adapter has no such billing category.
            unknown = unknown or key in ("input_tokens", "output_tokens")
            continue
        n = usage[key]
        if is_int(n) and is_int(unit):
            known += n * unit
        else:
            unknown = True
    return known, unknown


def not_billed(answer: Mapping[str, Any]) -> bool:
    """An abandoned attempt proven not billed (`not_sent` or `billing: not_billed`)."""
    d = answer.get("data")
    if answer.get("type") != "model_attempt_abandoned" or not isinstance(d, Mapping):
        return False
    return d.get("provider_outcome") == "not_sent" or d.get("billing") == "not_billed"


def settled(limit: str, att: Attempt, answer: Mapping[str, Any] | None, bound: int) -> int:
    """What an attempt's answer settles its `limit` row at: the actual usage where the answer
    reports it, nothing where it was proven not billed, the bound where usage is unknown (never
    summed as 0). Requests and turns are exact: the bound."""
    if limit in EXACT_LIMITS or answer is None:
        return bound
    if not_billed(answer):
        return 0
    if answer.get("type") == "model_attempt_abandoned":
        return bound
    data = answer.get("data")
    usage = data.get("usage") if isinstance(data, Mapping) else None
    if not isinstance(usage, Mapping):
        return bound
    if limit == "max_input_tokens":
        n = usage.get("input_tokens")
        return n if is_int(n) and n >= 0 else bound
    if limit == "max_output_tokens":
        n = usage.get("output_tokens")
        return n if is_int(n) and n >= 0 else bound
    if limit == "max_cost_nanos":
        price = att.price
        if price is None:
            return bound
        known, unknown = response_cost(usage, price)
        return known + bound if unknown else known
    raise ValueError(f"{limit} is not settled per attempt")


# ----------------------------------------------------------------------------------- setup


def unenforceable(
    budget: Mapping[str, Any],
    policy: Mapping[str, Any],
    settings: Iterable[Mapping[str, Any]],
) -> list[str]:
    """The limits of `budget` some model the thread may use cannot bound per attempt (empty when
    `policy.on_unknown_usage` is `stop`: then a missing bound stops the run instead).

    `settings`: every ModelSettings the thread may run under (the current epoch and the
    fallbacks). A model missing from `policy.models` has no window, no output cap and no price.
    """
    if policy.get("on_unknown_usage") == "stop":
        return []
    models = [m for m in policy.get("models") or () if isinstance(m, Mapping)]
    entries = {(m.get("provider"), m.get("name")): m for m in models}
    bad: list[str] = []
    for limit in LIMITS:
        if limit not in budget or limit not in BOUNDED_BY_POLICY:
            continue
        for s in settings:
            model = s.get("model") or {}
            params = s.get("model_params")
            att = Attempt(entries.get((model.get("provider"), model.get("name"))), params or {})
            if att.bound(limit, first_of_turn=True) is None:
                bad.append(limit)
                break
    return bad
