"""Inbox rows (inbox of semantics.md §2): one per verified channel item, written before the
webhook is acked, consumed by the inbox consumer under the branch writer.

Item: pk ``INBOX#<tenant>#<channel>#<installation_id>#<item_key>`` (each part escaped, '%' then
'#', so no tuple can spell another), sk ``INBOX``: kind "inbox", inbox_id, tenant, channel,
installation_id, item_key, delivery_id, thread_id, branch_id, item (S: canonical JSON of
`channels.model.InboxItem.as_dict`), received_at (N, ms), ``order`` (S, the row's place in
inbox order) and, once consumed, consumed_seq (N: the seq of its `channel_delivery` or decision
event; 0 when a final refusal consumed it with nothing appended) and consumed_at.

Pending index: an unconsumed row carries gsi1pk ``INBOXQ#<thread_id>``, gsi1sk = ``order``
(``<received_at:016d>#<batch_id>#<batch index:04d>``): a thread's pending items in inbox order.
The batch id (a UUIDv7, increasing within a process) keeps two batches received in the same
millisecond apart, each in its own item order (an index before the batch would interleave them).
Consuming REMOVEs both, so the index holds only what is still to apply and never grows with a
thread's history.

Writes:
- `puts`: the batch's rows, each ``attribute_not_exists(pk)`` (the unique (tenant, channel,
  installation, item_key)), to commit in ONE transaction (`insert_batch`) or as companions of a
  new thread's creation; a redelivered item fails its condition and is dropped from the retry;
- `consume`: a companion of the append that applies the item (``attribute_not_exists
  (consumed_seq)``), so an item is applied at most once and its consumption is exactly as durable
  as its events; `refuse` consumes with nothing appended (a plain conditional update).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from ..core.canonical import canonical_bytes
from .dynamo import MAX_TXN_ITEMS, N, S, Tagged, condition_failed, each_item, n_of, put_new, s_of, transact
from .records import Companion, Item

TAG = "inbox"
PENDING_PREFIX = "INBOXQ#"


def esc(part: str) -> str:
    return part.replace("%", "%25").replace("#", "%23")


def inbox_pk(tenant: str, channel: str, installation_id: str, item_key: str) -> str:
    return "INBOX#" + "#".join(esc(p) for p in (tenant, channel, installation_id, item_key))


def inbox_key(pk: str) -> Item:
    return {"pk": S(pk), "sk": S("INBOX")}


def pending_pk(thread_id: str) -> str:
    return PENDING_PREFIX + thread_id


@dataclass(frozen=True, slots=True)
class InboxRow:
    inbox_id: str
    tenant: str
    channel: str
    installation_id: str
    item_key: str
    delivery_id: str
    thread_id: str
    branch_id: str
    item: dict[str, Any]  # InboxItem.as_dict()
    received_at: int
    order: str
    consumed_seq: int | None = None

    @property
    def pk(self) -> str:
        return inbox_pk(self.tenant, self.channel, self.installation_id, self.item_key)

    @property
    def kind(self) -> str:
        return str(self.item.get("kind", "message"))

    def to_item(self) -> Item:
        return {
            **inbox_key(self.pk),
            "kind": S("inbox"),
            "inbox_id": S(self.inbox_id),
            "tenant": S(self.tenant),
            "channel": S(self.channel),
            "installation_id": S(self.installation_id),
            "item_key": S(self.item_key),
            "delivery_id": S(self.delivery_id),
            "thread_id": S(self.thread_id),
            "branch_id": S(self.branch_id),
            "item": S(canonical_bytes(self.item).decode("utf-8")),
            "received_at": N(self.received_at),
            "order": S(self.order),
            "gsi1pk": S(pending_pk(self.thread_id)),
            "gsi1sk": S(self.order),
        }

    @classmethod
    def from_item(cls, item: Item) -> InboxRow:
        return cls(
            inbox_id=s_of(item, "inbox_id") or "",
            tenant=s_of(item, "tenant") or "",
            channel=s_of(item, "channel") or "",
            installation_id=s_of(item, "installation_id") or "",
            item_key=s_of(item, "item_key") or "",
            delivery_id=s_of(item, "delivery_id") or "",
            thread_id=s_of(item, "thread_id") or "",
            branch_id=s_of(item, "branch_id") or "",
            item=json.loads(s_of(item, "item") or "{}"),
            received_at=n_of(item, "received_at") or 0,
            order=s_of(item, "order") or "",
            consumed_seq=n_of(item, "consumed_seq"),
        )


def order_key(received_at: int, batch_id: str, index: int) -> str:
    return f"{received_at:016d}#{batch_id}#{index:04d}"


class Inbox:
    def __init__(self, ddb: Any, state_table: str) -> None:
        self.ddb = ddb
        self.table = state_table

    # ------------------------------------------------------------------ writes
    def put(self, row: InboxRow) -> Companion:
        """The new row, as a companion (of a new thread's creation) or a batch member."""
        return Companion(f"{TAG}:{row.pk}", put_new(self.table, row.to_item(), return_old=False))

    def insert_batch(self, rows: Sequence[InboxRow]) -> list[InboxRow]:
        """Insert the rows in one transaction; rows already stored (a redelivery) are dropped and
        the rest retried, each try one transaction. Returns the rows this call inserted. (A batch
        past DynamoDB's 100 items per transaction goes in chunks of 100: no provider sends one.)"""
        done: list[InboxRow] = []
        for i in range(0, len(rows), MAX_TXN_ITEMS):
            todo = list(rows[i : i + MAX_TXN_ITEMS])
            while todo:
                failed = transact(self.ddb, [Tagged(c.tag, c.item) for c in map(self.put, todo)])
                if failed is None:
                    done += todo
                    break
                todo = [r for r in todo if f"{TAG}:{r.pk}" not in failed]
        return done

    def consume(self, row: InboxRow, seq: int, now: int) -> Companion:
        """Mark the row applied at `seq`, to commit with the events that apply it (fails if
        another writer consumed it first: the append then writes nothing)."""
        return Companion(TAG, {"Update": self._consume_update(row.pk, seq, now)})

    def refuse(self, row: InboxRow, now: int) -> bool:
        """Consume a row a final refusal answered: nothing appended (consumed_seq 0). False if it
        was consumed already."""
        try:
            self.ddb.update_item(**self._consume_update(row.pk, 0, now))
        except ClientError as exc:
            if condition_failed(exc):
                return False
            raise
        return True

    def _consume_update(self, pk: str, seq: int, now: int) -> dict[str, Any]:
        return {
            "TableName": self.table,
            "Key": inbox_key(pk),
            "UpdateExpression": "SET consumed_seq = :seq, consumed_at = :at REMOVE gsi1pk, gsi1sk",
            "ConditionExpression": "attribute_exists(pk) AND attribute_not_exists(consumed_seq)",
            "ExpressionAttributeValues": {":seq": N(seq), ":at": N(now)},
        }

    # ------------------------------------------------------------------ reads
    def get(self, pk: str) -> InboxRow | None:
        out = self.ddb.get_item(TableName=self.table, Key=inbox_key(pk), ConsistentRead=True)
        item = out.get("Item")
        return InboxRow.from_item(item) if item else None

    def rows(self, pks: Sequence[str]) -> list[InboxRow]:
        """The stored rows of these keys (strongly consistent BatchGetItem), in no order."""
        out: list[InboxRow] = []
        keys = [inbox_key(pk) for pk in dict.fromkeys(pks)]
        for i in range(0, len(keys), 100):
            request: dict[str, Any] = {self.table: {"Keys": keys[i : i + 100], "ConsistentRead": True}}
            while request:
                resp = self.ddb.batch_get_item(RequestItems=request)
                out.extend(InboxRow.from_item(it) for it in resp.get("Responses", {}).get(self.table, []))
                request = resp.get("UnprocessedKeys") or {}
        return out

    def pending(self, thread_id: str, limit: int = 100) -> list[InboxRow]:
        """A thread's unconsumed rows in inbox order (the sparse pending index: eventually
        consistent, so the consumer also reads the keys its message names, consistently)."""
        out: list[InboxRow] = []
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": "gsi1",
            "KeyConditionExpression": "gsi1pk = :pk",
            "ExpressionAttributeValues": {":pk": S(pending_pk(thread_id))},
            "Limit": limit,
        }
        while len(out) < limit:
            resp = self.ddb.query(**kwargs)
            out.extend(InboxRow.from_item(it) for it in resp.get("Items", []))
            if "LastEvaluatedKey" not in resp:
                break
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]
        return out[:limit]

    def all_rows(self) -> list[InboxRow]:
        """Every inbox row, oldest first (a Scan: conformance and tests only)."""
        out: list[InboxRow] = []
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "FilterExpression": "begins_with(pk, :p)",
            "ExpressionAttributeValues": {":p": S("INBOX#")},
        }
        out = [InboxRow.from_item(it) for it in each_item(self.ddb.scan, kwargs)]
        return sorted(out, key=lambda r: r.order)
