"""Branch head records: one StateTable item per branch, ``BRANCH#<branch_id>`` / ``HEAD``.

The head item holds the thread, tenant, parent link (``parent_branch_id``, ``fork_at_seq``), the
branch state, ``head_seq``/``head_hash``/``head_epoch`` (the commit rule of `store.append`: a line
is committed iff its seq <= head_seq), ``head_verified``, the lease (``lease_holder``,
``lease_epoch``, ``lease_expires_at``; `store.leases`) and a staging claim (``stage_*``;
`store.append`).

Creating a branch is one transaction: the head item, its header line (seq 0), its thread-index
membership (and, for a new thread, the thread's META item), a condition on the parent for a
child, its first lines and any companions, so a new thread is never visible without them.
Discarding one (a failed fork) deletes the head first, with the header and membership, so a crash
part-way leaves only unreachable line items behind.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from ..core.errors import LogError
from ..core.lines import StoredLine
from . import index
from .dynamo import (
    MAX_TXN_ITEMS,
    Expr,
    N,
    S,
    Tagged,
    b_of,
    companion_items,
    condition_failed,
    n_of,
    raise_companion,
    s_of,
    transact,
)
from .lines import Lines
from .records import (
    AlreadyExists,
    Clock,
    Companion,
    Head,
    Item,
    Lease,
    NotFound,
    StateConflict,
)

BRANCH_STATES = (
    "forking",
    "ready",
    "inspection_only",
    "read_only",
    "corrupt",
    "fork_failed",
)
NOT_WRITABLE = ("read_only", "corrupt", "fork_failed")
_CREATE_TAGS = ("head", "header", "membership", "thread", "parent")


def branch_key(branch_id: str) -> Item:
    return {"pk": {"S": f"BRANCH#{branch_id}"}, "sk": {"S": "HEAD"}}


@dataclass(frozen=True, slots=True)
class BranchRecord:
    branch_id: str
    thread_id: str
    tenant: str
    parent_branch_id: str | None
    fork_at_seq: int | None
    state: str
    head_seq: int
    head_hash: str
    head_epoch: int
    head_verified: bool
    writer_impl: str
    header_hash: str
    created_at: int
    lease_holder: str | None = None
    lease_epoch: int = 0
    lease_expires_at: int = 0
    stage_token: str | None = None
    stage_expires_at: int = 0
    stage_epoch: int = 0
    dropped_ref: str | None = None  # canonical JSON of an ArtifactRef (torn tail)
    updated_at: int = 0  # ms of the last append (store.append sets it), else created_at
    stubs_sha256: str | None = None  # a stub-mode child's recorded stubs (artifact; `sandbox.stubs`)

    @property
    def mode(self) -> str:
        """BranchInfo `mode`: `stub` (nothing mediated goes live) iff the fork recorded stubs."""
        return "live" if self.stubs_sha256 is None else "stub"

    @property
    def lease(self) -> Lease | None:
        if self.lease_holder is None:
            return None
        return Lease(self.lease_epoch, self.lease_expires_at, self.lease_holder)

    def as_head(self) -> Head:
        return Head(self.branch_id, self.head_seq, self.head_hash, self.head_epoch)

    @classmethod
    def from_item(cls, item: Item) -> BranchRecord:
        return cls(
            branch_id=item["branch_id"]["S"],
            thread_id=item["thread_id"]["S"],
            tenant=item["tenant"]["S"],
            parent_branch_id=s_of(item, "parent_branch_id"),
            fork_at_seq=n_of(item, "fork_at_seq"),
            state=item["state"]["S"],
            head_seq=int(item["head_seq"]["N"]),
            head_hash=item["head_hash"]["S"],
            head_epoch=n_of(item, "head_epoch") or 0,
            head_verified=b_of(item, "head_verified", True),
            writer_impl=s_of(item, "writer_impl") or "threads-aws",
            header_hash=s_of(item, "header_hash") or "",
            created_at=n_of(item, "created_at") or 0,
            lease_holder=s_of(item, "lease_holder"),
            lease_epoch=n_of(item, "lease_epoch") or 0,
            lease_expires_at=n_of(item, "lease_expires_at") or 0,
            stage_token=s_of(item, "stage_token"),
            stage_expires_at=n_of(item, "stage_expires_at") or 0,
            stage_epoch=n_of(item, "stage_epoch") or 0,
            dropped_ref=s_of(item, "dropped_ref"),
            updated_at=n_of(item, "updated_at") or n_of(item, "created_at") or 0,
            stubs_sha256=s_of(item, "stubs_sha256"),
        )

    @classmethod
    def new(cls, spec: NewBranch, *, created_at: int) -> BranchRecord:
        """The record `create` writes for `spec` (also the record of a view built before the
        branch exists: the host builds a new thread's first lines, then creates it with them)."""
        base = spec.fork_at_seq or 0
        lines = spec.lines
        return cls(
            branch_id=spec.branch_id,
            thread_id=spec.thread_id,
            tenant=spec.tenant,
            parent_branch_id=spec.parent_branch_id,
            fork_at_seq=base if spec.parent_branch_id is not None else None,
            state=spec.state,
            head_seq=lines[-1].seq if lines else base,
            head_hash=lines[-1].hash if lines else (spec.head_hash or spec.header.hash),
            head_epoch=max(spec.head_epoch, *(line.epoch for line in lines)) if lines else spec.head_epoch,
            head_verified=spec.head_verified,
            writer_impl=spec.writer_impl,
            header_hash=spec.header.hash,
            created_at=created_at,
            updated_at=created_at,
            stubs_sha256=spec.stubs_sha256,
        )


@dataclass(frozen=True, slots=True)
class NewBranch:
    """What `Branches.create` writes.

    A root branch of a new thread sets ``create_thread`` (the thread's META item is created in the
    same transaction; this branch becomes its main branch); otherwise the thread must exist and
    belong to ``tenant``. A child sets ``parent_branch_id`` + ``fork_at_seq``: the parent must be
    a branch of the same thread whose head is at or past ``fork_at_seq``; the child's head starts
    at ``fork_at_seq`` with ``head_hash`` (default: the header's hash; a child passes the parent
    line's hash at fork_at_seq) and ``head_epoch`` (a child passes the max epoch of the parent's
    chain through fork_at_seq, so epochs keep rising across the fork). ``lines`` (its first
    events) and ``companions`` commit in the same transaction.
    """

    thread_id: str
    tenant: str
    branch_id: str
    header: StoredLine
    parent_branch_id: str | None = None
    fork_at_seq: int | None = None
    state: str = "ready"
    writer_impl: str = "threads-aws"
    head_verified: bool = True
    head_hash: str | None = None
    head_epoch: int = 0
    create_thread: bool = False
    status: str | None = None  # a new thread's fold status after `lines`, for its list row
    ttl_s: int | None = None  # a new thread's retention TTL (`store.retention`)
    lines: Sequence[StoredLine] = ()
    companions: Sequence[Companion] = ()
    stubs_sha256: str | None = None  # a stub-mode child: its recorded stubs' artifact

    def check(self) -> int | None:
        """Validate the spec; returns the header's created_at."""
        if self.state not in BRANCH_STATES:
            raise ValueError(f"unknown branch state {self.state!r}")
        if (self.parent_branch_id is None) != (self.fork_at_seq is None):
            raise ValueError("a child needs both parent_branch_id and fork_at_seq")
        if self.parent_branch_id is not None and self.create_thread:
            raise ValueError("a thread is created with its root branch")
        if self.header.seq != 0:
            raise ValueError("the header is seq 0")
        try:
            hv = json.loads(self.header.raw)
        except ValueError as exc:
            raise ValueError("header is not JSON") from exc
        if hv.get("branch_id") != self.branch_id or hv.get("thread_id") != self.thread_id:
            raise ValueError("header names another branch or thread")
        base = self.fork_at_seq or 0
        for i, line in enumerate(self.lines):
            if line.seq != base + 1 + i:
                raise ValueError(f"line {i} has seq {line.seq}, expected {base + 1 + i}")
        if len(self.lines) + len(self.companions) + 6 > MAX_TXN_ITEMS:
            raise ValueError("too many initial lines and companions for one transaction")
        created = hv.get("created_at")
        return int(created) if created is not None else None


def record_item(rec: BranchRecord) -> Item:
    """The head item of a new branch (no lease, no staging claim yet)."""
    item: Item = {
        **branch_key(rec.branch_id),
        "kind": S("branch"),
        "branch_id": S(rec.branch_id),
        "thread_id": S(rec.thread_id),
        "tenant": S(rec.tenant),
        "state": S(rec.state),
        "head_seq": N(rec.head_seq),
        "head_hash": S(rec.head_hash),
        "head_epoch": N(rec.head_epoch),
        "head_verified": {"BOOL": bool(rec.head_verified)},
        "writer_impl": S(rec.writer_impl),
        "header_hash": S(rec.header_hash),
        "created_at": N(rec.created_at),
    }
    if rec.parent_branch_id is not None and rec.fork_at_seq is not None:
        item["parent_branch_id"] = S(rec.parent_branch_id)
        item["fork_at_seq"] = N(rec.fork_at_seq)
    if rec.stubs_sha256 is not None:
        item["stubs_sha256"] = S(rec.stubs_sha256)
    return item


class Branches:
    def __init__(
        self,
        ddb: Any,
        state_table: str,
        lines: Lines,
        *,
        clock: Clock,
        max_attempts: int = 6,
    ):
        self.ddb = ddb
        self.table = state_table
        self.lines = lines
        self.clock = clock
        self.max_attempts = max_attempts

    # ------------------------------------------------------------ reads
    def head(self, branch_id: str) -> BranchRecord | None:
        out = self.ddb.get_item(TableName=self.table, Key=branch_key(branch_id), ConsistentRead=True)
        item = out.get("Item")
        return BranchRecord.from_item(item) if item else None

    def heads(self, branch_ids: Sequence[str]) -> list[BranchRecord]:
        """The records of the branches that exist (BatchGetItem, 100 keys a request)."""
        out: list[BranchRecord] = []
        for i in range(0, len(branch_ids), 100):
            keys = [branch_key(b) for b in branch_ids[i : i + 100]]
            request: dict[str, Any] = {self.table: {"Keys": keys, "ConsistentRead": True}}
            while request:
                resp = self.ddb.batch_get_item(RequestItems=request)
                out.extend(BranchRecord.from_item(it) for it in resp.get("Responses", {}).get(self.table, []))
                request = resp.get("UnprocessedKeys") or {}
                if request:
                    time.sleep(0.05)
        return out

    def require(self, branch_id: str) -> BranchRecord:
        rec = self.head(branch_id)
        if rec is None:
            raise NotFound(f"branch {branch_id} not found")
        return rec

    def stored_or_read(self, branch_id: str, item: Item | None) -> BranchRecord:
        """The record a failed condition returned (ALL_OLD), else a fresh consistent read."""
        if item:
            return BranchRecord.from_item(item)
        return self.require(branch_id)

    def segments(self, branch_id: str, rec: BranchRecord | None = None) -> list[tuple[str, int, int]]:
        """The resolved chain's segments, root first: (branch_id, first event seq, last seq)."""
        rec = rec or self.require(branch_id)
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
                raise LogError(
                    "log_corrupt",
                    upper,
                    f"parent branch {rec.parent_branch_id} is missing",
                )
            rec = parent
        out.reverse()
        return out

    # ------------------------------------------------------------ create / discard
    def create(self, spec: NewBranch) -> BranchRecord:
        """Create a branch in one transaction (module docstring). A failed companion raises
        CompanionFailed; an existing branch or thread AlreadyExists; a missing thread (or one of
        another tenant) or an unfit parent NotFound."""
        created = spec.check()
        rec = BranchRecord.new(spec, created_at=self.clock() if created is None else created)
        failed = transact(self.ddb, self._creation(spec, rec), max_attempts=self.max_attempts)
        if failed is None:
            return rec
        raise_companion(failed, spec.companions)
        if any(tag.startswith("line:") for tag in failed.reasons):
            raise AlreadyExists(f"branch {spec.branch_id} has lines")
        if "head" in failed or "header" in failed:
            raise AlreadyExists(f"branch {spec.branch_id} exists")
        if "thread" in failed:
            if spec.create_thread:
                raise AlreadyExists(f"thread {spec.thread_id} exists")
            raise NotFound(f"thread {spec.thread_id} not found for this tenant")
        raise NotFound(
            f"parent branch {spec.parent_branch_id} is not in thread {spec.thread_id}"
            f" at or past seq {spec.fork_at_seq}"
        )

    def _creation(self, spec: NewBranch, rec: BranchRecord) -> list[Tagged]:
        """The creation's items: head, header, membership, the thread (created, or required under
        the tenant), the parent condition of a child, the first lines, the companions."""
        t = self.table
        head = {
            "TableName": t,
            "Item": record_item(rec),
            "ConditionExpression": "attribute_not_exists(pk)",
        }
        thread = (
            index.thread_put(
                t,
                rec.tenant,
                rec.thread_id,
                rec.branch_id,
                rec.created_at,
                spec.lines,
                spec.status,
                spec.ttl_s,
            )
            if spec.create_thread
            else index.thread_check(t, rec.tenant, rec.thread_id)
        )
        items = [
            Tagged("head", {"Put": head}),
            Tagged("header", self.lines.put_new(spec.branch_id, spec.header)),
            Tagged(
                "membership",
                index.membership_put(t, rec.tenant, rec.thread_id, rec.branch_id, rec.created_at),
            ),
            Tagged("thread", thread),
        ]
        if spec.parent_branch_id is not None:
            e = Expr()
            cond = (
                f"attribute_exists(pk) AND {e.n('thread_id')} = {e.v(S(spec.thread_id))}"
                f" AND {e.n('head_seq')} >= {e.v(N(spec.fork_at_seq or 0))}"
            )
            check = {
                "TableName": t,
                "Key": branch_key(spec.parent_branch_id),
                "ConditionExpression": cond,
            }
            items.append(Tagged("parent", {"ConditionCheck": e.apply(check)}))
        items.extend(
            Tagged(f"line:{line.seq}", self.lines.put_new(spec.branch_id, line)) for line in spec.lines
        )
        items.extend(companion_items(spec.companions, _CREATE_TAGS))
        return items

    def discard(self, branch_id: str, *, states: Sequence[str] = ("forking", "fork_failed")) -> bool:
        """Delete a branch that never became visible (a failed fork): its head item, header,
        membership and lines. Only in one of ``states`` (else StateConflict); False if it
        doesn't exist."""
        rec = self.head(branch_id)
        if rec is None:
            return False
        e = Expr()
        cond = f"{e.n('state')} IN ({', '.join(e.v(S(x)) for x in states)})"
        delete_head = {
            "TableName": self.table,
            "Key": branch_key(branch_id),
            "ConditionExpression": cond,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        items = [
            Tagged("head", {"Delete": e.apply(delete_head)}),
            Tagged(
                "membership",
                index.membership_delete(self.table, rec.thread_id, branch_id),
            ),
            Tagged("header", self.lines.delete(branch_id, 0)),
        ]
        failed = transact(self.ddb, items, max_attempts=self.max_attempts)
        if failed is not None:
            old = failed.item("head")
            if old is None and self.head(branch_id) is None:
                return False
            state = old["state"]["S"] if old else "?"
            raise StateConflict(f"branch {branch_id} is {state}; only {', '.join(states)} can be discarded")
        self.lines.delete_all(branch_id)
        return True

    # ------------------------------------------------------------ state
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
        e = Expr()
        sets = [f"{e.n('state')} = {e.v(S(state))}"]
        if head_verified is not None:
            sets.append(f"{e.n('head_verified')} = {e.v({'BOOL': head_verified})}")
        if dropped_ref is not None:
            sets.append(f"{e.n('dropped_ref')} = {e.v(S(dropped_ref))}")
        cond = "attribute_exists(pk)"
        if expected_state is not None:
            cond += f" AND {e.n('state')} = {e.v(S(expected_state))}"
        request = {
            "TableName": self.table,
            "Key": branch_key(branch_id),
            "UpdateExpression": "SET " + ", ".join(sets),
            "ConditionExpression": cond,
            "ReturnValues": "ALL_NEW",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        try:
            out = self.ddb.update_item(**e.apply(request))
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            old: Any = exc.response.get("Item") or self._item(branch_id)
            if not old:
                raise NotFound(f"branch {branch_id} not found") from exc
            raise StateConflict(f"branch {branch_id} is {old['state']['S']}, not {expected_state}") from exc
        return BranchRecord.from_item(out["Attributes"])

    def _item(self, branch_id: str) -> Item | None:
        out = self.ddb.get_item(TableName=self.table, Key=branch_key(branch_id), ConsistentRead=True)
        item: Item | None = out.get("Item")
        return item
