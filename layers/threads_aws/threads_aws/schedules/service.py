"""A thread's schedules (the add-only routes) and the firing of an occurrence, exactly as the
semantics' four steps say (semantics.md §5, Schedules):

1. reserve: a ``pending`` occurrence row, unique (tenant, schedule_id, occurrence_at), freezing
   agent, input, timezone (and whose run it starts); one reservation wins;
2. ``missed``: the occurrence was reserved more than `MISSED_AFTER_MS` after it fell due (no
   host ran: dev was stopped, or EventBridge kept retrying a failing target); a pending row whose
   thread has an open turn becomes ``overlap``;
3. under the thread writer, each pending row of the thread is decided in occurrence order by
   the conditional update (``state = pending``) in the transaction that appends either
   ``schedule_fired{schedule_id, occurrence_id, scheduled_for, timezone}`` + ``user_input{source:
   schedule, delivery_event_id}`` or ``schedule_skipped{..., reason}``: a stale scheduler's
   update matches nothing and its append rolls back;
4. a gone agent, or a thread pinned to another config, retires the row as ``removed`` with
   nothing appended.
A fired occurrence wakes the branch (one run step).

Routes: ``POST /v1/threads/{thread_id}/schedules`` ``{cron, timezone?, input, branch_id?}`` → 201
the schedule; ``GET`` → the thread's schedules; ``DELETE …/schedules/{schedule_id}`` → 200. All
tenant-scoped (another tenant's thread or schedule is ``not_found``); a bad cron, zone or input
is ``invalid_request`` naming the field, checked before anything is written. The creator is the
principal whose runs the occurrences start.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..core.canonical import new_uuid7
from ..core.errors import LogError
from ..core.lines import StoredLine
from ..store.protocol import StepQueue, Stores
from ..store.records import CompanionFailed
from ..store.schedule_occurrences import OccurrenceRow
from ..store.schedules import ScheduleRow
from ..writer import Draft, View, Writer
from .cron import CronError, parse, zone

log = logging.getLogger("threads_aws.schedules")

MISSED_AFTER_MS = 10 * 60_000
RETRIES = 5
MAX_INPUT = 10_000
BODY_FIELDS = {"cron", "timezone", "input", "branch_id"}
SCHEDULER = {"kind": "scheduler"}


class ScheduleService:
    def __init__(
        self,
        stores: Stores,
        writer: Writer,
        agents: Mapping[str, Any],
        clock: Callable[[], int],
        *,
        scheduler: Any = None,
        steps: StepQueue | None = None,
        missed_after_ms: int = MISSED_AFTER_MS,
    ) -> None:
        self.stores = stores
        self.writer = writer
        self.agents = agents
        self.clock = clock
        self.scheduler = scheduler
        self.steps = steps
        self.missed_after_ms = missed_after_ms

    @classmethod
    def of(cls, services: Any) -> ScheduleService:
        return cls(
            services.stores,
            services.writer,
            services.agents,
            services.clock,
            scheduler=services.scheduler,
            steps=services.steps,
        )

    # ================================================================ routes
    def create(self, host: Any, principal: Any, thread_id: str, body: Any) -> dict[str, Any]:
        from ..host.errors import invalid

        if not isinstance(body, dict):
            raise invalid("body: must be an object {cron, timezone?, input, branch_id?}")
        extra = sorted(set(body) - BODY_FIELDS)
        if extra:
            raise invalid(f"body: unknown field(s) {', '.join(extra)}")
        cron_text, tz, text = body.get("cron"), body.get("timezone", "UTC"), body.get("input")
        if not isinstance(cron_text, str):
            raise invalid("body.cron: a five-field cron expression is required")
        try:
            cron = parse(cron_text)
        except CronError as exc:
            raise invalid(f"body.cron: {exc}") from None
        if not isinstance(tz, str):
            raise invalid("body.timezone: an IANA time zone name")
        try:
            zone(tz)
        except CronError as exc:
            raise invalid(f"body.timezone: {exc}") from None
        if not isinstance(text, str) or not text.strip() or len(text) > MAX_INPUT:
            raise invalid(f"body.input: a non-empty string of at most {MAX_INPUT} characters")
        branch_id = body.get("branch_id")
        if branch_id is not None and not isinstance(branch_id, str):
            raise invalid("body.branch_id: a branch id")
        rec = host._branch(principal, thread_id, branch_id)
        started = self.writer.load(rec.branch_id).fold.started or {}
        now = self.clock()
        row = ScheduleRow(
            schedule_id=new_uuid7(),
            tenant=principal.tenant,
            thread_id=thread_id,
            branch_id=rec.branch_id,
            cron=cron.text,
            timezone=tz,
            input=text,
            agent=str(started.get("agent_name", "")),
            created_by=principal.as_dict(),
            created_at=now,
            checked_until=now,
        )
        # EventBridge first: a schedule row exists only for a schedule that will fire (a failed
        # create leaves at most an EventBridge schedule whose fires find no row and do nothing).
        if self.scheduler is not None:
            self.scheduler.create(row.schedule_id, row.tenant, cron.eventbridge(), tz)
        self.stores.schedules.create(row)
        return row.public()

    def list_for(self, host: Any, principal: Any, thread_id: str) -> list[dict[str, Any]]:
        host._thread(principal, thread_id)
        return [
            r.public() for r in self.stores.schedules.of_thread(thread_id) if r.tenant == principal.tenant
        ]

    def delete(self, host: Any, principal: Any, thread_id: str, schedule_id: str) -> dict[str, Any]:
        from ..host.errors import not_found

        host._thread(principal, thread_id)
        row = self.stores.schedules.get(schedule_id)
        if (
            row is None
            or row.tenant != principal.tenant
            or row.thread_id != thread_id
            or row.state != "active"
        ):
            raise not_found(f"schedule {schedule_id} not found")
        if self.scheduler is not None:
            self.scheduler.delete(schedule_id)
        self.stores.schedules.delete(schedule_id, self.clock())
        return {"schedule_id": schedule_id, "deleted": True}

    # ================================================================ firing
    def fire(self, schedule_id: str, tenant: str, occurrence_at: int) -> list[str]:
        """Reserve this occurrence (step 1, with step 2's `missed`), then decide the thread's
        pending rows (step 3). Returns each decided row's outcome (tests, logs)."""
        sched = self.stores.schedules.get(schedule_id)
        if sched is None or sched.tenant != tenant or sched.state != "active":
            log.info("schedule %s fired but is gone", schedule_id)
            return []
        now = self.clock()
        row = OccurrenceRow(
            tenant=sched.tenant,
            schedule_id=sched.schedule_id,
            occurrence_at=occurrence_at,
            thread_id=sched.thread_id,
            branch_id=sched.branch_id,
            agent=sched.agent,
            input=sched.input,
            timezone=sched.timezone,
            claimed_at=now,
            principal=sched.created_by,
            reason="missed" if now - occurrence_at > self.missed_after_ms else None,
        )
        self.stores.occurrences.reserve(row)
        return self.decide_pending(sched.thread_id, extra=[row])

    def decide_pending(self, thread_id: str, extra: Sequence[OccurrenceRow] = ()) -> list[str]:
        rows = {(r.schedule_id, r.occurrence_at): r for r in self.stores.occurrences.pending(thread_id)}
        for r in extra:  # the index is eventually consistent: read the one just reserved
            stored = self.stores.occurrences.get(r.tenant, r.schedule_id, r.occurrence_at)
            if stored is not None and stored.state == "pending":
                rows.setdefault((r.schedule_id, r.occurrence_at), stored)
        out = []
        woke: set[str] = set()
        for row in sorted(rows.values(), key=lambda r: (r.occurrence_at, r.schedule_id)):
            outcome = self.decide(row)
            out.append(outcome)
            if outcome == "fired":
                woke.add(row.branch_id)
        for branch_id in woke:
            if self.steps is not None:
                self.steps.enqueue(branch_id, reason="schedule")
        return out

    def decide(self, row: OccurrenceRow) -> str:
        for _ in range(RETRIES):
            view = self.writer.load(row.branch_id)
            why = self._removed(view, row)
            if why is not None:
                log.info("occurrence %s removed: %s", row.occurrence_id, why)
                self.stores.occurrences.retire(row, "removed", self.clock())
                return "removed"
            reason = row.reason or ("overlap" if view.fold.turn_open else None)
            try:
                self._append(view, row, reason)
            except CompanionFailed:
                return "stale"  # another scheduler decided it: its append won, ours rolled back
            except LogError as exc:
                if exc.code in ("seq_conflict", "stale_epoch"):
                    continue
                raise
            return reason or "fired"
        return "busy"

    def _removed(self, view: View, row: OccurrenceRow) -> str | None:
        f = view.fold
        started = f.started or {}
        agent = self.agents.get(row.agent)
        if agent is None:
            return f"agent {row.agent!r} is gone"
        if started.get("agent_name") != agent.name or started.get("config_hash") != agent.config_hash:
            return "the thread is pinned to another agent config"
        if view.record.state != "ready" or f.status() in ("inspection_only", "cancelled") or f.handed_off:
            return "the thread cannot run"
        return None

    def _append(self, view: View, row: OccurrenceRow, reason: str | None) -> list[StoredLine]:
        data = {
            "occurrence_id": row.occurrence_id,
            "schedule_id": row.schedule_id,
            "scheduled_for": row.occurrence_at,
            "timezone": row.timezone,
        }
        now = self.clock()
        drafts: list[Any]
        if reason is None:
            principal = row.principal or {
                "issuer": "schedule",
                "subject": row.schedule_id,
                "tenant": row.tenant,
            }

            def opened(built: list[StoredLine]) -> Draft:
                ui = {"source": "schedule", "text": row.input, "delivery_event_id": built[0].event_id}
                return Draft("user_input", ui, {"kind": "scheduler", "principal": principal})

            drafts = [Draft("schedule_fired", data, SCHEDULER), opened]
            state = "fired"
        else:
            drafts = [Draft("schedule_skipped", {**data, "reason": reason}, SCHEDULER)]
            state = "skipped"
        _, lines = self.writer.append(
            row.branch_id,
            drafts,
            view=view,
            now=now,
            companions=lambda _v, built: [
                self.stores.occurrences.decide(row, state, reason, built[0].seq, now)
            ],
        )
        return lines
