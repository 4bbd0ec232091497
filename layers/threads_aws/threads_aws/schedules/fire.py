"""The schedule-fire function's library: EventBridge Scheduler invokes it with
``{schedule_id, tenant, scheduled_for}`` (the occurrence's ISO 8601 instant, also on a retry).
A failure raises, so EventBridge retries (its RetryPolicy); the reservation makes a retry a
no-op for an occurrence already decided."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any


def occurrence_ms(scheduled_for: str) -> int:
    return int(datetime.fromisoformat(scheduled_for.replace("Z", "+00:00")).timestamp() * 1000)


def handle(event: Mapping[str, Any], services: Any) -> dict[str, Any]:
    from .service import ScheduleService

    outcomes = ScheduleService.of(services).fire(
        str(event["schedule_id"]), str(event["tenant"]), occurrence_ms(str(event["scheduled_for"]))
    )
    return {"outcomes": outcomes}
