"""The local stand-in for EventBridge Scheduler: `threads-aws dev` ticks every few seconds and
fires each active schedule's occurrences through the same `ScheduleService.fire` a deployment's
schedule-fire function calls, with an injectable clock (tests move time; nothing sleeps).

Each schedule row keeps ``checked_until``, the instant up to which its occurrences were fired:
a tick fires the occurrences in (checked_until, now] and advances it. Occurrences that fell due
while dev was stopped are found on the first tick after it starts, more than `MISSED_AFTER_MS`
late, so they are reserved and logged as ``missed`` (a week at most is looked back on).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from .cron import CronError, parse
from .service import ScheduleService

log = logging.getLogger("threads_aws.schedules")


class ScheduleTicker:
    def __init__(self, service: ScheduleService, *, clock: Callable[[], int] | None = None) -> None:
        self.service = service
        self.clock = clock or service.clock

    def tick(self) -> dict[str, list[str]]:
        """Fire what is due; returns each schedule's decided outcomes."""
        now = self.clock()
        store = self.service.stores.schedules
        out: dict[str, list[str]] = {}
        for sid in store.active_ids():
            sched = store.get(sid)
            if sched is None or sched.state != "active":
                continue
            try:
                cron = parse(sched.cron)
                due = list(cron.occurrences(sched.checked_until or sched.created_at, now, sched.timezone))
            except CronError:
                log.exception("schedule %s: unreadable cron %r", sid, sched.cron)
                continue
            for at in due:
                out.setdefault(sid, []).extend(self.service.fire(sid, sched.tenant, at))
            store.checked(sid, now)
        return out


def start(services: Any, *, every_s: float = 5.0) -> tuple[threading.Thread, threading.Event]:
    """A daemon thread ticking every `every_s` seconds until the event is set."""
    from .agent_schedules import sync

    stop = threading.Event()
    ticker = ScheduleTicker(ScheduleService.of(services))
    try:
        sync(services)  # the agents file's schedules, as a deployment's sync would
    except Exception:  # noqa: BLE001 - dev still serves; the log says why
        log.exception("agent schedules: sync failed")

    def loop() -> None:
        while not stop.wait(every_s):
            try:
                ticker.tick()
            except Exception:  # noqa: BLE001 - the next tick tries again
                log.exception("schedule tick failed")

    t = threading.Thread(target=loop, name="schedule-ticker", daemon=True)
    t.start()
    return t, stop
