"""The HTTP ``RunOutcome`` of a tracked run (semantics §4 "Runs and completion", RunOutcome table).

A pure mapping of a `runs.RunTrack` to the route's body: the host's run routes and streams
(`host.sse`, `host.live`) call `run_outcome`/`outcome_of` and never read the log for it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping

from ._chain import Event, JsonObj, data_of
from .runs import RunTrack, track_runs

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


def _final_text(resp: Event | None) -> str:
    if resp is None:
        return ""
    parts = data_of(resp).get("content") or []
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


# What each provider_outcome of the last abandoned attempt tells a reader of the run result (the
# event has no message: the adapter's words, naming a missing key variable or an unreadable
# secret, are in the worker's log under the attempt's request_event_id).
_OUTCOME_WORDS = {
    "not_sent": "the request never left: a missing or unreadable provider key or secret, or no connection",
    "failed": "the provider refused it",
    "unknown": "the answer was lost in flight",
}


def _attempt_words(d: Mapping[str, object]) -> str:
    outcome = str(d.get("provider_outcome"))
    status = d.get("http_status")
    words = f"the last model attempt was abandoned ({d.get('reason')}, {outcome}"
    words += f", HTTP {status})" if status is not None else ")"
    if outcome in _OUTCOME_WORDS:
        words += f": {_OUTCOME_WORDS[outcome]}"
    return words + f"; the worker's log names the cause under request {d.get('request_event_id')}"


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
        if r.reason == "model_unavailable" and r.abandoned is not None:
            msg += "; " + _attempt_words(r.abandoned)
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
