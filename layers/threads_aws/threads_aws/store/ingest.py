"""Store a verified export (`importer.Imported`) segment by segment, ancestors first.

A branch that does not exist is created (header, then its lines in one `append`). For a branch
that exists, the stored lines must equal the file's byte for byte over their overlap (else
`seq_conflict` at the first differing seq); lines past the stored head are appended. Identical
bytes are a no-op (semantics.md §1). A torn tail's dropped bytes are kept as an artifact and the
branch is left `inspection_only` with head_verified false (its recovery, `log_repaired`, is
`threads_aws.repair`). Not atomic across segments, but re-running the same import completes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.canonical import canonical_bytes
from ..core.errors import LogError
from ..core.importer import Imported
from .branches import NewBranch
from .protocol import Artifacts, EventLog
from .records import StoreError


@dataclass(frozen=True, slots=True)
class ImportReport:
    created: int
    appended: int

    @property
    def noop(self) -> bool:
        return self.created == 0 and self.appended == 0


class TenantMismatch(StoreError):
    """The branch already exists under another tenant."""


def import_into_store(
    events: EventLog, artifacts: Artifacts | None, imp: Imported, *, tenant: str, now: int
) -> ImportReport:
    created = appended = 0
    last = len(imp.segments) - 1
    for i, seg in enumerate(imp.segments):
        rec = events.head(seg.branch_id)
        unverified = i == last and not imp.head_verified
        if rec is None:
            child = seg.parent_branch_id is not None
            rec = events.create_branch(
                NewBranch(
                    thread_id=seg.thread_id,
                    tenant=tenant,
                    branch_id=seg.branch_id,
                    header=seg.header,
                    parent_branch_id=seg.parent_branch_id,
                    fork_at_seq=seg.fork_at_seq,
                    state="inspection_only" if unverified else "ready",
                    writer_impl=seg.writer.get("impl", "threads-aws"),
                    head_verified=not unverified,
                    # a child's head starts at the parent's line at fork_at_seq (= fork.at_hash)
                    head_hash=imp.segments[i - 1].last.hash if child else None,
                    head_epoch=imp.segments[i - 1].last.epoch if child else 0,
                    create_thread=not child,
                )
            )
            created += 1
        else:
            if rec.tenant != tenant:
                raise TenantMismatch(f"branch {seg.branch_id} belongs to another tenant")
            if rec.header_hash and rec.header_hash != seg.header.hash:
                raise LogError("seq_conflict", 0, f"branch {seg.branch_id} has another header")
        base = seg.fork_at_seq or 0
        stored_hi = min(rec.head_seq, seg.last.seq if seg.lines else base)
        if stored_hi > base:
            by_seq = {line.seq: line.raw for line in events.read(seg.branch_id, base + 1, stored_hi)}
            for line in seg.lines:
                if line.seq > stored_hi:
                    break
                if by_seq.get(line.seq) != line.raw:
                    raise LogError("seq_conflict", line.seq, f"branch {seg.branch_id} stores other bytes")
        todo = [line for line in seg.lines if line.seq > rec.head_seq]
        if todo:
            events.append(
                seg.branch_id,
                todo,
                expected_head_seq=rec.head_seq,
                epoch=max(x.epoch for x in todo),
                now_ms=now,
            )
            appended += len(todo)
        if unverified and rec.head_seq <= (seg.last.seq if seg.lines else base):
            # (a branch already past the file, e.g. repaired: `repair`, keeps its state)
            dropped = None
            if imp.torn is not None and artifacts is not None:
                dropped = canonical_bytes(artifacts.put(imp.torn, "application/octet-stream")).decode("utf-8")
            events.set_state(seg.branch_id, "inspection_only", head_verified=False, dropped_ref=dropped)
    return ImportReport(created, appended)
