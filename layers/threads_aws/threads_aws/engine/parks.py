"""Parks that expire: `park_escalated` (semantics.md §4 Parking; §Approvals).

A park appended with `expires_at` (an approval challenge, an ask_user question) arms a wake-up
of its branch at `expires_at` on the run-step timer (`store.step_timer`) BEFORE the park is
appended: a crash in between leaves a spare wake-up, never a park nobody escalates. The timer
queue delays a message by at most 15 minutes; a longer TTL hops (`engine.queue.forward_wakeups`
re-sends a message that is not due yet with the remaining delay), so one armed wake-up reaches
`expires_at` with ceil(TTL / 15 min) sends and no step before it is due. Each hop first reads
the branch (one GetItem, and the tail if it moved): a park answered meanwhile stops the hops,
so an approval decided in minutes costs one hop, not a day's worth.

Exactly once: the step that finds an open park past its `expires_at` that no `park_escalated`
names yet (the fold's `escalations_due`, derived from the log alone) appends
`park_escalated{address}` (actor host, non-critical) under its lease. A step redelivered after a
crash, or a duplicate wake-up, finds it in the log and appends nothing. Nothing is auto-resolved:
the park stays open; an approval decided after `expires_at` is `approval_expired` (a denial,
`host.controls`).

The notice: a branch with a `channel_delivery` gets the approvers' channel message as a derived
channel reply (`engine.replies`: source `park_escalated`, call id `send_<seq>_0`, sent as an
effect, so once). A branch without a channel gets a log line (`notify_escalated`), written by the
step that appended the event; run webhooks, when there are any, hook in there.
"""

from __future__ import annotations

import logging
from typing import Any

from ..core.fold import Fold
from ..writer import Draft, View
from .bindings import pinned_agent
from .context import EngineContext
from .loop import HOST, StepBase

log = logging.getLogger("threads_aws.engine")

DEFAULT_TTL_MS = 24 * 3_600_000


def park_ttl_ms(ctx: EngineContext, fold: Fold, kind: str) -> int:
    """The pinned agent's `approval_ttl_ms` / `question_ttl_ms`, else the host default."""
    agent = pinned_agent(ctx, fold)
    ttl = getattr(agent, f"{kind}_ttl_ms", None) if agent is not None else None
    return int(ttl) if ttl else DEFAULT_TTL_MS


def arm_escalation(ctx: EngineContext, branch_id: str, expires_at: int) -> bool:
    """Wake the branch at `expires_at` (best effort: without a timer, any later step of the
    branch escalates a park that is due)."""
    if ctx.timer is None:
        return False
    try:
        ctx.timer.wake_at(branch_id, expires_at, now_ms=ctx.clock(), park=True)
    except Exception:  # noqa: BLE001 - the park is still escalated by the branch's next step
        log.exception("could not arm the park escalation of %s", branch_id)
        return False
    return True


def notify_escalated(view: View, address: dict[str, str], expires_at: int) -> None:
    """The notice of a branch without a channel: a structured log line (a run webhook would be
    sent from here)."""
    log.warning(
        "park escalated: %s %s on thread %s passed its expires_at",
        address["kind"],
        address["id"],
        view.thread_id,
        extra={
            "park_escalated": {
                "thread_id": view.thread_id,
                "branch_id": view.branch_id,
                "address": address,
                "expires_at": expires_at,
            }
        },
    )


class Parks(StepBase):
    def escalate_due(self, view: View) -> bool:
        """Append `park_escalated` for the first open park past its TTL; True after an append."""
        f = view.fold
        if not f.park_expires:
            return False
        due = f.escalations_due(self.ctx.clock())
        if not due:
            return False
        address: dict[str, Any] = dict(due[0])
        expires_at = f.park_expires[(address["kind"], address["id"])]
        self.append(view, [Draft("park_escalated", {"address": address}, HOST)])
        if not f.item_keys:  # no channel on this branch: the channel reply path has no one to tell
            notify_escalated(view, address, expires_at)
        return True
