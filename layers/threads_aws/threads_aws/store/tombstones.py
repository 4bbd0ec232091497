"""Tombstones (semantics.md §2 `tombstones(thread_id, tenant_id, deleted_at)`): one StateTable item
per deleted thread, ``TOMBSTONE#<thread_id>`` / ``TOMBSTONE``.

It is written in the deletion's transaction (`store.deletion`), never overwritten
(``attribute_not_exists``), and outlives the thread: a repeated DELETE of the same tenant's thread
finds it (idempotent), another tenant's reads as absent.

While the thread's rows are still being removed (`state = purging`) it also carries what the
purge needs (``branch_ids``, ``children``: the subagent child threads of the cascade) and
gsi1pk ``TOMBSTONES#PURGING`` / gsi1sk ``<deleted_at:016d>#<thread_id>``, the sweeper's work list;
`done` drops all three, leaving only (thread_id, tenant, deleted_at, reason).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .dynamo import N, S, s_of
from .records import Item

PURGING_GSI = "TOMBSTONES#PURGING"


def tombstone_key(thread_id: str) -> Item:
    return {"pk": S(f"TOMBSTONE#{thread_id}"), "sk": S("TOMBSTONE")}


@dataclass(frozen=True, slots=True)
class Tombstone:
    thread_id: str
    tenant: str
    deleted_at: int
    reason: str = "api"  # api | retention | tenant
    state: str = "purging"  # purging | done
    branch_ids: tuple[str, ...] = ()
    children: tuple[str, ...] = ()

    def item(self) -> Item:
        item: Item = {
            **tombstone_key(self.thread_id),
            "kind": S("tombstone"),
            "thread_id": S(self.thread_id),
            "tenant": S(self.tenant),
            "deleted_at": N(self.deleted_at),
            "reason": S(self.reason),
            "state": S(self.state),
        }
        if self.state == "purging":
            item["gsi1pk"] = S(PURGING_GSI)
            item["gsi1sk"] = S(f"{self.deleted_at:016d}#{self.thread_id}")
            if self.branch_ids:
                item["branch_ids"] = {"SS": sorted(self.branch_ids)}
            if self.children:
                item["children"] = {"SS": sorted(self.children)}
        return item

    @classmethod
    def from_item(cls, item: Item) -> Tombstone:
        return cls(
            thread_id=item["thread_id"]["S"],
            tenant=item["tenant"]["S"],
            deleted_at=int(item["deleted_at"]["N"]),
            reason=s_of(item, "reason") or "api",
            state=s_of(item, "state") or "done",
            branch_ids=tuple(item.get("branch_ids", {}).get("SS", ())),
            children=tuple(item.get("children", {}).get("SS", ())),
        )


def tombstone_put(table: str, stone: Tombstone) -> Item:
    """The TransactItem writing a new tombstone (fails if the thread was already deleted)."""
    return {
        "Put": {
            "TableName": table,
            "Item": stone.item(),
            "ConditionExpression": "attribute_not_exists(pk)",
        }
    }


class Tombstones:
    def __init__(self, ddb: Any, state_table: str) -> None:
        self.ddb = ddb
        self.table = state_table

    def get(self, tenant: str, thread_id: str) -> Tombstone | None:
        """The tenant's tombstone of `thread_id` (another tenant's reads as absent)."""
        out = self.ddb.get_item(TableName=self.table, Key=tombstone_key(thread_id), ConsistentRead=True)
        item = out.get("Item")
        if not item or s_of(item, "tenant") != tenant:
            return None
        return Tombstone.from_item(item)

    def ensure(self, stone: Tombstone) -> Tombstone:
        """Write `stone` unless the thread has one already; the stored tombstone either way."""
        from botocore.exceptions import ClientError

        from .dynamo import condition_failed

        try:
            self.ddb.put_item(**tombstone_put(self.table, stone)["Put"])
            return stone
        except ClientError as exc:
            if not condition_failed(exc):
                raise
        out = self.ddb.get_item(TableName=self.table, Key=tombstone_key(stone.thread_id), ConsistentRead=True)
        return Tombstone.from_item(out["Item"])

    def add_branches(self, thread_id: str, branch_ids: Sequence[str]) -> None:
        """Record branches the purge found beyond the plan (a fork committed meanwhile)."""
        if branch_ids:
            self.ddb.update_item(
                TableName=self.table,
                Key=tombstone_key(thread_id),
                UpdateExpression="ADD branch_ids :b",
                ExpressionAttributeValues={":b": {"SS": sorted(set(branch_ids))}},
            )

    def done(self, thread_id: str) -> None:
        """The purge finished: keep only (thread_id, tenant, deleted_at, reason)."""
        self.ddb.update_item(
            TableName=self.table,
            Key=tombstone_key(thread_id),
            UpdateExpression="SET #st = :done REMOVE gsi1pk, gsi1sk, branch_ids, children",
            ExpressionAttributeNames={"#st": "state"},
            ExpressionAttributeValues={":done": S("done")},
        )

    def purging(self, limit: int = 100) -> list[Tombstone]:
        """Tombstones whose purge hasn't finished, oldest first (the sweeper's work list)."""
        out: list[Tombstone] = []
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": "gsi1",
            "KeyConditionExpression": "gsi1pk = :p",
            "ExpressionAttributeValues": {":p": S(PURGING_GSI)},
        }
        while len(out) < limit:
            page = self.ddb.query(**kwargs)
            out.extend(Tombstone.from_item(i) for i in page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return out[:limit]
