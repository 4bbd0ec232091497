"""Forks: a branch's eligible fork points and the fork route (the procedure itself is
`sandbox.fork`: child `forking`, ledger row, restore, manifest check, `fork` event, `ready`; in
`mode: stub` no restore and no row, the parent's later external operations recorded as the
child's stubs: `sandbox.stubs`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..core.errors import LogError
from ..core.fold import Fold
from .base import HostBase
from .errors import ApiError
from .principal import Principal


def eligible_snapshots(fold: Fold, now: int) -> Iterator[tuple[int, dict[str, Any]]]:
    """(seq, snapshot event) of every quiescent snapshot that has not expired at `now`."""
    for seq, (quiet, expires, _event_id) in sorted(fold.snapshots.items()):
        if quiet and (expires is None or expires > now):
            yield seq, fold.events[seq - 1]


class Forks(HostBase):
    def fork_points(
        self, principal: Principal, thread_id: str, branch_id: str | None
    ) -> list[dict[str, Any]]:
        rec = self._branch(principal, thread_id, branch_id)
        with self._lock:
            points = list(eligible_snapshots(self._load(rec).fold, self.clock()))
        return [
            {"branch_id": rec.branch_id, "seq": seq, "event_id": ev["event_id"], "snapshot": ev["data"]}
            for seq, ev in points
        ]

    def fork(
        self, principal: Principal, thread_id: str, branch_id: str | None, body: dict[str, Any]
    ) -> dict[str, str]:
        rec = self._branch(principal, thread_id, branch_id)
        now = self.clock()
        with self._lock:
            fold = self._load(rec).fold
            seq = fold.seq_of.get(body["event_id"])
            ev = fold.events[seq - 1] if seq is not None else None
            snap = fold.snapshots.get(seq) if seq is not None else None
        if ev is None:
            raise LogError("no_snapshot_boundary", None, "no such event on this branch")
        if ev["type"] != "snapshot" or snap is None or not snap[0]:
            raise LogError("no_snapshot_boundary", ev["seq"], "not a quiescent snapshot")
        if snap[1] is not None and snap[1] <= now:
            raise LogError("snapshot_expired", ev["seq"], "the snapshot has expired")
        from ..sandbox.fork import fork, fork_stub

        if body.get("mode") == "stub":  # nothing is restored: no provider needed
            result = fork_stub(
                self.store,
                self.stores.artifacts,
                tenant=principal.tenant,
                branch_id=rec.branch_id,
                event_id=body["event_id"],
                knowledge_policy=body.get("knowledge", "pinned"),
                now=now,
            )
            return {"thread_id": result.thread_id, "branch_id": result.branch_id}
        if self.sandbox is None:
            raise ApiError("sandbox_required", "this host has no sandbox provider to restore the snapshot")
        result = fork(
            self.store,
            self.stores.resources,
            self.sandbox,
            tenant=principal.tenant,
            branch_id=rec.branch_id,
            event_id=body["event_id"],
            knowledge_policy=body.get("knowledge", "pinned"),
            now=now,
        )
        return {"thread_id": result.thread_id, "branch_id": result.branch_id}
