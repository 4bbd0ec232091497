"""The template's `Schedule` events in `threads-aws dev` (the sweeper's): one daemon thread per
`rate(...)` expression invokes its function (under its own role, `runtime.Handlers.invoke`)
with EventBridge's scheduled-event shape, first one period after the start, as a new rule does.
A `cron(...)` expression is not run (a warning says so): dev is not left running on a calendar."""

from __future__ import annotations

import logging
import re
import threading
import uuid
from typing import Any

from .runtime import Handlers
from .sam import ScheduleSource

log = logging.getLogger("threads_aws_dev.local")

_RATE = re.compile(r"rate\((\d+) (minute|minutes|hour|hours|day|days)\)")
_UNIT_S = {"minute": 60, "hour": 3600, "day": 86_400}


def period_s(expression: str) -> int | None:
    """Seconds between runs of an EventBridge rate expression; None for anything else."""
    m = _RATE.fullmatch(expression.strip())
    return int(m.group(1)) * _UNIT_S[m.group(2).rstrip("s")] if m and int(m.group(1)) > 0 else None


def scheduled_event(source: ScheduleSource) -> dict[str, Any]:
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "resources": [f"local:{source.function}.{source.event}"],
        "detail": {},
    }


def start(sources: list[ScheduleSource], handlers: Handlers) -> tuple[threading.Event, list[str]]:
    """Start a timer per rate; returns the stop event and the warnings (expressions not run)."""
    stop, warnings = threading.Event(), []
    for src in sources:
        every = period_s(src.expression)
        if every is None:
            warnings.append(f"{src.function}.{src.event}: {src.expression!r} not run by dev (rates only)")
            continue

        def loop(src: ScheduleSource = src, every: int = every) -> None:
            while not stop.wait(every):
                try:
                    handlers.invoke(src.function, scheduled_event(src))
                except Exception:  # noqa: BLE001 - EventBridge retries; here the next period does
                    log.exception("%s.%s: scheduled invocation failed", src.function, src.event)

        threading.Thread(target=loop, name=f"timer-{src.function}", daemon=True).start()
    return stop, warnings
