"""Thread deletion (semantics.md §8 "Thread deletion", §2 `tombstones`, `resources`).

Order and fencing
-----------------
1. Plan. The thread and, recursively, its subagent children (`Fold.children`: the
   `agent_spawned` child threads; never a handoff target, `Fold.handoff`), each thread's branches
   (membership Query + one BatchGetItem of heads) and each branch's fold. Refused `busy` while any
   branch holds an unexpired lease, is `forking` (a fork in progress), or has an effect begun or
   unknown (`Fold.open_effects`: in doubt).
2. Commit, ONE transaction: per thread the tombstone Put (``attribute_not_exists``: a concurrent
   delete commits once) and the META Delete (under the tenant); per branch the head Delete,
   conditioned on no unexpired lease AND the head_seq the plan folded (a line appended since, a
   lease taken since, fails the whole transaction and the plan is made again, so the busy check
   is of exactly the state that is deleted), and its membership Delete; each ledger row
   `live|pending` → `releasing` (conditioned on the state read). Every read route resolves the
   thread by META and a branch by its head, so from this commit nothing of the thread is
   readable: its lines are unreachable without a head (readers never look above it).
3. Purge (`store.purge`), idempotent: the lines, the side rows (`purge.row_kinds`) and what the
   transaction couldn't hold; run at once by the deleting request and again by the sweeper for
   every tombstone still `purging` (a crash part-way loses nothing: the tombstone is the work
   item). S3 bytes (artifacts, spilled lines, workspace files, snapshots) are released by the
   sweeper's mark-and-sweep (`sandbox.gc`): with the heads gone nothing marks them, unless
   another live branch references the same content-addressed object.

Oversize. A cascade whose step-2 items exceed one transaction (100 actions: about 45 branches, or
many ledger rows) is fenced instead: the deletion takes every branch's lease (`store.leases`:
refused `branch_busy` → `busy`, leases taken are released), so no worker starts anything and
every earlier holder is fenced by epoch; it folds the fenced heads again (in-doubt → `busy`,
released); then ONE conditional write holds the root's tombstone with its META Delete (and as
many children's pairs as fit), making the thread unreadable at once; the rest is the purge's,
in batches. A crash before that write leaves the thread whole (the leases lapse after
`FENCE_TTL_MS`); after it, the tombstone drives the purge.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import orjson

from ..core.canonical import new_uuid7
from ..core.errors import LogError
from ..core.importer import import_log
from . import index
from .branches import BranchRecord, branch_key
from .dynamo import MAX_TXN_ITEMS, Expr, N, S, Tagged, each_item, transact
from .records import Clock, NotFound, StoreError, wall_ms
from .resources import ResourceRow, resource_key
from .tombstones import Tombstone, tombstone_put

if TYPE_CHECKING:
    from ..core.fold import Fold

FENCE_TTL_MS = 120_000
PLAN_ATTEMPTS = 4


class DeletionRefused(StoreError):
    """The thread can't be deleted now: `code` is the API's (``busy``)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(slots=True)
class ThreadPlan:
    thread_id: str
    tenant: str
    branches: list[BranchRecord] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    resources: list[ResourceRow] = field(default_factory=list)

    def tombstone(self, now: int, reason: str) -> Tombstone:
        return Tombstone(
            self.thread_id,
            self.tenant,
            now,
            reason,
            branch_ids=tuple(b.branch_id for b in self.branches),
            children=tuple(self.children),
        )


