"""The thread index in the StateTable.

Items (pk, sk):
- ``THREAD#<thread_id>`` / ``META``: the thread (ThreadRecord); gsi1 = ``TENANT#<tenant>`` /
  ``<created_at:016d>#<thread_id>`` lists a tenant's threads.
- ``THREAD#<thread_id>`` / ``BRANCH#<branch_id>``: membership of a branch in its thread.

Both are written in the transaction that creates a branch (`store.branches`).

Tenant isolation: every lookup takes the caller's tenant, and a thread or branch of another
tenant reads as absent (None / []), exactly like a missing one, so its existence doesn't leak.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from .dynamo import Expr, S, condition_failed
from .records import AlreadyExists, Item

if TYPE_CHECKING:
    from .branches import Branches, BranchRecord

THREAD_PREFIX = "THREAD#"
MEMBER_PREFIX = "BRANCH#"


def thread_key(thread_id: str) -> Item:
    return {"pk": S(THREAD_PREFIX + thread_id), "sk": S("META")}


def membership_key(thread_id: str, branch_id: str) -> Item:
    return {"pk": S(THREAD_PREFIX + thread_id), "sk": S(MEMBER_PREFIX + branch_id)}


def tenant_gsi_pk(tenant: str) -> str:
    return f"TENANT#{tenant}"


@dataclass(frozen=True, slots=True)
class ThreadRecord:
    thread_id: str
    tenant: str
    main_branch_id: str
    created_at: int

    @classmethod
    def from_item(cls, item: Item) -> ThreadRecord:
        return cls(
            thread_id=item["thread_id"]["S"],
            tenant=item["tenant"]["S"],
            main_branch_id=item["main_branch_id"]["S"],
            created_at=int(item["created_at"]["N"]),
        )


def thread_item(tenant: str, thread_id: str, main_branch_id: str, created_at: int) -> Item:
    return {
        **thread_key(thread_id),
        "kind": S("thread"),
        "thread_id": S(thread_id),
        "tenant": S(tenant),
        "main_branch_id": S(main_branch_id),
        "created_at": {"N": str(created_at)},
        "gsi1pk": S(tenant_gsi_pk(tenant)),
        "gsi1sk": S(f"{created_at:016d}#{thread_id}"),
    }


def thread_put(table: str, tenant: str, thread_id: str, main_branch_id: str, created_at: int) -> Item:
    """The TransactItem creating a thread's META item (fails if the thread id is taken)."""
    item = thread_item(tenant, thread_id, main_branch_id, created_at)
    return {"Put": {"TableName": table, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}}


def thread_check(table: str, tenant: str, thread_id: str) -> Item:
    """The TransactItem requiring the thread to exist under `tenant`."""
    e = Expr()
    cond = f"attribute_exists(pk) AND {e.n('tenant')} = {e.v(S(tenant))}"
    return {
        "ConditionCheck": e.apply(
            {"TableName": table, "Key": thread_key(thread_id), "ConditionExpression": cond}
        )
    }


def membership_put(table: str, tenant: str, thread_id: str, branch_id: str, created_at: int) -> Item:
    item = {
        **membership_key(thread_id, branch_id),
        "kind": S("thread_branch"),
        "thread_id": S(thread_id),
        "branch_id": S(branch_id),
        "tenant": S(tenant),
        "created_at": {"N": str(created_at)},
    }
    return {"Put": {"TableName": table, "Item": item}}


def membership_delete(table: str, thread_id: str, branch_id: str) -> Item:
    return {"Delete": {"TableName": table, "Key": membership_key(thread_id, branch_id)}}


class ThreadIndex:
    def __init__(self, ddb: Any, state_table: str, branches: Branches) -> None:
        self.ddb = ddb
        self.table = state_table
        self.branches = branches

    def create_thread(
        self, tenant: str, thread_id: str, main_branch_id: str, created_at: int
    ) -> ThreadRecord:
        """Create the thread's META item (AlreadyExists if the thread id is taken).

        A branch created with ``NewBranch(create_thread=True)`` does this in the same transaction;
        use this alone only when the branch is created afterwards.
        """
        put = thread_put(self.table, tenant, thread_id, main_branch_id, created_at)["Put"]
        try:
            self.ddb.put_item(**put)
        except ClientError as exc:
            if condition_failed(exc):
                raise AlreadyExists(f"thread {thread_id} exists") from exc
            raise
        return ThreadRecord.from_item(put["Item"])

    def get_thread(self, tenant: str, thread_id: str) -> ThreadRecord | None:
        out = self.ddb.get_item(TableName=self.table, Key=thread_key(thread_id), ConsistentRead=True)
        item = out.get("Item")
        if not item or item.get("tenant", {}).get("S") != tenant:
            return None
        return ThreadRecord.from_item(item)

    def list_threads(
        self, tenant: str, *, limit: int = 50, after: str | None = None
    ) -> tuple[list[ThreadRecord], str | None]:
        """A tenant's threads, oldest first (gsi1, eventually consistent). Returns (page, cursor)."""
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": "gsi1",
            "KeyConditionExpression": "gsi1pk = :p",
            "ExpressionAttributeValues": {":p": S(tenant_gsi_pk(tenant))},
            "Limit": limit,
        }
        if after:
            kwargs["KeyConditionExpression"] += " AND gsi1sk > :a"
            kwargs["ExpressionAttributeValues"][":a"] = S(after)
        out = self.ddb.query(**kwargs)
        items = out.get("Items", [])
        cursor = items[-1]["gsi1sk"]["S"] if out.get("LastEvaluatedKey") and items else None
        return [ThreadRecord.from_item(i) for i in items], cursor

    def list_branches(self, tenant: str, thread_id: str) -> list[BranchRecord]:
        """The thread's branches (not those still `forking`), oldest first."""
        if self.get_thread(tenant, thread_id) is None:
            return []
        ids: list[str] = []
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :p AND begins_with(sk, :b)",
            "ExpressionAttributeValues": {":p": S(THREAD_PREFIX + thread_id), ":b": S(MEMBER_PREFIX)},
            "ConsistentRead": True,
        }
        while True:
            out = self.ddb.query(**kwargs)
            ids.extend(i["branch_id"]["S"] for i in out.get("Items", []))
            if not out.get("LastEvaluatedKey"):
                break
            kwargs["ExclusiveStartKey"] = out["LastEvaluatedKey"]
        records = [r for r in self.branches.heads(ids) if r.tenant == tenant and r.thread_id == thread_id]
        records = [r for r in records if r.state != "forking"]
        records.sort(key=lambda r: (r.created_at, r.branch_id))
        return records

    def branch_of(self, tenant: str, thread_id: str | None, branch_id: str) -> BranchRecord | None:
        """The branch if it belongs to this tenant (and to `thread_id`, when given); any state,
        `forking` included."""
        rec = self.branches.head(branch_id)
        if rec is None or rec.tenant != tenant or (thread_id is not None and rec.thread_id != thread_id):
            return None
        return rec
