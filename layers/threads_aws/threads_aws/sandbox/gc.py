"""Workspace garbage collection and snapshot retention: mark and sweep over the shared,
content-addressed artifact store, and the release of ledger rows whose owner branch is gone.

Why not an S3 lifecycle rule: objects are content-addressed and shared (two branches writing the
same bytes, a child and its parent, a request body and a file), so no prefix or age rule can
tell a dead object from a live one; only the logs can.

The reference argument. An object is kept when any of these names it:
1. an ArtifactRef (`{sha256, bytes, media_type}`) anywhere in an event of the resolved chain of
   any branch that still has a head record (requests, results, summaries: what export, verify
   and render read); a child's chain holds its parent's events through the fork point, so a
   parent's objects stay while a child needs them, even after the parent is gone;
2. a branch's current workspace manifest (`Fold.workspace`) and each file its entries name;
3. each unexpired snapshot's manifest (`expires_at` null or > now) and its files: retention is
   exactly `expires_at`, and a fork needs an unexpired snapshot, so an expired one that is no
   longer any branch's current workspace is never read again;
4. each spilled line of a live branch's chain (no event names it; its line item does), and a
   stub-mode branch's recorded stubs (`sandbox.stubs`: the one object only a branch record,
   not the log, names; written before the branch exists, so covered by 5 until then);
5. anything younger than `grace_ms`: a write puts its bytes and manifest before its
   effect_commit names them, and a model request's bytes precede its `model_request` (C2), so
   an in-flight object is not referenced yet. The grace must exceed the longest begin→commit
   span (a step's deadline plus the lease TTL; a day is far beyond it).
6. a memory value held in S3 (`store.memory`): its row, not a log, names it (`kept`).
A superseded manifest named only by an old write's `provider_receipt` is history, never read:
no tool reads a past manifest, and a fork reads only a snapshot's. Deleting is safe against
concurrent writers because everything a writer can still commit is covered by 5, and anything
covered by 1–4 is marked from a consistent read of the heads taken before the listing.

Ledger rows (`resources`) whose owner branch has no head record any more (a discarded fork, a
deleted thread) are claimed by compare-and-set (`live|pending` → `releasing`), released with the
provider, then `released`; a failed release is `release_failed`, never hidden.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..core.canonical import new_uuid7
from ..core.errors import LogError
from ..core.importer import import_log
from ..store.sweep import Sweep
from .workspace import Workspace

DEFAULT_GRACE_MS = 86_400_000
LEDGER_KEEP_MS = 30 * 86_400_000  # a released row of a gone branch, then DynamoDB's TTL drops it


@dataclass
class GcReport:
    branches: int = 0
    marked: int = 0
    listed: int = 0
    deleted: list[str] = field(default_factory=list)
    kept_young: int = 0
    released_rows: int = 0
    unreadable: list[str] = field(default_factory=list)  # live branches whose log didn't read


def artifact_refs(value: Any) -> Iterator[str]:
    """Every ArtifactRef's sha256 inside an event's data."""
    if isinstance(value, dict):
        sha = value.get("sha256")
        if isinstance(sha, str) and "bytes" in value and "media_type" in value:
            yield sha
        for v in value.values():
            yield from artifact_refs(v)
    elif isinstance(value, list):
        for v in value:
            yield from artifact_refs(v)


def live_references(
    events: Any, workspace: Workspace, report: GcReport, branch_ids: set[str], now: int
) -> set[str]:
    """Every object a live branch references: rules 1–4 of the module doc."""
    marked: set[str] = set()
    for branch_id in sorted(branch_ids):
        try:
            exported = events.export(branch_id)
            fold = import_log(exported, now=now).fold
        except LogError:
            report.unreadable.append(branch_id)  # its references are unknown: sweep nothing
            continue
        report.branches += 1
        marked.update(_spills(exported))
        rec = events.head(branch_id)
        if rec is not None and rec.stubs_sha256 is not None:
            marked.add(rec.stubs_sha256)
        manifests = {fold.workspace} if fold.workspace else set()
        for ev in fold.events:
            marked.update(artifact_refs(ev.get("data")))
        for seq, (_quiet, expires, _id) in fold.snapshots.items():
            if expires is None or expires > now:
                manifests.add(fold.events[seq - 1]["data"]["manifest_hash"])
        for h in manifests:
            marked.add(h)
            try:
                marked.update(e.sha256 for e in workspace.manifest(h).entries())
            except LogError:
                pass  # a missing manifest has no files to keep
    return marked


def _spills(exported: bytes) -> set[str]:
    """The keys a spilled line of the chain would have (`store.lines`: a line past the store's
    spill threshold is stored by the sha256 of its bytes), which no event names, only the line
    item. Every line's hash, so it holds whatever threshold wrote the line; a key of a line that
    was not spilled names no object, or one with exactly those bytes."""
    return {hashlib.sha256(raw).hexdigest() for raw in exported.split(b"\n") if raw}


def collect(
    events: Any,
    artifacts: Any,
    ledger: Any,
    sweep: Sweep,
    sandbox: Any,
    *,
    now: int,
    grace_ms: int = DEFAULT_GRACE_MS,
    dry_run: bool = False,
    kept: Callable[[], set[str]] | None = None,
) -> GcReport:
    report = GcReport()
    branch_ids = sweep.branch_ids()  # heads first: anything newer is younger than the grace
    marked = live_references(events, Workspace(artifacts), report, branch_ids, now)
    if kept is not None:
        marked |= kept()  # read after the heads, before the listing, as the heads are
    report.marked = len(marked)
    for obj in () if report.unreadable else sweep.objects():
        report.listed += 1
        if obj.sha256 in marked:
            continue
        if obj.modified_ms > now - grace_ms:
            report.kept_young += 1
            continue
        report.deleted.append(obj.sha256)
        if not dry_run:
            sweep.delete(obj.sha256)
    token = new_uuid7()
    for row in sweep.resource_rows():
        if row.owner_branch_id in branch_ids or row.state not in ("live", "pending", "releasing") or dry_run:
            continue
        if row.state == "releasing":  # a deleted thread's (store.deletion moved it)
            if not ledger.claim(row, token, now=now):
                continue  # another sweeper holds it
        else:
            try:
                ledger.move(row, "releasing", expect=("live", "pending"))  # the claim (compare-and-set)
            except LogError:
                continue  # another sweeper claimed it
        try:
            if row.ref is not None:
                sandbox.release(row.ref)
        except Exception:  # noqa: BLE001 - a failed release is recorded, never hidden
            ledger.move(row, "release_failed")
            continue
        # the audit of a release outlives its branch for a while, not forever (DynamoDB TTL)
        ledger.move(row, "released", ttl_s=(now + LEDGER_KEEP_MS) // 1000)
        report.released_rows += 1
    return report
