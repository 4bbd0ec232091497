"""Retention of idle threads: a deployment setting, ``THREAD_RETENTION_DAYS`` (template.yaml
parameter ``ThreadRetentionDays``; unset or 0 keeps threads forever), that an agent's
``retention_days`` (the agents file) overrides for the threads of that agent (its
`thread_started.agent_name`; a subagent's child thread is its own agent's).

With a retention, a thread's creation (`new_thread`) and every status change of it (a turn
opens, parks, ends: `store.index` activity) set its META row's ``retain_until`` to that time +
the retention. The sweeper (`threads_aws.sweeper`) deletes a thread whose ``retain_until`` has
passed through the ordinary deletion (`store.deletion`: `busy` threads are left for the next
sweep). ``retain_until`` is not the StateTable's TTL attribute on purpose: DynamoDB's TTL would
delete the row of a thread that is running or holds an effect in doubt, which `busy` forbids."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

DAY_MS = 86_400_000
ENV = "THREAD_RETENTION_DAYS"


def retention_ms(environ: Mapping[str, str] | None = None) -> int | None:
    raw = (os.environ if environ is None else environ).get(ENV, "").strip()
    if not raw:
        return None
    try:
        days = float(raw)
    except ValueError:
        raise ValueError(f"{ENV} must be a number of days, not {raw!r}") from None
    return int(days * DAY_MS) if days > 0 else None


@dataclass
class Retention:
    """A thread's retention by its agent: `by_agent` (agent name -> ms, read on first use: the
    agents are loaded above the store) over the deployment's `default_ms` (None: forever)."""

    default_ms: int | None = None
    by_agent: Callable[[], Mapping[str, int]] | None = None

    def ms(self, agent: str | None) -> int | None:
        if agent is not None and self.by_agent is not None:
            own = self.by_agent().get(agent)
            if own:
                return own
        return self.default_ms

    def ttl_s(self, agent: str | None, at: int) -> int | None:
        """The ``ttl`` (epoch seconds) of a thread of `agent` active at `at`, or None: none."""
        ms = self.ms(agent)
        return (at + ms) // 1000 if ms else None
