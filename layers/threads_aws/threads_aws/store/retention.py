"""Retention of idle threads (a deployment setting): ``THREAD_RETENTION_DAYS`` (template.yaml
parameter ``ThreadRetentionDays``; unset or 0 keeps threads forever).

With a retention, every status change of a thread (a turn opens, parks, ends: `store.index`
activity) sets its META row's DynamoDB TTL attribute ``ttl`` to that time + the retention. The
sweeper (`threads_aws.sweeper`) deletes a thread whose ``ttl`` has passed through the ordinary
deletion (`store.deletion`: `busy` threads are left for the next sweep), and finishes a thread
whose META DynamoDB's TTL removed first (a backstop when no sweeper runs: its heads without a
META row get a tombstone and the purge)."""

from __future__ import annotations

import os
from collections.abc import Mapping

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