class ThreadDeletion:
    """Plan, commit and purge one thread's deletion (module docstring)."""

    def __init__(
        self,
        stores: Any,
        *,
        clock: Clock = wall_ms,
        max_items: int = MAX_TXN_ITEMS,
        on_schedule: Callable[[str], None] | None = None,
        fold_of: Callable[[BranchRecord], Fold] | None = None,
    ) -> None:
        from .purge import Purge

        self.stores = stores
        self.events = stores.events
        self.ddb = stores.events.lines.ddb
        self.table = stores.events.state_table
        self.clock = clock
        self.max_items = max_items
        self.purge = Purge(stores, on_schedule=on_schedule)
        # The host passes its Writer's cached views (`Writer.load`: the tail read, not the whole
        # chain, on a warm function); without one each branch's chain is read and folded.
        self.fold_of = fold_of

    # ------------------------------------------------------------------ the one entry point
    def delete(self, tenant: str, thread_id: str, *, reason: str = "api") -> bool:
        """Delete the thread and its subagent children. True when this call deleted it, False
        when it was already deleted (its tenant's tombstone: idempotent). NotFound for a thread
        that never existed or is another tenant's; DeletionRefused(`busy`)."""
        for _ in range(PLAN_ATTEMPTS):
            thread = self.stores.threads.get_thread(tenant, thread_id)
            if thread is None:
                stone = self.stores.tombstones.get(tenant, thread_id)
                if stone is None:
                    raise NotFound(f"thread {thread_id} not found")
                if stone.state == "purging":
                    self.purge.run(stone)  # finish a purge a crash left (idempotent)
                return False
            now = self.clock()
            plans = self.plan(tenant, thread_id, now)
            stones = [p.tombstone(now, reason) for p in plans]
            items = self._items(plans, stones, now)
            if len(items) > self.max_items:
                self._fenced(plans, stones, now)
            elif transact(self.ddb, items) is not None:
                continue  # a lease, an append, a ledger move or another delete came between
            self.purge.run(stones[0])  # the root's purge recurses into its children
            return True
        raise DeletionRefused("busy", "the thread kept changing while it was being deleted; retry")

    # ------------------------------------------------------------------ 1. plan
    def plan(self, tenant: str, thread_id: str, now: int) -> list[ThreadPlan]:
        """The cascade, root first; DeletionRefused(`busy`) as the module docstring says."""
        plans: list[ThreadPlan] = []
        todo, seen = [thread_id], {thread_id}
        while todo:
            tid = todo.pop(0)
            if tid != thread_id and self.stores.threads.get_thread(tenant, tid) is None:
                continue  # a child already deleted (or never created: a crash before its line 0)
            p = ThreadPlan(tid, tenant, self._branches(tenant, tid))
            for rec in p.branches:
                for child in self._check(rec, now):
                    if child not in seen:
                        seen.add(child)
                        p.children.append(child)
                        todo.append(child)
                p.resources.extend(
                    r for r in self.stores.resources.rows(rec.branch_id) if r.state in ("live", "pending")
                )
            plans.append(p)
        return plans

    def _branches(self, tenant: str, thread_id: str) -> list[BranchRecord]:
        ids = [
            it["branch_id"]["S"] for it in self._query(index.THREAD_PREFIX + thread_id, index.MEMBER_PREFIX)
        ]
        recs = self.events.branches.heads(ids)
        return [r for r in recs if r.tenant == tenant and r.thread_id == thread_id]

    def _query(self, pk: str, sk_prefix: str) -> list[dict[str, Any]]:
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :p AND begins_with(sk, :s)",
            "ExpressionAttributeValues": {":p": S(pk), ":s": S(sk_prefix)},
            "ConsistentRead": True,
        }
        return list(each_item(self.ddb.query, kwargs))

    def _check(self, rec: BranchRecord, now: int) -> list[str]:
        """Refuse `busy` for this branch, or answer its subagent child threads."""
        if rec.state == "forking":
            raise DeletionRefused("busy", f"branch {rec.branch_id} is being forked")
        if rec.lease_holder is not None and rec.lease_expires_at > now:
            raise DeletionRefused("busy", f"branch {rec.branch_id} is running (its lease is held)")
        try:
            if self.fold_of is not None:
                fold = self.fold_of(rec)
            else:
                fold = import_log(self.events.export(rec.branch_id), now=now).fold
        except LogError:
            # An unreadable (corrupt, fork_failed) log is not writable: nothing runs on it, and
            # what it names is removed by the purge all the same. Its children are still its
            # own: the readable lines name them.
            return _spawned_before_the_damage(self.events.export(rec.branch_id))
        if fold.open_effects:
            raise DeletionRefused("busy", f"branch {rec.branch_id} has an effect in doubt")
        return list(fold.children)

    # ------------------------------------------------------------------ 2. commit
    def _items(self, plans: list[ThreadPlan], stones: list[Tombstone], now: int) -> list[Tagged]:
        items: list[Tagged] = []
        for p, stone in zip(plans, stones, strict=True):
            items.extend(self._unreadable(p, stone))
            for rec in p.branches:
                items.append(Tagged(f"head:{rec.branch_id}", self._head_delete(rec, now)))
                items.append(
                    Tagged(
                        f"member:{rec.branch_id}",
                        index.membership_delete(self.table, p.thread_id, rec.branch_id),
                    )
                )
            items.extend(Tagged(f"res:{r.resource_id}", self._releasing(r)) for r in p.resources)
        return items

    def _unreadable(self, p: ThreadPlan, stone: Tombstone) -> list[Tagged]:
        """The tombstone and the META Delete: from these on, the thread reads as not found."""
        e = Expr()
        meta = {
            "TableName": self.table,
            "Key": index.thread_key(p.thread_id),
            "ConditionExpression": f"attribute_exists(pk) AND {e.n('tenant')} = {e.v(S(p.tenant))}",
        }
        return [
            Tagged(f"tomb:{p.thread_id}", tombstone_put(self.table, stone)),
            Tagged(f"meta:{p.thread_id}", {"Delete": e.apply(meta)}),
        ]

    def _head_delete(self, rec: BranchRecord, now: int) -> dict[str, Any]:
        e = Expr()
        lh, lx = e.n("lease_holder"), e.n("lease_expires_at")
        cond = (
            f"attribute_exists(pk) AND {e.n('head_seq')} = {e.v(N(rec.head_seq))}"
            f" AND (attribute_not_exists({lh}) OR {lx} <= {e.v(N(now))})"
        )
        req = {"TableName": self.table, "Key": branch_key(rec.branch_id), "ConditionExpression": cond}
        return {"Delete": e.apply(req)}

    def _releasing(self, row: ResourceRow) -> dict[str, Any]:
        return {
            "Update": {
                "TableName": self.table,
                "Key": resource_key(row.owner_branch_id, row.resource_id),
                "UpdateExpression": "SET #s = :to",
                "ConditionExpression": "#s = :from",
                "ExpressionAttributeNames": {"#s": "state"},
                "ExpressionAttributeValues": {":to": S("releasing"), ":from": S(row.state)},
            }
        }

    # ------------------------------------------------------------------ oversize
    def _fenced(self, plans: list[ThreadPlan], stones: list[Tombstone], now: int) -> None:
        holder = f"delete:{new_uuid7()}"
        taken: list[tuple[str, Any]] = []
        try:
            for p in plans:
                for rec in p.branches:
                    lease = self.events.acquire_lease(rec.branch_id, holder, ttl_ms=FENCE_TTL_MS, now_ms=now)
                    taken.append((rec.branch_id, lease))
            for p in plans:  # the fenced heads: no worker appends under them any more
                for rec in self.events.branches.heads([r.branch_id for r in p.branches]):
                    self._check(replace(rec, lease_holder=None), now)  # the lease is ours
            first: list[Tagged] = []
            for p, stone in zip(plans, stones, strict=True):
                pair = self._unreadable(p, stone)
                if len(first) + len(pair) > self.max_items:
                    break  # the purge writes the remaining children's tombstones
                first.extend(pair)
            if transact(self.ddb, first) is not None:
                raise DeletionRefused("busy", "the thread changed while it was being fenced; retry")
        except (LogError, NotFound, DeletionRefused) as exc:
            for branch_id, lease in taken:
                self.events.release_lease(branch_id, lease)
            if isinstance(exc, DeletionRefused):
                raise
            raise DeletionRefused("busy", f"a branch is running: {exc}") from None


def _spawned_before_the_damage(raw: bytes) -> list[str]:
    """The child threads `agent_spawned` lines name, up to the first line that isn't JSON."""
    children: list[str] = []
    for line in raw.split(b"\n"):
        try:
            ev = orjson.loads(line)
        except orjson.JSONDecodeError:
            break
        if not isinstance(ev, dict):
            continue
        data = ev.get("data")
        if ev.get("type") == "agent_spawned" and isinstance(data, dict):
            child = data.get("child_thread_id")
            if isinstance(child, str) and child not in children:
                children.append(child)
    return children
