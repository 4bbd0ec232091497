"""Clearing old tool results from the context (`context_edited{reason: threshold}`, rule 19,
`policy.context.clear_results{trigger, keep_recent, exclude_tools}`).

Before each turn request, on the bytes Render v1 would send (estimate = bytes / 4, as
compaction's): when the estimate reaches `clear_results.trigger` (tokens, or permille of the
effective window, `engine.compaction.effective_window`), every recorded result except the
`keep_recent` latest is cleared in one `context_edited`, oldest first, skipping results of tools
in `exclude_tools`, of host calls (a channel reply renders nothing), ones already cleared (the
fold's `cleared`) and ones inside a compacted range (they render as the summary). Render v1
then shows each cleared result as the fixed placeholder (`render.texts.CLEARED_RESULT_TEXT`),
never the result itself, which stays in the log; `render.verify_requests` re-renders every
request across the edit.

Ordering: it runs before compaction (`Compaction.preflight`): clearing is cheaper than a
summary and often brings the request under the compaction trigger; after the append the step
re-decides on the new head, so the request is rendered again with the placeholders. Each
result is cleared at most once and there are finitely many: no loop. Only at a request
boundary (no call pending, no attempt awaiting), so every named call has a recorded result.

`idle_ms` (clear after the provider cache has gone cold, reason `idle`) is not implemented:
a policy with it clears by the trigger alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.fold import Fold
from ..writer import Draft, View
from .compaction import _tokens, effective_window
from .loop import HOST, StepBase
from .replies import is_host_call


def clear_policy(f: Fold) -> Mapping[str, Any] | None:
    ctx = f.policy.get("context")
    clear = ctx.get("clear_results") if isinstance(ctx, Mapping) else None
    return clear if isinstance(clear, Mapping) else None


def clear_trigger(f: Fold, clear: Mapping[str, Any]) -> int | None:
    """The trigger in tokens (None: a permille trigger without a declared window)."""
    trigger = clear.get("trigger")
    if isinstance(trigger, Mapping) and "tokens" in trigger:
        return int(trigger["tokens"])
    effective = effective_window(f)
    return None if effective is None else _tokens(trigger, effective)


def clearable(f: Fold, clear: Mapping[str, Any]) -> list[str]:
    """The call ids to clear now: recorded results past the `keep_recent` latest, oldest first."""
    excluded = set(clear.get("exclude_tools") or ())
    results = [
        c
        for c in f.calls.values()
        if c.result_origin is not None and c.name not in excluded and not is_host_call(c)
    ]
    keep = max(0, int(clear.get("keep_recent", 0)))
    old = results[: len(results) - keep] if keep else results
    return [
        c.call_id
        for c in old
        if c.call_id not in f.cleared and not any(lo <= c.seq <= hi for lo, hi in f.compacted_ranges)
    ]


class ClearResults(StepBase):
    def clear_results(self, view: View, body: bytes) -> bool:
        """Before a turn request: True when this step cleared results (render again)."""
        f = view.fold
        clear = clear_policy(f)
        if clear is None or f.pending or f.awaiting:
            return False
        trigger = clear_trigger(f, clear)
        if trigger is None or len(body) // 4 < trigger:
            return False
        ids = clearable(f, clear)
        if not ids:
            return False
        edits = [{"action": "clear", "call_id": i} for i in ids]
        self.append(view, [Draft("context_edited", {"edits": edits, "reason": "threshold"}, HOST)])
        return True
