"""The purge of a deleted thread's rows (`store.deletion` step 3), idempotent: every write is a
delete or a compare-and-set, so a purge re-run after a crash, or by the sweeper, finds less to do
and never fails on what is already gone.

Per branch (its tombstone's ``branch_ids`` plus any membership still found: a fork that
committed while a fenced delete ran), in this order: the keys only its own lines name (read
before the lines go: the budget ids of its runs, its channel routes), the branch's row kinds
(`row_kinds`), its ledger rows `live|pending` → `releasing` (the sweeper releases them), its head,
its lines (header included). Then the thread's row kinds, its META and memberships, and each
subagent child (its tombstone written if the deletion's transaction couldn't hold it).

What no key or index finds (a run receipt, a consumed inbox row, a decided schedule occurrence)
the sweeper's one Scan per sweep removes (`store.sweep.Sweep.naming`), after which the tombstone
is `done`. Memory rows, per principal scope, are one more entry of `row_kinds` (scope `tenant`
for `threads-aws tenant delete`, `thread` for what a thread wrote).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from ..core.errors import LogError
from . import index
from .approvals import approvals_gsi_pk
from .branches import branch_key
from .channel_threads import route_key
from .dynamo import S, condition_failed, each_item
from .lines import ALL_SEQS
from .provider_requests import provider_requests_pk
from .records import Item
from .resources import ResourceRow
from .schedule_threads import current_key
from .schedules import active_key, schedule_key
from .tombstones import Tombstone


@dataclass(slots=True)
class Target:
    """What one row kind removes rows of: a branch (``branch_id`` set) or a whole thread."""

    tenant: str
    thread_id: str
    branch_id: str | None = None
    budget_ids: set[str] = field(default_factory=set)  # run:<thread>:<user_input id>, from the lines
    routes: set[tuple[str, str, str]] = field(default_factory=set)  # (channel, installation, conversation)


@dataclass(frozen=True, slots=True)
class RowKind:
    name: str
    scope: str  # branch | thread | tenant
    remove: Callable[..., None]


def row_kinds() -> tuple[RowKind, ...]:
    """Every side row kind a deletion removes, besides the log itself (META, memberships, heads,
    lines) and the resources ledger (moved to `releasing`, then released by the sweeper). The one
    list to extend when a new row kind holds a thread's or a tenant's data (memory rows: add
    them here with their scope)."""
    return (
        RowKind("questions", "branch", lambda p, t: p.delete_pk(f"Q#{t.branch_id}")),
        RowKind("deltas", "branch", lambda p, t: p.delete_pk(f"DELTA#{t.branch_id}")),
        RowKind("approvals", "branch", lambda p, t: p.delete_gsi(approvals_gsi_pk(t.branch_id or ""))),
        RowKind("notes", "branch", lambda p, t: p.delete_pk(f"NOTE#{t.tenant}", f"{t.branch_id}:")),
        RowKind("budget_ledger", "thread", _budgets),
        RowKind("channel_threads", "thread", _routes),
        RowKind("schedules", "thread", _schedules),
        RowKind("schedule_occurrences", "thread", _occurrences),
        RowKind("inbox", "thread", lambda p, t: p.delete_gsi(f"INBOXQ#{t.thread_id}")),
        RowKind("api_keys", "tenant", _api_keys),
        RowKind("tenant_notes", "tenant", lambda p, t: p.delete_pk(f"NOTE#{t.tenant}")),
        RowKind("provider_ids", "branch", lambda p, t: p.delete_pk(provider_requests_pk(t.branch_id or ""))),
        RowKind("memory", "thread", lambda p, t: p.stores.memory.delete_written_by(t.tenant, t.thread_id)),
        RowKind("tenant_memory", "tenant", lambda p, t: p.stores.memory.delete_tenant(t.tenant)),
    )


class Purge:
    def __init__(self, stores: Any, *, on_schedule: Callable[[str], None] | None = None) -> None:
        self.stores = stores
        self.events = stores.events
        self.ddb = stores.events.lines.ddb
        self.table = stores.events.state_table
        self.on_schedule = on_schedule  # deletes a schedule's EventBridge entry, where deployed
        self.calls = 0  # AWS requests made (the README's per-delete count)

    # ------------------------------------------------------------------ entry points
    def run(self, stone: Tombstone) -> None:
        members = self.query(index.THREAD_PREFIX + stone.thread_id)
        found = {it["branch_id"]["S"] for it in members if "branch_id" in it}
        extra = sorted(found - set(stone.branch_ids))
        if extra:
            self.calls += 1
            self.stores.tombstones.add_branches(stone.thread_id, extra)
        thread = Target(stone.tenant, stone.thread_id)
        for bid in sorted(set(stone.branch_ids) | found):
            self._branch(thread, bid)
        for kind in row_kinds():
            if kind.scope == "thread":
                kind.remove(self, thread)
        self.delete_keys(
            [{"pk": it["pk"], "sk": it["sk"]} for it in members] + [index.thread_key(stone.thread_id)]
        )
        for child in stone.children:
            child_stone = self.stores.tombstones.ensure(
                Tombstone(child, stone.tenant, stone.deleted_at, stone.reason)
            )
            self.calls += 1
            if child_stone.state == "purging" and child_stone.tenant == stone.tenant:
                self.run(child_stone)

    def _count(self) -> None:
        self.calls += 1

    def tenant_rows(self, tenant: str) -> None:
        """The tenant-scoped row kinds (`threads-aws tenant delete`, after every thread)."""
        for kind in row_kinds():
            if kind.scope == "tenant":
                kind.remove(self, Target(tenant, ""))

    def _branch(self, thread: Target, branch_id: str) -> None:
        target = Target(thread.tenant, thread.thread_id, branch_id)
        keys: list[Item] = []
        for item in self.events.lines.query(branch_id, 0, ALL_SEQS):
            keys.append({"branch_id": item["branch_id"], "seq": item["seq"]})
            self._derive(thread, item)
        self.calls += 1 + len(keys) // 1000
        for kind in row_kinds():
            if kind.scope == "branch":
                kind.remove(self, target)
        for row in self.stores.resources.rows(branch_id):
            self._release(row)
        self.calls += 1
        self.delete_keys([branch_key(branch_id)])
        self.delete_keys(keys, table=self.events.events_table)

    def _derive(self, thread: Target, item: Item) -> None:
        """The keys a line names that no index finds: its run's budget, its channel route."""
        kind = item.get("type", {}).get("S")
        if kind not in ("user_input", "channel_delivery"):
            return
        try:
            ev = json.loads(self.events.lines.decode(item).raw)
        except (LogError, ValueError):
            return  # a spilled line already collected: the sweeper's scan covers what it named
        if kind == "user_input":
            thread.budget_ids.add(f"run:{thread.thread_id}:{ev['event_id']}")
        else:
            d = ev.get("data") or {}
            thread.routes.add((d.get("channel", ""), d.get("installation", ""), d.get("conversation", "")))

    def _release(self, row: ResourceRow) -> None:
        if row.state not in ("live", "pending"):
            return
        try:
            self.stores.resources.move(row, "releasing", expect=("live", "pending"))
        except LogError:
            pass  # moved meanwhile (the sweeper's claim): nothing to do here
        self.calls += 1

    # ------------------------------------------------------------------ helpers (row kinds)
    def query(self, pk: str, sk_prefix: str | None = None, *, gsi: bool = False) -> list[Item]:
        key = "gsi1pk" if gsi else "pk"
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": f"{key} = :p",
            "ExpressionAttributeValues": {":p": S(pk)},
        }
        if gsi:
            kwargs["IndexName"] = "gsi1"
        else:
            kwargs["ConsistentRead"] = True
        if sk_prefix is not None:
            kwargs["KeyConditionExpression"] += " AND begins_with(sk, :s)"
            kwargs["ExpressionAttributeValues"][":s"] = S(sk_prefix)
        return list(each_item(self.ddb.query, kwargs, self._count))

    def delete_pk(self, pk: str, sk_prefix: str | None = None) -> None:
        self.delete_keys([{"pk": it["pk"], "sk": it["sk"]} for it in self.query(pk, sk_prefix)])

    def delete_gsi(self, gsi1pk: str) -> None:
        self.delete_keys([{"pk": it["pk"], "sk": it["sk"]} for it in self.query(gsi1pk, gsi=True)])

    def delete_keys(self, keys: Sequence[Item], *, table: str | None = None) -> None:
        """Lines: BatchWriteItem deletes, 25 a request (unprocessed ones retried). StateTable
        rows: one DeleteItem each, so the deleting function's role can be held to the row kinds'
        key prefixes (dynamodb:LeadingKeys; template.yaml DeleteThreadFunction)."""
        name = table or self.table
        if name == self.table:
            for key in keys:
                self.calls += 1
                self.ddb.delete_item(TableName=name, Key=key)
            return
        for i in range(0, len(keys), 25):
            request: dict[str, Any] = {name: [{"DeleteRequest": {"Key": k}} for k in keys[i : i + 25]]}
            while request:
                self.calls += 1
                out = self.ddb.batch_write_item(RequestItems=request)
                request = out.get("UnprocessedItems") or {}
                if request:
                    time.sleep(0.05)

    def delete_if(self, key: Item, attr: str, value: str) -> None:
        """Delete `key` only while its `attr` is `value` (a route handed to another thread stays)."""
        self.calls += 1
        try:
            self.ddb.delete_item(
                TableName=self.table,
                Key=key,
                ConditionExpression="#a = :v",
                ExpressionAttributeNames={"#a": attr},
                ExpressionAttributeValues={":v": S(value)},
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise


# ---------------------------------------------------------------------- the thread's row kinds
def _budgets(p: Purge, t: Target) -> None:
    for budget_id in [f"thread:{t.thread_id}", *sorted(t.budget_ids)]:
        p.delete_pk(f"BUDGET#{budget_id}")


def _routes(p: Purge, t: Target) -> None:
    for channel, installation, conversation in sorted(t.routes):
        if channel and installation and conversation:
            p.delete_if(route_key(t.tenant, channel, installation, conversation), "thread_id", t.thread_id)


def _schedules(p: Purge, t: Target) -> None:
    """The thread's active schedules: their EventBridge entries, rows and current-thread rows."""
    for item in p.query(f"SCHEDULES#{t.thread_id}", gsi=True):
        sid = item.get("schedule_id", {}).get("S")
        if not sid:
            continue
        if p.on_schedule is not None:
            p.calls += 1
            p.on_schedule(sid)
        p.delete_keys([schedule_key(sid), active_key(sid)])
        p.delete_if(current_key(t.tenant, sid), "thread_id", t.thread_id)


def _occurrences(p: Purge, t: Target) -> None:
    """Pending occurrences → `retired` (semantics §5 step 4), their frozen input dropped."""
    for item in p.query(f"OCCURRENCESQ#{t.thread_id}", gsi=True):
        p.calls += 1
        try:
            p.ddb.update_item(
                TableName=p.table,
                Key={"pk": item["pk"], "sk": item["sk"]},
                UpdateExpression="SET #st = :r, reason = :why REMOVE gsi1pk, gsi1sk, input_json, agent",
                ConditionExpression="#st = :pending",
                ExpressionAttributeNames={"#st": "state"},
                ExpressionAttributeValues={
                    ":r": S("retired"),
                    ":why": S("removed"),
                    ":pending": S("pending"),
                },
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise


def _api_keys(p: Purge, t: Target) -> None:
    p.delete_keys(list(scan_keys(p, "APIKEY#", t.tenant)))


def scan_keys(p: Purge, prefix: str, tenant: str) -> Iterable[Item]:
    """The keys of the items under `prefix` whose `tenant` is `tenant` (an operator's Scan)."""
    kwargs: dict[str, Any] = {
        "TableName": p.table,
        "FilterExpression": "begins_with(pk, :p) AND #t = :t",
        "ExpressionAttributeNames": {"#t": "tenant"},
        "ExpressionAttributeValues": {":p": S(prefix), ":t": S(tenant)},
        "ProjectionExpression": "pk, sk",
    }
    yield from each_item(p.ddb.scan, kwargs, p._count)
