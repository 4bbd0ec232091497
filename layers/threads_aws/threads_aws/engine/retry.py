"""What happens after a failed model attempt (semantics §4 "Retries, fallback, settings"): pure
decisions over the fold and the pinned `policy.retry`, nothing here touches a store.

A failure is decided once, when it happens, and the decision is appended with the attempt's
`model_attempt_abandoned` in one batch (so a crash can't split them):

- `Retry`: `retry_scheduled{request_event_id, delay_ms, not_before, basis}`; the step ends and
  the branch is woken at `not_before` (`store.step_timer`); the re-send is `attempt + 1`;
- `Fallback`: `settings_changed{reason: fallback, settings, cause_event_id: <the abandoned
  event>}` (actor host); the next request is attempt 1 of the new settings epoch;
- `End`: `turn_completed{reason, code?}`;
- `Resend`: nothing; request `attempt + 1` now (a crash re-send, a preempted attempt);
- `Defer`: nothing yet (prompt_too_long: compaction first; the next step decides).

An abandoned attempt with no decision after it (recovery's `abandoned{crash}`, or a log written
elsewhere) is decided when a step next finds it, from the log alone (`decide_recorded`).

Order of the checks (`decide`):
1. a `code` the adapter gave (content/continuation unsupported): end `error` with that code;
2. a reason that ends the turn whatever the budget (`TURN_ENDING`: prompt_too_long →
   context_exhausted), decided only once it is in the log (`Defer` at the failure): compaction
   (`engine.compaction`, run first by the model turn) compacts reactively when it can;
3. fallback, when one is left (`engine.fallback`) and the failure is not retryable, or this is
   failure number `fallback_after` of the current settings, or no retry fits the budget;
4. a retry, while `retries < max_retries` and the turn's waits plus this delay stay within
   `max_total_wait_ms`: the provider's retry-after capped by `max_retry_after_ms` (basis
   `retry_after`), else exponential backoff `base_delay_ms * 2^n` capped by `max_delay_ms`, with
   jitter in [delay/2, delay] derived from the request's event id (deterministic: a re-decision
   after a lost head race schedules the same wait);
5. otherwise `model_unavailable`.

A crashed attempt (`abandoned{crash}`, or unknown) is re-sent at once up to `crash_resends`
times since the latest response; past that it is a failure like the others (steps 3-5).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..config.retry_defaults import DEFAULTS  # re-exported: policy.retry's defaults
from ..core.canonical import sha256_hex
from ..core.fold import Fold
from . import fallback

#: Abandon reasons that end the turn, with the turn_completed reason, when compaction did not
#: take them (a reactive compaction of prompt_too_long comes first: `engine.compaction`).
TURN_ENDING: dict[str, str] = {"prompt_too_long": "context_exhausted"}

#: Reasons a re-send can get past, as `ModelError.retryable` defaults them (for attempts whose
#: exception is gone: the log records reason and outcome, not the adapter's verdict).
RETRYABLE_REASONS = frozenset({"rate_limited", "overloaded", "server_error", "timeout", "stream_broken"})
#: Not failures of the model: the attempt was preempted; request again at once.
PREEMPTED = frozenset({"steered", "cancelled"})
#: turn_completed.code values (the other adapter codes end the turn `error` without one).
TURN_CODES = frozenset({"content_unsupported", "continuation_unsupported", "transport_fence_unsupported"})


def turn_code(code: str | None) -> str | None:
    """The turn_completed.code for an adapter's refusal code (None: `error` without a code)."""
    return code if code in TURN_CODES else None


@dataclass(frozen=True)
class Failure:
    """One failed attempt: its `model_attempt_abandoned` data and the adapter's verdict."""

    data: dict[str, Any]
    retryable: bool
    retry_after_ms: int | None = None
    code: str | None = None

    @classmethod
    def recorded(cls, data: Mapping[str, Any]) -> Failure:
        """A failure known only from the log: retryable by its reason (a connect failure,
        `provider_error` not sent, too)."""
        reason, outcome = data.get("reason"), data.get("provider_outcome")
        retryable = reason in RETRYABLE_REASONS or (reason == "provider_error" and outcome == "not_sent")
        after = data.get("retry_after_ms")
        return cls(dict(data), retryable, after if isinstance(after, int) else None)


@dataclass(frozen=True)
class Retry:
    delay_ms: int
    not_before: int
    basis: str  # retry_after | backoff


@dataclass(frozen=True)
class Fallback:
    settings: dict[str, Any]


