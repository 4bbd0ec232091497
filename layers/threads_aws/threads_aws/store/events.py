"""The event store: branches, their lines and heads, and leases, on DynamoDB (+ S3 for spills).

One object over the modules that each own one part (read their docstrings for the layouts and
the fencing):

- `store.lines` — EventsTable items (one per line, spills to S3) and paged reads;
- `store.branches` — head records (``BRANCH#<id>`` / ``HEAD``), creation (`NewBranch`), state,
  ancestry;
- `store.append` — the fenced append (**a line is committed iff its seq <= head_seq**; head_seq,
  lease epoch and head epoch conditions; staged split batches; companions);
- `store.leases` — acquire / renew / release with epoch fencing.

`EventStore` implements `store.protocol.EventLog`, the seam the writer, host and engine use.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..core.lines import StoredLine, head_line
from .append import CHUNK_BYTES, STAGE_TTL_MS, Appender
from .artifacts import ArtifactStore
from .branches import Branches, BranchRecord, NewBranch
from .dynamo import MAX_TXN_ITEMS
from .leases import Leases
from .lines import SPILL_THRESHOLD, Lines
from .records import Clock, Companion, Head, Lease, wall_ms


class EventStore:
    def __init__(
        self,
        ddb: Any,
        events_table: str,
        state_table: str,
        artifacts: ArtifactStore | None = None,
        *,
        clock: Clock = wall_ms,
        spill_threshold: int = SPILL_THRESHOLD,
        stage_ttl_ms: int = STAGE_TTL_MS,
        max_chunk_items: int = MAX_TXN_ITEMS - 1,
        max_chunk_bytes: int = CHUNK_BYTES,
        max_attempts: int = 6,
    ) -> None:
        self.events_table = events_table
        self.state_table = state_table
        self.artifacts = artifacts
        self.clock = clock
        self.lines = Lines(ddb, events_table, artifacts, spill_threshold=spill_threshold)
        self.branches = Branches(ddb, state_table, self.lines, clock=clock, max_attempts=max_attempts)
        self.leases = Leases(ddb, state_table, self.branches, clock=clock, max_attempts=max_attempts)
        self.appender = Appender(
            ddb,
            state_table,
            self.lines,
            self.branches,
            clock=clock,
            stage_ttl_ms=stage_ttl_ms,
            max_chunk_items=max_chunk_items,
            max_chunk_bytes=max_chunk_bytes,
            max_attempts=max_attempts,
        )

    @property
    def after_chunk_hook(self) -> Callable[[int], None] | None:
        """Test hook: called with the chunk index after each intermediate chunk of a split batch
        commits (raise from it to simulate a crash mid-batch)."""
        return self.appender.after_chunk_hook

    @after_chunk_hook.setter
    def after_chunk_hook(self, hook: Callable[[int], None] | None) -> None:
        self.appender.after_chunk_hook = hook

    # ------------------------------------------------------------ branches
    def create_branch(self, spec: NewBranch) -> BranchRecord:
        return self.branches.create(spec)

    def discard_branch(self, branch_id: str, *, states: Sequence[str] = ("forking", "fork_failed")) -> bool:
        return self.branches.discard(branch_id, states=states)

    def head(self, branch_id: str) -> BranchRecord | None:
        return self.branches.head(branch_id)

    def set_state(
        self,
        branch_id: str,
        state: str,
        *,
        expected_state: str | None = None,
        head_verified: bool | None = None,
        dropped_ref: str | None = None,
    ) -> BranchRecord:
        return self.branches.set_state(
            branch_id,
            state,
            expected_state=expected_state,
            head_verified=head_verified,
            dropped_ref=dropped_ref,
        )

    # ------------------------------------------------------------ append
    def append(
        self,
        branch_id: str,
        lines: Sequence[StoredLine],
        *,
        expected_head_seq: int,
        epoch: int,
        now_ms: int | None = None,
        companions: Sequence[Companion] = (),
    ) -> Head:
        return self.appender.append(
            branch_id,
            lines,
            expected_head_seq=expected_head_seq,
            epoch=epoch,
            now_ms=now_ms,
            companions=companions,
        )

    # ------------------------------------------------------------ reads
    def read(
        self, branch_id: str, from_seq: int, to_seq: int, *, head_seq: int | None = None
    ) -> list[StoredLine]:
        """Lines from_seq..to_seq (inclusive; 0 = the header) of ONE segment, never past its
        head (reads the head if ``head_seq`` isn't given)."""
        if head_seq is None:
            head_seq = self.branches.require(branch_id).head_seq
        return self.lines.segment(branch_id, max(0, from_seq), min(to_seq, head_seq))

    def segments(self, branch_id: str, rec: BranchRecord | None = None) -> list[tuple[str, int, int]]:
        """The resolved chain's segments, root first: (branch_id, first event seq, last seq)."""
        return self.branches.segments(branch_id, rec)

    def resolved_chain(
        self, branch_id: str, after_seq: int = 0, limit: int | None = None, *, rec: BranchRecord | None = None
    ) -> list[tuple[str, StoredLine]]:
        """The branch's resolved chain as (segment branch_id, line), byte-exact, paged by seq
        (`Lines.page`: events with seq > after_seq, each segment's header with its segment)."""
        return self.lines.page(self.branches.segments(branch_id, rec), after_seq, limit)

    def export(self, branch_id: str) -> bytes:
        """Every line of the resolved chain + ``\\n``, then the Head checkpoint line + ``\\n``."""
        rec = self.branches.require(branch_id)
        parts = [line.raw + b"\n" for _, line in self.resolved_chain(branch_id, rec=rec)]
        parts.append(head_line(branch_id, rec.head_seq, rec.head_hash) + b"\n")
        return b"".join(parts)

    # ------------------------------------------------------------ leases
    def acquire_lease(
        self, branch_id: str, holder_id: str, *, ttl_ms: int, now_ms: int | None = None
    ) -> Lease:
        return self.leases.acquire(branch_id, holder_id, ttl_ms=ttl_ms, now_ms=now_ms)

    def renew(self, branch_id: str, lease: Lease, now_ms: int | None = None, ttl_ms: int = 30_000) -> Lease:
        return self.leases.renew(branch_id, lease, now_ms=now_ms, ttl_ms=ttl_ms)

    def release(self, branch_id: str, lease: Lease) -> bool:
        return self.leases.release(branch_id, lease)

    # Names symmetric with acquire_lease.
    renew_lease = renew
    release_lease = release
