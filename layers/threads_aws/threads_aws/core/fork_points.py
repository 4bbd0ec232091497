"""Fork, the pure part (semantics.md §6): eligibility of a snapshot (C4 + expiry), the child
header and its `fork` event. Provider work (restore, ledger) is in `sandbox.fork`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .canonical import canonical_bytes, new_uuid7
from .errors import LogError
from .fold import Fold
from .lines import StoredLine, header_line


@dataclass(frozen=True, slots=True)
class ForkPoint:
    seq: int
    event: dict[str, Any]
    line_hash: str


def fork_point(fold: Fold, line_hashes: dict[int, str], event_id: str, now: int) -> ForkPoint:
    """The snapshot named by `event_id`, if it is an eligible fork point now; else the typed error
    (`no_snapshot_boundary`, `snapshot_expired`) at that event's seq."""
    for ev in fold.events:
        if ev["event_id"] == event_id:
            break
    else:
        raise LogError("no_snapshot_boundary", None, "no such event on this branch")
    seq = ev["seq"]
    snap = fold.snapshots.get(seq)
    if ev["type"] != "snapshot" or snap is None or not snap[0]:
        raise LogError("no_snapshot_boundary", seq, "not a quiescent snapshot")
    expires = snap[1]
    if expires is not None and expires <= now:
        raise LogError("snapshot_expired", seq, "the snapshot has expired")
    return ForkPoint(seq, ev, line_hashes[seq])


def child_lines(
    *,
    thread_id: str,
    parent_branch_id: str,
    point: ForkPoint,
    new_branch_id: str,
    epoch: int,
    now: int,
    sandbox_id: str | None,
    knowledge_policy: str = "pinned",
    reason: str = "snapshot",
    event_id: str | None = None,
) -> tuple[StoredLine, StoredLine]:
    """The child's header and its `fork` event (seq = at_seq + 1, chained to the header)."""
    header = StoredLine.of_header(header_line(thread_id, new_branch_id, now))
    data: dict[str, Any] = {
        "at_hash": point.line_hash,
        "parent_branch_id": parent_branch_id,
        "reason": reason,
    }
    if reason == "snapshot":
        data["sandbox_id"] = sandbox_id
        data["knowledge_policy"] = knowledge_policy
    event: dict[str, Any] = {
        "actor": {"kind": "host"},
        "branch_id": new_branch_id,
        "critical": True,
        "data": data,
        "epoch": epoch,
        "event_id": event_id or new_uuid7(),
        "prev_hash": header.hash,
        "seq": point.seq + 1,
        "thread_id": thread_id,
        "time": now,
        "type": "fork",
        "type_version": 1,
    }
    raw = canonical_bytes(event)
    return header, StoredLine.of_event(raw, event)
