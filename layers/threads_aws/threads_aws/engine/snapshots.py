"""Snapshots at turn ends (semantics.md §6): once a branch is quiescent (no open turn, nothing
pending or parked, every effect settled: C4) and its workspace differs from its latest
snapshot's (or that snapshot is no fork point), the worker appends `snapshot`, so every turn
that changed the workspace ends with a fork point. It is appended only after the provider
reports the capture durable (the manifest object exists); `expires_at` = now + the retention
(`SNAPSHOT_RETENTION_MS`, default 7 days; 0 means the snapshot never expires: null).
"""

from __future__ import annotations

import os

from ..core.fold import Fold
from ..sandbox.provider import DEFAULT_RETENTION_MS, S3WorkspaceProvider
from ..writer import Draft
from .loop import HOST


def retention_ms(environ: dict[str, str] | None = None) -> int | None:
    raw = (environ if environ is not None else os.environ).get("SNAPSHOT_RETENTION_MS", "")
    value = int(raw) if raw.strip() else DEFAULT_RETENTION_MS
    return value if value > 0 else None


def snapshot_due(fold: Fold) -> bool:
    """Quiescent, and the workspace is not the latest snapshot's, or that snapshot was taken
    inside a turn (a subagent's changes written back, `engine.isolation`): no fork point."""
    if fold.workspace is None or not fold.quiescent():
        return False
    latest = fold.snapshots[max(fold.snapshots)] if fold.snapshots else None
    return fold.workspace != fold.snapshot_manifest or (latest is not None and not latest[0])


def snapshot_draft(provider: S3WorkspaceProvider, fold: Fold, branch_id: str, now: int) -> Draft | None:
    """The `snapshot` to append now, or None (nothing changed, or the capture isn't durable)."""
    manifest = fold.workspace
    if manifest is None or not snapshot_due(fold) or not provider.capture(manifest):
        return None
    data = provider.snapshot_data(branch_id, manifest, now=now, retention_ms=retention_ms())
    return Draft("snapshot", data, HOST)
