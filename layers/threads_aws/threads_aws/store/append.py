"""The fenced append: a batch of lines committed after a branch's head, atomically, or not at all.

Commit rule
-----------
**A line is committed iff its seq <= head_seq of its branch.** Readers never look above the
head (`store.lines`), so items above it are invisible, whatever they hold.

One transaction
---------------
``append`` writes a batch with TransactWriteItems. Each transaction holds the event Puts, any
companions (side rows that must commit with these lines) and one Update of the head item,
conditioned on::

    head_seq = :expected                        -- nobody appended since the caller's read
    AND lease_epoch <= :epoch  (absent = 0)     -- fencing: a newer lease holder wins
    AND head_epoch <= :first_line_epoch         -- epochs never decrease along the chain
    AND NOT state IN (read_only, corrupt, fork_failed)

A batch that fits in one transaction (<= 99 events + the head, < ~3.5 MB) commits in that one
transaction, which also advances head_seq/head_hash/head_epoch. Failures are decoded by tag
(`store.dynamo.transact`): a failed companion (head condition held) is CompanionFailed; a failed
head condition is classified from the stored head (ReturnValuesOnConditionCheckFailure=ALL_OLD,
re-read if a service doesn't return it): lease_epoch > epoch or head_epoch > the batch's epoch →
``stale_epoch``; head moved (or another writer is staging) → ``seq_conflict``.

Split batches (staging)
-----------------------
A batch larger than one transaction is cut into chunks c1..cn (companions need one transaction):

- c1 (and every middle chunk) Puts its events *above the unchanged head*, each item tagged
  ``stage=<token>``, and its head Update does not move the head: it claims/renews a staging
  token (``stage_token``, ``stage_expires_at = now + stage_ttl_ms``, ``stage_epoch``,
  ``stage_seq``). c1 takes the claim if there is none, if it expired, or if it belongs to a
  lower epoch (a new lease holder preempts a crashed/stale writer's staging at once); middle
  chunks require ``stage_token = :token``. Two writers therefore cannot interleave chunks.
- cn Puts the last events and, in the same transaction, requires ``stage_token = :token``,
  advances the head to the batch's last line and REMOVEs the claim. The whole batch becomes
  visible at that instant, or never.

A one-transaction append must find no live claim of the same or a higher epoch, so it cannot
commit underneath an in-flight split batch. A writer that crashes mid-batch leaves staged items
above the head (invisible) and a claim that expires (or is preempted by a higher epoch). Every
event Put is conditioned ``attribute_not_exists(seq) OR attribute_exists(stage)``: an item may
be overwritten only if it is staged garbage. The head condition in the same transaction is what
really guarantees the overwritten item is above the head (committed lines can keep their
``stage`` tag, but the head condition makes them unreachable for overwrites).

Intermediate chunks' spills are uploaded before their transaction; orphaned artifacts are
harmless (content-addressed). Non-conditional failures (network errors, uncertain outcomes) are
re-raised as they are: the caller must treat its in-memory head as untrusted (writer_poisoned)
and reload. Each transaction carries a ClientRequestToken so botocore's own retries are
idempotent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from ..core.canonical import new_uuid7
from ..core.errors import LogError
from ..core.lines import StoredLine
from .branches import NOT_WRITABLE, Branches, branch_key
from .dynamo import (
    MAX_TXN_ITEMS,
    Expr,
    Failed,
    N,
    S,
    Tagged,
    companion_items,
    raise_companion,
    transact,
)
from .lines import Lines
from .records import Clock, Companion, Head, Item

CHUNK_BYTES = 3_500_000  # of the 4 MB TransactWriteItems limit, with room for attribute overhead
ITEM_OVERHEAD = 512
STAGE_TTL_MS = 120_000


@dataclass(frozen=True, slots=True)
class _Batch:
    """What every chunk's head condition and update need of the whole batch."""

    branch_id: str
    expected: int  # head_seq the caller read
    epoch: int  # the writer's (lease) epoch
    first_epoch: int  # epoch of the batch's first line
    last: StoredLine
    head_epoch: int  # max epoch of the batch's lines
    now: int
    token: str | None  # the staging token of a split batch


