"""The thread index in the StateTable (key layout in records.py).

Tenant isolation: every lookup takes the caller's tenant, and a thread or branch of another
tenant reads as absent (None / []), exactly like a missing one, so its existence doesn't leak.
"""

from __future__ import annotations

import time
from typing import Any

from botocore.exceptions import ClientError

from .records import (
    AlreadyExists,
    BranchRecord,
    ThreadRecord,
    branch_key,
    tenant_gsi_pk,
    thread_key,
    thread_meta_item,
)


class ThreadIndex:
    def __init__(self, ddb: Any, state_table: str) -> None:
        self.ddb = ddb
        self.state_table = state_table

    def create_thread(
        self, tenant: str, thread_id: str, main_branch_id: str, created_at: int
    ) -> ThreadRecord:
        """Create the thread's META item (AlreadyExists if the thread id is taken).

        ``EventStore.create_branch(..., create_thread=True)`` does this in the same transaction as
        the main branch; use this alone only when the branch is created afterwards.
        """
        item = thread_meta_item(tenant, thread_id, main_branch_id, created_at)
        try:
            self.ddb.put_item(
                TableName=self.state_table, Item=item, ConditionExpression="attribute_not_exists(pk)"
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
                raise AlreadyExists(f"thread {thread_id} exists") from exc
            raise
        return ThreadRecord.from_item(item)

    def get_thread(self, tenant: str, thread_id: str) -> ThreadRecord | None:
        out = self.ddb.get_item(TableName=self.state_table, Key=thread_key(thread_id), ConsistentRead=True)
        item = out.get("Item")
        if not item or item.get("tenant", {}).get("S") != tenant:
            return None
        return ThreadRecord.from_item(item)

    def list_threads(
        self, tenant: str, *, limit: int = 50, after: str | None = None
    ) -> tuple[list[ThreadRecord], str | None]:
        """A tenant's threads, oldest first (gsi1, eventually consistent). Returns (page, cursor)."""
        kwargs: dict[str, Any] = {
            "TableName": self.state_table,
            "IndexName": "gsi1",
            "KeyConditionExpression": "gsi1pk = :p",
            "ExpressionAttributeValues": {":p": {"S": tenant_gsi_pk(tenant)}},
            "Limit": limit,
        }
        if after:
            kwargs["KeyConditionExpression"] += " AND gsi1sk > :a"
            kwargs["ExpressionAttributeValues"][":a"] = {"S": after}
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
            "TableName": self.state_table,
            "KeyConditionExpression": "pk = :p AND begins_with(sk, :b)",
            "ExpressionAttributeValues": {":p": {"S": f"THREAD#{thread_id}"}, ":b": {"S": "BRANCH#"}},
            "ConsistentRead": True,
        }
        while True:
            out = self.ddb.query(**kwargs)
            ids.extend(i["branch_id"]["S"] for i in out.get("Items", []))
            if not out.get("LastEvaluatedKey"):
                break
            kwargs["ExclusiveStartKey"] = out["LastEvaluatedKey"]
        records = [r for r in self._heads(ids) if r.tenant == tenant and r.thread_id == thread_id]
        records = [r for r in records if r.state != "forking"]
        records.sort(key=lambda r: (r.created_at, r.branch_id))
        return records

    def branch_of(self, tenant: str, thread_id: str, branch_id: str) -> BranchRecord | None:
        """The branch if it belongs to this tenant's thread (any state, `forking` included)."""
        out = self.ddb.get_item(TableName=self.state_table, Key=branch_key(branch_id), ConsistentRead=True)
        item = out.get("Item")
        if not item:
            return None
        rec = BranchRecord.from_item(item)
        if rec.tenant != tenant or rec.thread_id != thread_id:
            return None
        return rec

    def _heads(self, branch_ids: list[str]) -> list[BranchRecord]:
        out: list[BranchRecord] = []
        for i in range(0, len(branch_ids), 100):
            keys = [branch_key(b) for b in branch_ids[i : i + 100]]
            request: dict[str, Any] = {self.state_table: {"Keys": keys, "ConsistentRead": True}}
            while request:
                resp = self.ddb.batch_get_item(RequestItems=request)
                out.extend(
                    BranchRecord.from_item(it) for it in resp.get("Responses", {}).get(self.state_table, [])
                )
                request = resp.get("UnprocessedKeys") or {}
                if request:
                    time.sleep(0.05)
        return out
