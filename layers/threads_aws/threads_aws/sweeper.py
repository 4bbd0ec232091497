"""The sweeper: what removes a deleted thread's last traces and an idle thread past its
retention. One pass, in this order (each step idempotent; a crash anywhere is finished by the
next pass):

1. retention (`store.retention`): every thread whose META ``retain_until`` has passed is deleted
   through `store.deletion` (reason `retention`; one that is `busy` waits for the next pass);
   heads whose thread has no META row and no tombstone (a thread row lost by hand or a restore)
   get a tombstone and are purged, unless one of them is leased (then the next pass looks again);
2. tombstones still `purging`: the purge again (`store.purge`: what a crash left), then one Scan
   for any StateTable item still naming one of their threads or branches (a run receipt, a
   consumed inbox row, a decided occurrence: rows no key finds), deleted, and the tombstone is
   `done`;
3. the mark-and-sweep of S3 objects and the ledger (`sandbox.gc.collect`): with the heads gone
   nothing marks a deleted thread's artifacts, spilled lines, workspace files or snapshots, so
   they are deleted once older than the grace, unless a live branch references the same
   content-addressed object; its ledger rows (`releasing`) are claimed and released.

It runs as `SweeperFunction` (template.yaml: on the schedule `SweepSchedule`, hourly by default,
through `run_pass`), as `threads-aws sweep` (an operator, the dev CLI) or in tests; its cost is a
few Scans of the StateTable and one listing of the bucket per pass.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .sandbox.gc import DEFAULT_GRACE_MS, GcReport, collect
from .store.deletion import DeletionRefused, ThreadDeletion
from .store.records import NotFound
from .store.sweep import Sweep
from .store.tombstones import Tombstone


@dataclass
class SweepReport:
    expired: list[str] = field(default_factory=list)  # deleted for retention
    busy: list[str] = field(default_factory=list)  # past retention but busy: the next pass
    finished: list[str] = field(default_factory=list)  # tombstones now `done`
    stray_rows: int = 0  # rows the Scan found and deleted
    gc: GcReport | None = None


def sweep(
    stores: Any,
    sweep_store: Sweep,
    sandbox: Any,
    *,
    now: int,
    grace_ms: int = DEFAULT_GRACE_MS,
    on_schedule: Any = None,
) -> SweepReport:
    report = SweepReport()
    deletion = ThreadDeletion(stores, clock=lambda: now, on_schedule=on_schedule)
    _retention(stores, sweep_store, deletion, report, now)
    stones = stores.tombstones.purging(limit=1000)
    ids: set[str] = set()
    for stone in stones:
        deletion.purge.run(stone)
        ids.add(stone.thread_id)
        ids.update(stone.branch_ids)
    keys = list(sweep_store.naming(ids))
    deletion.purge.delete_keys(keys)
    report.stray_rows = len(keys)
    for stone in stones:
        stores.tombstones.done(stone.thread_id)
        report.finished.append(stone.thread_id)
    report.gc = collect(
        stores.events,
        stores.artifacts,
        stores.resources,
        sweep_store,
        sandbox,
        now=now,
        grace_ms=grace_ms,
        kept=stores.memory.value_refs,
    )
    return report


GRACE_ENV = "SWEEP_GRACE_MS"  # objects younger than this stay (default: `DEFAULT_GRACE_MS`, a day)


def grace_ms(environ: Mapping[str, str] | None = None) -> int:
    raw = (os.environ if environ is None else environ).get(GRACE_ENV, "").strip()
    if not raw:
        return DEFAULT_GRACE_MS
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{GRACE_ENV} must be a whole number of ms, not {raw!r}") from None
    if value < 0:
        raise ValueError(f"{GRACE_ENV} must be >= 0, not {value}")
    return value


def run_pass(services: Any, *, now: int | None = None) -> SweepReport:
    """One pass over a deployment's `Services` (the scheduled function's): its stores, the
    bucket's workspace provider, and EventBridge Scheduler for a retention-deleted thread's
    schedules (`store.scheduler`: a no-op where the function has no scheduler settings)."""
    from .sandbox.provider import S3WorkspaceProvider

    names, stores = services.names, services.stores
    sweep_store = Sweep(services.ddb, names.state_table, services.s3, names.bucket)
    sandbox = S3WorkspaceProvider(stores.artifacts)
    at = services.clock() if now is None else now
    return sweep(
        stores, sweep_store, sandbox, now=at, grace_ms=grace_ms(), on_schedule=services.scheduler.delete
    )


def summary(report: SweepReport) -> dict[str, int]:
    """What a pass did, in numbers (the function's result and log line)."""
    gc = report.gc
    return {
        "expired": len(report.expired),
        "busy": len(report.busy),
        "tombstones_finished": len(report.finished),
        "stray_rows": report.stray_rows,
        "objects_deleted": len(gc.deleted) if gc else 0,
        "ledger_rows_released": gc.released_rows if gc else 0,
    }


def _retention(
    stores: Any, sweep_store: Sweep, deletion: ThreadDeletion, report: SweepReport, now: int
) -> None:
    threads = sweep_store.threads()
    for thread_id, tenant, ttl in threads:
        if ttl is None or ttl * 1000 > now:
            continue
        try:
            deletion.delete(tenant, thread_id, reason="retention")
            report.expired.append(thread_id)
        except DeletionRefused:
            report.busy.append(thread_id)
        except NotFound:
            pass  # deleted meanwhile
    with_meta = {t for t, _, _ in threads}
    orphans: dict[str, tuple[str, list[str]]] = {}
    for branch_id, thread_id, tenant in sweep_store.heads():
        if thread_id not in with_meta and thread_id not in report.expired:
            orphans.setdefault(thread_id, (tenant, []))[1].append(branch_id)
    for thread_id, (tenant, branch_ids) in orphans.items():
        if stores.threads.get_thread(tenant, thread_id) is not None:
            continue  # created after the listing of META rows (consistent read)
        if stores.tombstones.get(tenant, thread_id) is not None:
            continue  # a deletion's (its purge runs below)
        heads = stores.events.branches.heads(branch_ids)
        if any(h.lease_holder is not None and h.lease_expires_at > now for h in heads):
            report.busy.append(thread_id)  # a worker holds one: never purge under it
            continue
        stores.tombstones.ensure(Tombstone(thread_id, tenant, now, "retention", branch_ids=tuple(branch_ids)))
        report.expired.append(thread_id)
