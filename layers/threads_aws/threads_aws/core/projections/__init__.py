"""Named projections of a resolved chain (conformance README "Projections"; semantics §4, §8).

Every function here is pure: it takes the resolved chain as a sequence of parsed event objects
(envelope keys ``seq, event_id, type, epoch, actor, time, data, ...``; no header or head lines),
oldest first, and derives its value in one pass. Nothing is stored (semantics §8 "Derived, never
stored"). Rules only ever match known event types, so unknown non-critical events are skipped.

One module per projection family; every public name stays importable from here::

    billing        cost(events) -> dict | None
    context        cache_breaks(events) -> list[dict] | None
                   compaction(events) -> {"consecutive_failures": int, "breaker_open": bool}
    latest         todos(events) -> list
                   mode(events) -> str
                   output(events) -> {"outcome", "value"?}
    child_threads  children(events) -> list[{"child_thread_id", "status"}]
                   pending_wakes(events) -> list[{"branch_id", "child_thread_id"}]
    team           team_tasks(events) -> list[{"task_id", "status", "owner"?}]
    epochs         model(events) -> {"provider", "name"} | None  (SettingsEpoch, settings_at)
    runs           run(events, *, now=None) -> {"status", "output_event_id"} | None
                   (track_runs, RunTrack: the one run pass every run reader shares)
    outcomes       run_outcome(events, run_id, *, thread_id, branch_id) -> dict | None
                   (outcome_of: the HTTP RunOutcome of a RunTrack)
    here           all_projections(events, now=None) -> dict
"""

from __future__ import annotations

from collections.abc import Sequence

from ._chain import RESPONSE_TYPES, Event, JsonObj
from .billing import cost
from .child_threads import children, pending_wakes
from .context import CACHE_BREAK_CAUSES, cache_breaks, compaction
from .epochs import SettingsEpoch, model, settings_at
from .latest import mode, output, todos
from .outcomes import outcome_of, run_outcome
from .runs import RunTrack, run, track_runs
from .team import team_tasks

__all__ = [
    "CACHE_BREAK_CAUSES",
    "PROJECTION_KEYS",
    "RESPONSE_TYPES",
    "Event",
    "JsonObj",
    "RunTrack",
    "SettingsEpoch",
    "all_projections",
    "cache_breaks",
    "children",
    "compaction",
    "cost",
    "mode",
    "model",
    "outcome_of",
    "output",
    "pending_wakes",
    "run",
    "run_outcome",
    "settings_at",
    "team_tasks",
    "todos",
    "track_runs",
]

#: The keys of `all_projections`, as the conformance README names them.
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