class Appender:
    def __init__(
        self,
        ddb: Any,
        state_table: str,
        lines: Lines,
        branches: Branches,
        *,
        clock: Clock,
        stage_ttl_ms: int = STAGE_TTL_MS,
        max_chunk_items: int = MAX_TXN_ITEMS - 1,
        max_chunk_bytes: int = CHUNK_BYTES,
        max_attempts: int = 6,
    ) -> None:
        self.ddb = ddb
        self.table = state_table
        self.lines = lines
        self.branches = branches
        self.clock = clock
        self.stage_ttl_ms = stage_ttl_ms
        self.max_chunk_items = max(1, min(max_chunk_items, MAX_TXN_ITEMS - 1))
        self.max_chunk_bytes = max_chunk_bytes
        self.max_attempts = max_attempts
        # Test hook: called as hook(chunk_index) after each intermediate chunk commits, so a test
        # can simulate a crash mid-batch by raising from it.
        self.after_chunk_hook: Callable[[int], None] | None = None

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
        """Commit `lines` (seqs expected_head_seq+1..) atomically; see the module docstring.
        `companions` commit in the same transaction; the batch must then fit in one."""
        if not lines:
            raise ValueError("nothing to append")
        for i, line in enumerate(lines):
            if line.seq != expected_head_seq + 1 + i:
                raise ValueError(f"line {i} has seq {line.seq}, expected {expected_head_seq + 1 + i}")
            if line.epoch > epoch:
                raise ValueError(f"line seq {line.seq} has epoch {line.epoch} above the writer's {epoch}")
        chunks = self._chunks(lines)
        if companions and (len(chunks) > 1 or len(lines) + len(companions) + 1 > MAX_TXN_ITEMS):
            raise ValueError("companions need the batch to fit in one transaction")
        batch = _Batch(
            branch_id=branch_id,
            expected=expected_head_seq,
            epoch=epoch,
            first_epoch=lines[0].epoch,
            last=lines[-1],
            head_epoch=max(line.epoch for line in lines),
            now=self.clock() if now_ms is None else now_ms,
            token=None if len(chunks) == 1 else new_uuid7(),
        )
        if len(chunks) == 1:
            self._commit(batch, chunks[0], "single", companions)
        else:
            for i, chunk in enumerate(chunks):
                mode = "first" if i == 0 else ("final" if i == len(chunks) - 1 else "middle")
                self._commit(batch, chunk, mode)
                if mode != "final" and self.after_chunk_hook is not None:
                    self.after_chunk_hook(i)
        return Head(branch_id, batch.last.seq, batch.last.hash, batch.head_epoch)

    def _chunks(self, lines: Sequence[StoredLine]) -> list[list[StoredLine]]:
        chunks: list[list[StoredLine]] = []
        cur: list[StoredLine] = []
        size = 0
        for line in lines:
            cost = ITEM_OVERHEAD + (0 if self.lines.spills(line) else len(line.raw))
            if cur and (len(cur) >= self.max_chunk_items or size + cost > self.max_chunk_bytes):
                chunks.append(cur)
                cur, size = [], 0
            cur.append(line)
            size += cost
        chunks.append(cur)
        return chunks

    def _commit(
        self, batch: _Batch, chunk: list[StoredLine], mode: str, companions: Sequence[Companion] = ()
    ) -> None:
        stage = batch.token if mode in ("first", "middle") else None
        items = [
            Tagged(f"line:{line.seq}", self.lines.put_above_head(batch.branch_id, line, stage))
            for line in chunk
        ]
        items.extend(companion_items(companions, ("head",)))
        items.append(Tagged("head", self._head_update(batch, chunk, mode)))
        failed = transact(self.ddb, items, max_attempts=self.max_attempts)
        if failed is not None:
            self._lost(batch, chunk[0].seq, mode, failed, companions)

    def _head_update(self, batch: _Batch, chunk: list[StoredLine], mode: str) -> Item:
        """The head item's conditional Update (the fence) for one chunk."""
        e = Expr()
        hs, le, he, st = e.n("head_seq"), e.n("lease_epoch"), e.n("head_epoch"), e.n("state")
        tok, texp, tep, tseq = (
            e.n("stage_token"),
            e.n("stage_expires_at"),
            e.n("stage_epoch"),
            e.n("stage_seq"),
        )
        v_epoch, v_now = e.v(N(batch.epoch)), e.v(N(batch.now))
        cond = [
            f"{hs} = {e.v(N(batch.expected))}",
            f"(attribute_not_exists({le}) OR {le} <= {v_epoch})",
            f"(attribute_not_exists({he}) OR {he} <= {e.v(N(batch.first_epoch))})",
            f"NOT ({st} IN ({', '.join(e.v(S(s)) for s in NOT_WRITABLE)}))",
        ]
        v_token = e.v(S(batch.token or ""))
        if mode in ("single", "first"):
            free = f"attribute_not_exists({tok}) OR {texp} < {v_now} OR {tep} < {v_epoch}"
            if mode == "first":
                free += f" OR {tok} = {v_token}"
            cond.append(f"({free})")
        else:
            cond.append(f"{tok} = {v_token}")
        if mode in ("single", "final"):
            last = batch.last
            update = (
                f"SET {hs} = {e.v(N(last.seq))}, {e.n('head_hash')} = {e.v(S(last.hash))},"
                f" {he} = {e.v(N(batch.head_epoch))}, {e.n('updated_at')} = {v_now}"
                f" REMOVE {tok}, {texp}, {tep}, {tseq}"
            )
        else:
            sets = [f"{texp} = {e.v(N(batch.now + self.stage_ttl_ms))}", f"{tseq} = {e.v(N(chunk[-1].seq))}"]
            if mode == "first":
                sets += [f"{tok} = {v_token}", f"{tep} = {v_epoch}"]
            update = "SET " + ", ".join(sets)
        request = {
            "TableName": self.table,
            "Key": branch_key(batch.branch_id),
            "UpdateExpression": update,
            "ConditionExpression": " AND ".join(cond),
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        return {"Update": e.apply(request)}

    def _lost(
        self, batch: _Batch, at: int, mode: str, failed: Failed, companions: Sequence[Companion]
    ) -> NoReturn:
        """Why a chunk's transaction was cancelled, as the caller's error."""
        if "head" not in failed:
            raise_companion(failed, companions)
            # Only an event item's condition failed: a committed-looking item above the head.
            raise LogError("seq_conflict", at, "an event item already exists at a seq above the head")
        rec = self.branches.stored_or_read(batch.branch_id, failed.item("head"))
        if rec.lease_epoch > batch.epoch:
            raise LogError(
                "stale_epoch", at, f"lease epoch {rec.lease_epoch} is above the writer's {batch.epoch}"
            )
        if rec.head_epoch > batch.first_epoch:
            raise LogError(
                "stale_epoch", at, f"head epoch {rec.head_epoch} is above the batch's {batch.first_epoch}"
            )
        if rec.state in NOT_WRITABLE:
            if rec.state == "read_only" and rec.writer_impl != "threads-aws":
                raise LogError("writer_mismatch", 0, f"branch written by {rec.writer_impl}")
            if rec.state == "corrupt":
                raise LogError("log_corrupt", at, "branch is corrupt")
            raise LogError("branch_not_runnable", at, f"branch is {rec.state}")
        if rec.head_seq != batch.expected:
            raise LogError("seq_conflict", at, f"head moved to {rec.head_seq}, expected {batch.expected}")
        if mode in ("middle", "final"):
            raise LogError("seq_conflict", at, "the staging claim of this batch was taken over")
        raise LogError("seq_conflict", at, "another writer is committing a batch on this branch")
