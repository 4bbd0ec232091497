"""The event store: branches, their lines and heads, and leases, on DynamoDB (+ S3 for spills).

Layout
------
EventsTable, one item per stored line, PK ``branch_id`` / SK ``seq`` (the header is seq 0):
``line`` (B, the exact bytes without ``\\n``), ``hash``, ``event_id``, ``type``, ``type_version``,
``epoch``, ``critical``. A line longer than ``spill_threshold`` (~300 KB; a DynamoDB item holds
400 KB) is stored in the ArtifactStore by its sha256, and the item keeps ``spill_sha256`` +
``spill_len`` instead of ``line``; reads fetch it and verify length and hash.

StateTable, the head item ``BRANCH#<id>`` / ``HEAD`` (records.BranchRecord): thread, tenant,
parent link, state, ``head_seq``/``head_hash``/``head_epoch``, ``head_verified``, the lease
(``lease_holder``, ``lease_epoch``, ``lease_expires_at``) and a staging claim (``stage_*``).

Commit rule
-----------
**A line is committed iff its seq <= head_seq of its branch.** Readers never look above the
head: ``read`` clamps to head_seq and the resolved chain is bounded by each segment's end. So
items above the head are invisible, whatever they hold.

Appends
-------
``append`` writes a batch with TransactWriteItems. Each transaction holds the event Puts plus
one Update of the head item (always the last TransactItem) conditioned on::

    head_seq = :expected                        -- nobody appended since the caller's read
    AND lease_epoch <= :epoch  (absent = 0)     -- fencing: a newer lease holder wins
    AND head_epoch <= :first_line_epoch         -- epochs never decrease along the chain
    AND NOT state IN (read_only, corrupt, fork_failed)

A batch that fits in one transaction (<= 99 events + the head, < ~3.5 MB) commits in that one
transaction, which also advances head_seq/head_hash/head_epoch. Loss classification uses
ReturnValuesOnConditionCheckFailure=ALL_OLD on the head Update (re-reading the head if a
service doesn't return it): lease_epoch > epoch or head_epoch > the batch's epoch →
``stale_epoch``; head moved (or another writer is staging) → ``seq_conflict``.

Split batches (staging). A batch larger than one transaction is cut into chunks c1..cn:

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

Leases
------
``acquire_lease`` sets ``epoch = max(lease_epoch, head_epoch) + 1`` by compare-and-set on the
read lease_epoch, allowed when no holder is recorded, the lease expired, or the holder is the
caller; another holder's unexpired lease is ``branch_busy``. ``renew``/``release`` require the
same holder and epoch (``stale_epoch`` otherwise). Releasing keeps lease_epoch so later epochs
stay higher. Fencing is the ``lease_epoch <= :epoch`` condition on every append.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable, Sequence
from typing import Any

from botocore.exceptions import ClientError

from ..core.canonical import new_uuid7, sha256_hex
from ..core.errors import LogError
from ..core.lines import StoredLine, head_line
from .artifacts import ArtifactStore
from .records import (
    BRANCH_STATES,
    AlreadyExists,
    BranchRecord,
    Clock,
    Head,
    Lease,
    NotFound,
    SideConditionFailed,
    StateConflict,
    branch_key,
    thread_branch_item,
    thread_branch_key,
    thread_key,
    thread_meta_item,
    wall_ms,
)

SPILL_THRESHOLD = 300 * 1024
MAX_TXN_ITEMS = 100
CHUNK_BYTES = 3_500_000  # of the 4 MB TransactWriteItems limit, with room for attribute overhead
ITEM_OVERHEAD = 512
STAGE_TTL_MS = 120_000
LINE_MEDIA_TYPE = "application/x-ndjson"
NOT_WRITABLE = ("read_only", "corrupt", "fork_failed")
_PLACEHOLDER = re.compile(r"[#:][A-Za-z0-9_]+")
_RETRY_REASONS = {
    "TransactionConflict",
    "ThrottlingError",
    "ProvisionedThroughputExceeded",
    "RequestLimitExceeded",
}


def _S(v: str) -> dict[str, str]:
    return {"S": v}


def _N(v: int) -> dict[str, str]:
    return {"N": str(int(v))}


class _Expr:
    """Collects #name/:value placeholders for one expression-bearing request."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.values: dict[str, Any] = {}

    def n(self, name: str) -> str:
        self.names["#" + name] = name
        return "#" + name

    def v(self, value: Any) -> str:
        key = f":v{len(self.values)}"
        self.values[key] = value
        return key

    def apply(self, req: dict[str, Any]) -> dict[str, Any]:
        """Attach the placeholders the request's expressions use (DynamoDB refuses unused ones)."""
        text = " ".join(
            str(req.get(k, "")) for k in ("ConditionExpression", "UpdateExpression", "KeyConditionExpression")
        )
        used = set(_PLACEHOLDER.findall(text))
        names = {k: v for k, v in self.names.items() if k in used}
        values = {k: v for k, v in self.values.items() if k in used}
        if names:
            req["ExpressionAttributeNames"] = names
        if values:
            req["ExpressionAttributeValues"] = values
        return req


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
        self.ddb = ddb
        self.events_table = events_table
        self.state_table = state_table
        self.artifacts = artifacts
        self.clock = clock
        self.spill_threshold = spill_threshold
        self.stage_ttl_ms = stage_ttl_ms
        self.max_chunk_items = max(1, min(max_chunk_items, MAX_TXN_ITEMS - 1))
        self.max_chunk_bytes = max_chunk_bytes
        self.max_attempts = max_attempts
        # Test hook: called as hook(chunk_index) after each intermediate chunk commits, so a test
        # can simulate a crash mid-batch by raising from it.
        self.after_chunk_hook: Any = None

    # ------------------------------------------------------------ branches

    def create_branch(
        self,
        *,
        thread_id: str,
        tenant: str,
        branch_id: str,
        header: StoredLine,
        parent_branch_id: str | None = None,
        fork_at_seq: int | None = None,
        state: str = "ready",
        writer_impl: str = "threads-aws",
        head_verified: bool = True,
        head_hash: str | None = None,
        head_epoch: int = 0,
        create_thread: bool = False,
        now_ms: int | None = None,
        lines: Sequence[StoredLine] = (),
        extra_items: Sequence[dict[str, Any]] = (),
    ) -> BranchRecord:
        """Create a branch: its head item, its header line (seq 0) and its thread-index entry, in
        one transaction.

        ``lines`` (its first events) and ``extra_items`` (side records such as an idempotency
        receipt, as TransactWriteItems entries) commit in the same transaction, so a new thread
        is never visible without them. A failed side condition raises SideConditionFailed.

        With ``create_thread=True`` the thread's META item is created in the same transaction
        (this branch becomes its main branch); otherwise the thread must exist and belong to
        ``tenant``. A child (``parent_branch_id`` + ``fork_at_seq``) requires the parent to be a
        branch of the same thread whose head is at or past ``fork_at_seq``. The new head is at
        ``fork_at_seq or 0`` with ``head_hash`` (default: the header's hash; for a child the
        caller may pass the parent line's hash at fork_at_seq) and ``head_epoch`` (default 0; for
        a child, the max epoch of the parent's chain through fork_at_seq, so epochs keep rising
        across the fork and a lease on the child starts above them).
        """
        if state not in BRANCH_STATES:
            raise ValueError(f"unknown branch state {state!r}")
        if (parent_branch_id is None) != (fork_at_seq is None):
            raise ValueError("a child needs both parent_branch_id and fork_at_seq")
        if parent_branch_id is not None and create_thread:
            raise ValueError("a thread is created with its root branch")
        if header.seq != 0:
            raise ValueError("the header is seq 0")
        try:
            hv = json.loads(header.raw)
        except ValueError as exc:
            raise ValueError("header is not JSON") from exc
        if hv.get("branch_id") != branch_id or hv.get("thread_id") != thread_id:
            raise ValueError("header names another branch or thread")
        created_at = int(hv.get("created_at", now_ms if now_ms is not None else self.clock()))
        head_seq = fork_at_seq or 0
        for i, line in enumerate(lines):
            if line.seq != head_seq + 1 + i:
                raise ValueError(f"line {i} has seq {line.seq}, expected {head_seq + 1 + i}")
        if len(lines) + len(extra_items) + 6 > MAX_TXN_ITEMS:
            raise ValueError("too many initial lines and side items for one transaction")
        if lines:
            head_hash = lines[-1].hash
            head_epoch = max(head_epoch, *(line.epoch for line in lines))
        head: dict[str, Any] = {
            **branch_key(branch_id),
            "kind": _S("branch"),
            "branch_id": _S(branch_id),
            "thread_id": _S(thread_id),
            "tenant": _S(tenant),
            "state": _S(state),
            "head_seq": _N(lines[-1].seq if lines else head_seq),
            "head_hash": _S(head_hash or header.hash),
            "head_epoch": _N(head_epoch),
            "head_verified": {"BOOL": bool(head_verified)},
            "writer_impl": _S(writer_impl),
            "header_hash": _S(header.hash),
            "created_at": _N(created_at),
        }
        if parent_branch_id is not None:
            head["parent_branch_id"] = _S(parent_branch_id)
            head["fork_at_seq"] = _N(head_seq)
        items: list[dict[str, Any]] = [
            {
                "Put": {
                    "TableName": self.state_table,
                    "Item": head,
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
            {
                "Put": {
                    "TableName": self.events_table,
                    "Item": self._line_item(branch_id, header),
                    "ConditionExpression": "attribute_not_exists(#seq)",
                    "ExpressionAttributeNames": {"#seq": "seq"},
                }
            },
            {
                "Put": {
                    "TableName": self.state_table,
                    "Item": thread_branch_item(tenant, thread_id, branch_id, created_at),
                }
            },
        ]
        if create_thread:
            items.append(
                {
                    "Put": {
                        "TableName": self.state_table,
                        "Item": thread_meta_item(tenant, thread_id, branch_id, created_at),
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                }
            )
        else:
            e = _Expr()
            items.append(
                {
                    "ConditionCheck": e.apply(
                        {
                            "TableName": self.state_table,
                            "Key": thread_key(thread_id),
                            "ConditionExpression": (
                                f"attribute_exists(pk) AND {e.n('tenant')} = {e.v(_S(tenant))}"
                            ),
                        }
                    )
                }
            )
        if parent_branch_id is not None:
            e = _Expr()
            items.append(
                {
                    "ConditionCheck": e.apply(
                        {
                            "TableName": self.state_table,
                            "Key": branch_key(parent_branch_id),
                            "ConditionExpression": (
                                f"attribute_exists(pk) AND {e.n('thread_id')} = {e.v(_S(thread_id))}"
                                f" AND {e.n('head_seq')} >= {e.v(_N(head_seq))}"
                            ),
                        }
                    )
                }
            )
        base = len(items)
        items.extend(
            {
                "Put": {
                    "TableName": self.events_table,
                    "Item": self._line_item(branch_id, line),
                    "ConditionExpression": "attribute_not_exists(#seq)",
                    "ExpressionAttributeNames": {"#seq": "seq"},
                }
            }
            for line in lines
        )
        side = len(items)
        items.extend(extra_items)
        reasons = self._transact(items)
        if reasons is not None:
            failed = [i for i, r in enumerate(reasons) if r.get("Code") == "ConditionalCheckFailed"]
            side_failed = [i for i in failed if i >= side]
            if side_failed:
                raise SideConditionFailed(side_failed[0] - side, reasons[side_failed[0]].get("Item"))
            if any(base <= i < side for i in failed):
                raise AlreadyExists(f"branch {branch_id} has lines")
            if 0 in failed or 1 in failed:
                raise AlreadyExists(f"branch {branch_id} exists")
            if 3 in failed:
                if create_thread:
                    raise AlreadyExists(f"thread {thread_id} exists")
                raise NotFound(f"thread {thread_id} not found for this tenant")
            raise NotFound(
                f"parent branch {parent_branch_id} is not in thread {thread_id} at or past seq {head_seq}"
            )
        return BranchRecord.from_item(head)

    def discard_branch(self, branch_id: str, *, states: Sequence[str] = ("forking", "fork_failed")) -> bool:
        """Delete a branch that never became visible (a failed fork): its head item, its
        thread-index entry and its lines. Only in one of ``states`` (else StateConflict); False
        if it doesn't exist. The head goes first, in one transaction with the header and index
        entry, so a crash part-way leaves only unreachable line items behind."""
        rec = self.head(branch_id)
        if rec is None:
            return False
        e = _Expr()
        cond = f"{e.n('state')} IN ({', '.join(e.v(_S(x)) for x in states)})"
        items: list[dict[str, Any]] = [
            {
                "Delete": e.apply(
                    {
                        "TableName": self.state_table,
                        "Key": branch_key(branch_id),
                        "ConditionExpression": cond,
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                )
            },
            {"Delete": {"TableName": self.state_table, "Key": thread_branch_key(rec.thread_id, branch_id)}},
            {"Delete": {"TableName": self.events_table, "Key": {"branch_id": _S(branch_id), "seq": _N(0)}}},
        ]
        reasons = self._transact(items)
        if reasons is not None:
            old = reasons[0].get("Item")
            if old is None and self.head(branch_id) is None:
                return False
            state = old["state"]["S"] if old else "?"
            raise StateConflict(f"branch {branch_id} is {state}; only {', '.join(states)} can be discarded")
        keys = [
            {"branch_id": item["branch_id"], "seq": item["seq"]}
            for item in self._query(branch_id, 1, (1 << 53) - 1, projection="branch_id, seq")
        ]
        for i in range(0, len(keys), 25):
            request: dict[str, Any] = {
                self.events_table: [{"DeleteRequest": {"Key": k}} for k in keys[i : i + 25]]
            }
            while request:
                out = self.ddb.batch_write_item(RequestItems=request)
                request = out.get("UnprocessedItems") or {}
                if request:
                    time.sleep(0.05)
        return True

    def head(self, branch_id: str) -> BranchRecord | None:
        out = self.ddb.get_item(TableName=self.state_table, Key=branch_key(branch_id), ConsistentRead=True)
        item = out.get("Item")
        return BranchRecord.from_item(item) if item else None

    def _require(self, branch_id: str) -> BranchRecord:
        rec = self.head(branch_id)
        if rec is None:
            raise NotFound(f"branch {branch_id} not found")
        return rec

    def set_state(
        self,
        branch_id: str,
        state: str,
        *,
        expected_state: str | None = None,
        head_verified: bool | None = None,
        dropped_ref: str | None = None,
    ) -> BranchRecord:
        """Change a branch's state (conditional on the branch existing and, if given, on its
        current state being ``expected_state``: else StateConflict)."""
        if state not in BRANCH_STATES:
            raise ValueError(f"unknown branch state {state!r}")
        e = _Expr()
        sets = [f"{e.n('state')} = {e.v(_S(state))}"]
        if head_verified is not None:
            sets.append(f"{e.n('head_verified')} = {e.v({'BOOL': head_verified})}")
        if dropped_ref is not None:
            sets.append(f"{e.n('dropped_ref')} = {e.v(_S(dropped_ref))}")
        cond = "attribute_exists(pk)"
        if expected_state is not None:
            cond += f" AND {e.n('state')} = {e.v(_S(expected_state))}"
        try:
            out = self.ddb.update_item(
                **e.apply(
                    {
                        "TableName": self.state_table,
                        "Key": branch_key(branch_id),
                        "UpdateExpression": "SET " + ", ".join(sets),
                        "ConditionExpression": cond,
                        "ReturnValues": "ALL_NEW",
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                )
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            old: Any = exc.response.get("Item") or (
                self.ddb.get_item(
                    TableName=self.state_table, Key=branch_key(branch_id), ConsistentRead=True
                ).get("Item")
            )
            if not old:
                raise NotFound(f"branch {branch_id} not found") from exc
            raise StateConflict(f"branch {branch_id} is {old['state']['S']}, not {expected_state}") from exc
        return BranchRecord.from_item(out["Attributes"])

    # ------------------------------------------------------------ append

    def append(
        self,
        branch_id: str,
        lines: Sequence[StoredLine],
        *,
        expected_head_seq: int,
        epoch: int,
        now_ms: int | None = None,
        extra_items: Sequence[dict[str, Any]] = (),
    ) -> Head:
        """Commit `lines` (seqs expected_head_seq+1..) atomically; see the module docstring.

        ``extra_items`` (TransactWriteItems entries: receipts, approval or question rows) commit
        in the same transaction as the lines; the batch must then fit in one transaction. A
        failed side condition raises SideConditionFailed and writes nothing."""
        if not lines:
            raise ValueError("nothing to append")
        for i, line in enumerate(lines):
            if line.seq != expected_head_seq + 1 + i:
                raise ValueError(f"line {i} has seq {line.seq}, expected {expected_head_seq + 1 + i}")
            if line.epoch > epoch:
                raise ValueError(f"line seq {line.seq} has epoch {line.epoch} above the writer's {epoch}")
        now = self.clock() if now_ms is None else now_ms
        chunks = self._chunks(lines)
        if extra_items and (len(chunks) > 1 or len(lines) + len(extra_items) + 1 > MAX_TXN_ITEMS):
            raise ValueError("side items need the batch to fit in one transaction")
        ctx: dict[str, Any] = {
            "branch_id": branch_id,
            "expected": expected_head_seq,
            "epoch": epoch,
            "first_epoch": lines[0].epoch,
            "last": lines[-1],
            "head_epoch": max(line.epoch for line in lines),
            "now": now,
        }
        if len(chunks) == 1:
            self._commit(chunks[0], mode="single", token=None, extra=extra_items, **ctx)
        else:
            token = new_uuid7()
            for i, chunk in enumerate(chunks):
                mode = "first" if i == 0 else ("final" if i == len(chunks) - 1 else "middle")
                self._commit(chunk, mode=mode, token=token, **ctx)
                if mode != "final" and self.after_chunk_hook is not None:
                    self.after_chunk_hook(i)
        return Head(branch_id, lines[-1].seq, lines[-1].hash, ctx["head_epoch"])

    def _chunks(self, lines: Sequence[StoredLine]) -> list[list[StoredLine]]:
        chunks: list[list[StoredLine]] = []
        cur: list[StoredLine] = []
        size = 0
        for line in lines:
            cost = ITEM_OVERHEAD + (len(line.raw) if len(line.raw) <= self.spill_threshold else 0)
            if cur and (len(cur) >= self.max_chunk_items or size + cost > self.max_chunk_bytes):
                chunks.append(cur)
                cur, size = [], 0
            cur.append(line)
            size += cost
        chunks.append(cur)
        return chunks

    def _commit(
        self,
        chunk: list[StoredLine],
        *,
        mode: str,
        token: str | None,
        branch_id: str,
        expected: int,
        epoch: int,
        first_epoch: int,
        last: StoredLine,
        head_epoch: int,
        now: int,
        extra: Sequence[dict[str, Any]] = (),
    ) -> None:
        stage = token if mode in ("first", "middle") else None
        items: list[dict[str, Any]] = [
            {
                "Put": {
                    "TableName": self.events_table,
                    "Item": self._line_item(branch_id, line, stage=stage),
                    "ConditionExpression": "attribute_not_exists(#seq) OR attribute_exists(#stage)",
                    "ExpressionAttributeNames": {"#seq": "seq", "#stage": "stage"},
                }
            }
            for line in chunk
        ]
        side = len(items)
        items.extend(extra)
        e = _Expr()
        hs, le, he, st = e.n("head_seq"), e.n("lease_epoch"), e.n("head_epoch"), e.n("state")
        tok, texp, tep, tseq = (
            e.n("stage_token"),
            e.n("stage_expires_at"),
            e.n("stage_epoch"),
            e.n("stage_seq"),
        )
        v_epoch = e.v(_N(epoch))
        cond = [
            f"{hs} = {e.v(_N(expected))}",
            f"(attribute_not_exists({le}) OR {le} <= {v_epoch})",
            f"(attribute_not_exists({he}) OR {he} <= {e.v(_N(first_epoch))})",
            f"NOT ({st} IN ({', '.join(e.v(_S(s)) for s in NOT_WRITABLE)}))",
        ]
        v_now = e.v(_N(now))
        if mode in ("single", "first"):
            free = f"attribute_not_exists({tok}) OR {texp} < {v_now} OR {tep} < {v_epoch}"
            if mode == "first":
                free += f" OR {tok} = {e.v(_S(token or ''))}"
            cond.append(f"({free})")
        else:
            cond.append(f"{tok} = {e.v(_S(token or ''))}")
        if mode in ("single", "final"):
            update = (
                f"SET {hs} = {e.v(_N(last.seq))}, {e.n('head_hash')} = {e.v(_S(last.hash))},"
                f" {he} = {e.v(_N(head_epoch))}, {e.n('updated_at')} = {v_now}"
                f" REMOVE {tok}, {texp}, {tep}, {tseq}"
            )
        else:
            sets = [f"{texp} = {e.v(_N(now + self.stage_ttl_ms))}", f"{tseq} = {e.v(_N(chunk[-1].seq))}"]
            if mode == "first":
                sets += [f"{tok} = {e.v(_S(token or ''))}", f"{tep} = {v_epoch}"]
            update = "SET " + ", ".join(sets)
        items.append(
            {
                "Update": e.apply(
                    {
                        "TableName": self.state_table,
                        "Key": branch_key(branch_id),
                        "UpdateExpression": update,
                        "ConditionExpression": " AND ".join(cond),
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                )
            }
        )
        reasons = self._transact(items)
        if reasons is None:
            return
        at = chunk[0].seq
        head_reason = reasons[-1] if len(reasons) == len(items) else {}
        if head_reason.get("Code") != "ConditionalCheckFailed":
            for i in range(side, side + len(extra)):
                if i < len(reasons) and reasons[i].get("Code") == "ConditionalCheckFailed":
                    raise SideConditionFailed(i - side, reasons[i].get("Item"))
        if head_reason.get("Code") != "ConditionalCheckFailed":
            # Only an event item's condition failed: a committed-looking item above the head.
            raise LogError("seq_conflict", at, "an event item already exists at a seq above the head")
        old = head_reason.get("Item")
        if old is None:
            got = self.ddb.get_item(
                TableName=self.state_table, Key=branch_key(branch_id), ConsistentRead=True
            )
            old = got.get("Item")
        if not old:
            raise NotFound(f"branch {branch_id} not found")
        rec = BranchRecord.from_item(old)
        if rec.lease_epoch > epoch:
            raise LogError("stale_epoch", at, f"lease epoch {rec.lease_epoch} is above the writer's {epoch}")
        if rec.head_epoch > first_epoch:
            raise LogError(
                "stale_epoch", at, f"head epoch {rec.head_epoch} is above the batch's {first_epoch}"
            )
        if rec.state in NOT_WRITABLE:
            if rec.state == "read_only" and rec.writer_impl != "threads-aws":
                raise LogError("writer_mismatch", 0, f"branch written by {rec.writer_impl}")
            if rec.state == "corrupt":
                raise LogError("log_corrupt", at, "branch is corrupt")
            raise LogError("branch_not_runnable", at, f"branch is {rec.state}")
        if rec.head_seq != expected:
            raise LogError("seq_conflict", at, f"head moved to {rec.head_seq}, expected {expected}")
        if mode in ("middle", "final"):
            raise LogError("seq_conflict", at, "the staging claim of this batch was taken over")
        raise LogError("seq_conflict", at, "another writer is committing a batch on this branch")

    def _transact(self, items: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        """Run one transaction. None on success, the CancellationReasons on a condition failure."""
        delay = 0.02
        for attempt in range(self.max_attempts):
            try:
                self.ddb.transact_write_items(TransactItems=items, ClientRequestToken=new_uuid7())
                return None
            except ClientError as exc:
                code = exc.response.get("Error", {}).get("Code")
                if code == "TransactionCanceledException":
                    reasons: list[dict[str, Any]] = list(exc.response.get("CancellationReasons") or [])  # type: ignore[arg-type]
                    codes = {r.get("Code") for r in reasons}
                    if "ConditionalCheckFailed" in codes:
                        return reasons
                    if codes & _RETRY_REASONS and attempt + 1 < self.max_attempts:
                        time.sleep(delay)
                        delay *= 2
                        continue
                raise
        raise AssertionError("unreachable")

    def _line_item(self, branch_id: str, line: StoredLine, stage: str | None = None) -> dict[str, Any]:
        item: dict[str, Any] = {
            "branch_id": _S(branch_id),
            "seq": _N(line.seq),
            "hash": _S(line.hash),
            "epoch": _N(line.epoch),
            "critical": {"BOOL": bool(line.critical)},
        }
        if line.event_id is not None:
            item["event_id"] = _S(line.event_id)
        if line.type is not None:
            item["type"] = _S(line.type)
        if line.event is not None and isinstance(line.event.get("type_version"), int):
            item["type_version"] = _N(line.event["type_version"])
        if len(line.raw) > self.spill_threshold:
            if self.artifacts is None:
                raise ValueError(f"line seq {line.seq} needs a spill but the store has no ArtifactStore")
            ref = self.artifacts.put(line.raw, LINE_MEDIA_TYPE)
            item["spill_sha256"] = _S(ref["sha256"])
            item["spill_len"] = _N(ref["bytes"])
        else:
            item["line"] = {"B": line.raw}
        if stage is not None:
            item["stage"] = _S(stage)
        return item

    # ------------------------------------------------------------ reads

    def _decode(self, item: dict[str, Any]) -> StoredLine:
        seq = int(item["seq"]["N"])
        if "line" in item:
            raw = bytes(item["line"]["B"])
        else:
            if self.artifacts is None:
                raise ValueError("a spilled line needs an ArtifactStore")
            raw = self.artifacts.get(item["spill_sha256"]["S"], int(item["spill_len"]["N"]))
        return StoredLine(
            seq=seq,
            raw=raw,
            hash=sha256_hex(raw),
            event_id=item["event_id"]["S"] if "event_id" in item else None,
            type=item["type"]["S"] if "type" in item else None,
            epoch=int(item["epoch"]["N"]) if "epoch" in item else 0,
            critical=bool(item["critical"]["BOOL"]) if "critical" in item else True,
        )

    def _query(
        self, branch_id: str, lo: int, hi: int, limit: int | None = None, projection: str | None = None
    ) -> Iterable[dict[str, Any]]:
        if lo > hi:
            return
        kwargs: dict[str, Any] = {
            "TableName": self.events_table,
            "KeyConditionExpression": "#b = :b AND #s BETWEEN :lo AND :hi",
            "ExpressionAttributeNames": {"#b": "branch_id", "#s": "seq"},
            "ExpressionAttributeValues": {":b": _S(branch_id), ":lo": _N(lo), ":hi": _N(hi)},
            "ConsistentRead": True,
        }
        if projection:
            kwargs["ProjectionExpression"] = projection.replace("branch_id", "#b").replace("seq", "#s")
        left = limit
        while True:
            if left is not None:
                kwargs["Limit"] = max(1, left)
            out = self.ddb.query(**kwargs)
            for item in out.get("Items", []):
                yield item
                if left is not None:
                    left -= 1
                    if left <= 0:
                        return
            lek = out.get("LastEvaluatedKey")
            if not lek:
                return
            kwargs["ExclusiveStartKey"] = lek

    def _segment(self, branch_id: str, lo: int, hi: int) -> list[StoredLine]:
        """Lines lo..hi of one segment, all present (a gap is log_corrupt)."""
        out = [self._decode(item) for item in self._query(branch_id, lo, hi)]
        for i, line in enumerate(out):
            if line.seq != lo + i:
                raise LogError("log_corrupt", lo + i, f"line missing from branch {branch_id}")
        if lo <= hi and len(out) != hi - lo + 1:
            raise LogError("log_corrupt", lo + len(out), f"line missing from branch {branch_id}")
        return out

    def read(
        self, branch_id: str, from_seq: int, to_seq: int, *, head_seq: int | None = None
    ) -> list[StoredLine]:
        """Lines from_seq..to_seq (inclusive; 0 = the header) of ONE segment, never past its
        head (reads the head if ``head_seq`` isn't given)."""
        if head_seq is None:
            head_seq = self._require(branch_id).head_seq
        return self._segment(branch_id, max(0, from_seq), min(to_seq, head_seq))

    def segments(self, branch_id: str, rec: BranchRecord | None = None) -> list[tuple[str, int, int]]:
        """The resolved chain's segments, root first: (branch_id, first event seq, last seq)."""
        rec = rec or self._require(branch_id)
        out: list[tuple[str, int, int]] = []
        upper = rec.head_seq
        seen: set[str] = set()
        while True:
            if rec.branch_id in seen:
                raise LogError("log_corrupt", None, f"branch ancestry loops at {rec.branch_id}")
            seen.add(rec.branch_id)
            out.append((rec.branch_id, (rec.fork_at_seq or 0) + 1, upper))
            if rec.parent_branch_id is None:
                break
            upper = rec.fork_at_seq or 0
            parent = self.head(rec.parent_branch_id)
            if parent is None:
                raise LogError("log_corrupt", upper, f"parent branch {rec.parent_branch_id} is missing")
            rec = parent
        out.reverse()
        return out

    def resolved_chain(
        self, branch_id: str, after_seq: int = 0, limit: int | None = None, *, rec: BranchRecord | None = None
    ) -> list[tuple[str, StoredLine]]:
        """The branch's resolved chain as (segment branch_id, line), byte-exact.

        Paged by seq: the page holds the events with seq > after_seq (at most ``limit`` of them),
        and a segment's header rides with its segment: it is included iff after_seq is below the
        segment's first event seq (``after_seq=0`` starts with the root header). Headers don't
        count toward ``limit``; a page never ends with a header that precedes further lines of the
        page, so the next page (after_seq = last seq returned) neither skips nor repeats one.
        """
        out: list[tuple[str, StoredLine]] = []
        left = limit
        for seg, lo, hi in self.segments(branch_id, rec):
            if left is not None and left <= 0:
                break
            want_header = after_seq < lo
            start = max(lo, after_seq + 1)
            if not want_header and start > hi:
                continue
            end = hi if left is None else min(hi, start + left - 1)
            q_lo = 0 if want_header else start
            items = [self._decode(item) for item in self._query(seg, q_lo, end)]
            expect = ([0] if want_header else []) + list(range(start, end + 1))
            got = [line.seq for line in items]
            if got != expect:
                missing = next((s for i, s in enumerate(expect) if i >= len(got) or got[i] != s), None)
                raise LogError("log_corrupt", missing, f"line missing from branch {seg}")
            out.extend((seg, line) for line in items)
            if left is not None:
                left -= max(0, end - start + 1)
        return out

    def export(self, branch_id: str) -> bytes:
        """Every line of the resolved chain + ``\\n``, then the Head checkpoint line + ``\\n``."""
        rec = self._require(branch_id)
        parts = [line.raw + b"\n" for _, line in self.resolved_chain(branch_id, rec=rec)]
        parts.append(head_line(branch_id, rec.head_seq, rec.head_hash) + b"\n")
        return b"".join(parts)

    # ------------------------------------------------------------ leases

    def acquire_lease(
        self, branch_id: str, holder_id: str, *, ttl_ms: int, now_ms: int | None = None
    ) -> Lease:
        """Take the branch's lease with a new epoch (see module docstring); branch_busy if
        another holder's lease is unexpired."""
        now = self.clock() if now_ms is None else now_ms
        for _ in range(self.max_attempts):
            rec = self._require(branch_id)
            if rec.lease_holder is not None and rec.lease_holder != holder_id and rec.lease_expires_at > now:
                raise LogError("branch_busy", None, f"leased by another holder until {rec.lease_expires_at}")
            epoch = max(rec.lease_epoch, rec.head_epoch) + 1
            expires = now + ttl_ms
            e = _Expr()
            le, lh, lx, he = (
                e.n("lease_epoch"),
                e.n("lease_holder"),
                e.n("lease_expires_at"),
                e.n("head_epoch"),
            )
            cas = f"{le} = {e.v(_N(rec.lease_epoch))}" if rec.lease_epoch else f"attribute_not_exists({le})"
            cond = (
                f"attribute_exists(pk) AND {cas} AND {he} = {e.v(_N(rec.head_epoch))}"
                f" AND (attribute_not_exists({lh}) OR {lh} = {e.v(_S(holder_id))} OR {lx} <= {e.v(_N(now))})"
            )
            try:
                self.ddb.update_item(
                    **e.apply(
                        {
                            "TableName": self.state_table,
                            "Key": branch_key(branch_id),
                            "UpdateExpression": (
                                f"SET {le} = {e.v(_N(epoch))}, {lh} = {e.v(_S(holder_id))},"
                                f" {lx} = {e.v(_N(expires))}"
                            ),
                            "ConditionExpression": cond,
                        }
                    )
                )
            except ClientError as exc:
                if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                    raise
                continue  # someone moved the lease or the head between our read and write: re-read
            return Lease(epoch=epoch, expires_at=expires, holder_id=holder_id)
        raise LogError("branch_busy", None, "lease contended")

    def _lease_update(self, branch_id: str, lease: Lease, update: str, values: dict[str, Any]) -> bool:
        e = _Expr()
        names = {
            "#lease_epoch": "lease_epoch",
            "#lease_holder": "lease_holder",
            "#lease_expires_at": "lease_expires_at",
        }
        e.names.update(names)
        e.values.update(values)
        cond = f"#lease_holder = {e.v(_S(lease.holder_id))} AND #lease_epoch = {e.v(_N(lease.epoch))}"
        try:
            self.ddb.update_item(
                **e.apply(
                    {
                        "TableName": self.state_table,
                        "Key": branch_key(branch_id),
                        "UpdateExpression": update,
                        "ConditionExpression": cond,
                    }
                )
            )
            return True
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            return False

    def renew(self, branch_id: str, lease: Lease, now_ms: int | None = None, ttl_ms: int = 30_000) -> Lease:
        """Extend the lease; stale_epoch if it is no longer this holder's at this epoch."""
        now = self.clock() if now_ms is None else now_ms
        expires = now + ttl_ms
        ok = self._lease_update(
            branch_id,
            lease,
            "SET #lease_expires_at = :exp",
            {":exp": _N(expires)},
        )
        if not ok:
            raise LogError("stale_epoch", None, "the lease was taken over or released")
        return Lease(epoch=lease.epoch, expires_at=expires, holder_id=lease.holder_id)

    def release(self, branch_id: str, lease: Lease) -> bool:
        """Give the lease up (keeps lease_epoch). False if it wasn't ours any more."""
        return self._lease_update(
            branch_id, lease, "REMOVE #lease_holder SET #lease_expires_at = :zero", {":zero": _N(0)}
        )

    # Names symmetric with acquire_lease.
    renew_lease = renew
    release_lease = release