@dataclass(frozen=True)
class End:
    reason: str
    code: str | None = None


@dataclass(frozen=True)
class Resend:
    attempt: int


@dataclass(frozen=True)
class Defer:
    """Nothing appended after the failure now: the next step decides (compaction goes first)."""


@dataclass(frozen=True)
class Wait:
    """A retry is scheduled and not due: end the step; wake the branch at `not_before`."""

    not_before: int


Decision = Retry | Fallback | End | Resend | Defer


def policy(f: Fold) -> dict[str, Any]:
    """The thread's pinned policy.retry (a section is absent or complete), else DEFAULTS."""
    pinned = f.policy.get("retry")
    return dict(pinned) if isinstance(pinned, Mapping) else dict(DEFAULTS)


def backoff_ms(p: Mapping[str, Any], request_event_id: str, n: int) -> int:
    """The n-th backoff (n from 0): base * 2^n capped by max_delay_ms, jittered into
    [delay/2, delay] by sha256(request_event_id:n), so the same failure always waits the same."""
    cap = int(p["max_delay_ms"])
    delay = min(cap, int(p["base_delay_ms"]) << min(n, 40))
    frac = int(sha256_hex(f"{request_event_id}:{n}".encode())[:8], 16) / 0xFFFFFFFF
    return delay // 2 + int(frac * (delay - delay // 2))


def schedule(p: Mapping[str, Any], f: Fold, failure: Failure, now: int) -> Retry | None:
    """The wait before the next re-send, or None when the budget has none left."""
    turn = f.turn
    if turn.retries >= int(p["max_retries"]):
        return None
    if failure.retry_after_ms is not None:
        delay, basis = min(failure.retry_after_ms, int(p["max_retry_after_ms"])), "retry_after"
    else:
        delay, basis = backoff_ms(p, str(failure.data["request_event_id"]), turn.retries), "backoff"
    if turn.waited_ms + delay > int(p["max_total_wait_ms"]):
        return None
    return Retry(delay, now + delay, basis)


def decide(f: Fold, failure: Failure, now: int, *, recorded: bool = False) -> Decision:
    """The decision after `failure`. `f` is the fold before its abandoned event is appended
    (`recorded`: after, the event is in the log already and counted)."""
    p = policy(f)
    reason = failure.data.get("reason")
    if failure.code is not None:
        return End("error", turn_code(failure.code))
    if reason in TURN_ENDING:
        # Appended undecided first: compaction (engine.compaction) may compact reactively; the
        # next step decides from the log (recorded) when it did not.
        return End(TURN_ENDING[str(reason)]) if recorded else Defer()
    failures = f.turn.failures + (0 if recorded else 1)
    retry = schedule(p, f, failure, now) if failure.retryable else None
    nxt = fallback.next_settings(f)
    if nxt is not None and (retry is None or failures >= int(p["fallback_after"])):
        return Fallback(nxt)
    if retry is not None:
        return retry
    return End("model_unavailable")


def after_abandoned(f: Fold, now: int) -> Decision | Wait:
    """What follows the turn's latest event when it is an abandoned attempt (the fold says
    which decision, if any, was appended after it)."""
    last = f.turn.last_model
    assert last is not None and last["type"] == "model_attempt_abandoned"
    d = last["data"]
    req = f.last_request
    attempt = int(req["data"]["attempt"]) if req is not None else 1
    if f.turn.epoch_seq > last["seq"]:  # a fallback or a user's settings change came after it
        return Resend(1)
    pending = f.turn.retry
    if pending is not None and pending["request_event_id"] == d["request_event_id"]:
        if now < int(pending["not_before"]):
            return Wait(int(pending["not_before"]))
        return Resend(attempt + 1)
    if d["reason"] in PREEMPTED:
        return Resend(attempt + 1)
    if d["reason"] == "crash":  # its worker died with the answer unknown (recovery wrote it)
        if f.turn.crashes <= int(policy(f)["crash_resends"]):
            return Resend(attempt + 1)
        # Re-sent enough: a failure waiting won't cure (fallback, else model_unavailable).
        return decide(f, Failure(dict(d), retryable=False), now, recorded=True)
    return decide(f, Failure.recorded(d), now, recorded=True)


def retry_data(request_event_id: str, r: Retry) -> dict[str, Any]:
    return {
        "basis": r.basis,
        "delay_ms": r.delay_ms,
        "not_before": r.not_before,
        "request_event_id": request_event_id,
    }
