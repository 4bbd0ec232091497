"""Agent-declared schedules (agents file ``schedules: [{name, cron, timezone?, input, tenant}]``)
materialised as thread schedules: each gets its current thread (`store.schedule_threads`,
created with the thread in one transaction the first time) and a schedule row with one
EventBridge schedule, exactly like a schedule made through the routes, so firing is one path.

The schedule id is ``agent.<agent>.<name>.<hash>``, the hash covering (tenant, cron, timezone,
input): a changed declaration is a new schedule (the old one is deleted with its EventBridge
schedule), an unchanged one is left alone, a removed one deleted. The runs' principal is
``{issuer: "schedule", tenant, subject: <schedule id>}``.

`sync` runs where schedules fire: the local ticker at `threads-aws dev` start; deployed,
``python -m threads_aws.schedules.agent_schedules`` with the stack's environment after a deploy
that changed the agents file.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
from typing import Any

from ..core.canonical import new_uuid7
from ..new_thread import start_thread
from ..store.records import CompanionFailed
from ..store.schedule_threads import ScheduleThread
from ..store.schedules import ScheduleRow
from .cron import parse

log = logging.getLogger("threads_aws.schedules")
PREFIX = "agent."


def schedule_id(agent: str, spec: dict[str, str]) -> str:
    h = hashlib.sha256(
        json.dumps([spec["tenant"], spec["cron"], spec.get("timezone", "UTC"), spec["input"]]).encode()
    ).hexdigest()[:12]
    return f"{PREFIX}{agent}.{spec['name']}.{h}"


def sync(services: Any) -> dict[str, list[str]]:
    """Create the declared schedules that are missing, delete the ones no longer declared."""
    stores, now = services.stores, services.clock()
    wanted: dict[str, tuple[Any, dict[str, str]]] = {}
    for agent in services.agents.values():
        for spec in agent.schedules:
            wanted[schedule_id(agent.name, spec)] = (agent, spec)
    out: dict[str, list[str]] = {"created": [], "deleted": []}
    active = {sid for sid in stores.schedules.active_ids() if sid.startswith(PREFIX)}
    for sid in sorted(active - set(wanted)):
        services.scheduler.delete(sid)
        stores.schedules.delete(sid, now)
        out["deleted"].append(sid)
    for sid, (agent, spec) in sorted(wanted.items()):
        if sid in active or stores.schedules.get(sid) is not None:
            continue
        tenant, tz = spec["tenant"], spec.get("timezone", "UTC")
        current = _current_thread(services, agent, tenant, sid, now)
        row = ScheduleRow(
            schedule_id=sid,
            tenant=tenant,
            thread_id=current.thread_id,
            branch_id=current.branch_id,
            cron=parse(spec["cron"]).text,
            timezone=tz,
            input=spec["input"],
            agent=agent.name,
            created_by={"issuer": "schedule", "subject": sid, "tenant": tenant},
            created_at=now,
            checked_until=now,
        )
        services.scheduler.create(sid, tenant, parse(spec["cron"]).eventbridge(), tz)
        stores.schedules.create(row)
        out["created"].append(sid)
    return out


def _current_thread(services: Any, agent: Any, tenant: str, sid: str, now: int) -> ScheduleThread:
    stores = services.stores
    found = stores.schedule_threads.get(tenant, sid)
    if found is not None:
        return found
    row = ScheduleThread(tenant, sid, new_uuid7(), new_uuid7(), now)
    try:
        start_thread(
            stores,
            services.writer,
            agent,
            tenant=tenant,
            thread_id=row.thread_id,
            branch_id=row.branch_id,
            now_ms=now,
            companions=[stores.schedule_threads.create(row)],
        )
    except CompanionFailed as exc:  # another sync created it first
        if exc.item:
            return ScheduleThread.from_item(exc.item)
        winner = stores.schedule_threads.get(tenant, sid)
        if winner is None:  # pragma: no cover - a current thread is never deleted
            raise
        return winner
    return row


def main() -> int:
    from .. import services

    print(json.dumps(sync(services.current()), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
