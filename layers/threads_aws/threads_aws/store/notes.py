"""Notes the `note` tool stores (engine/tools.py): pk ``NOTE#<tenant>``, sk ``<effect key>``.

The effect key is the idempotency key: `store` is a conditional put, and a re-dispatch (same key,
attempt+1) finds the stored note and returns its number, so a note is never stored twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from .dynamo import N, S, condition_failed
from .records import Item

TEXT_MAX = 300 * 1024  # UTF-8 bytes: the row (text + ~300 bytes of keys) stays under DynamoDB's 400 KB


def note_key(tenant: str, effect_key: str) -> Item:
    return {"pk": S(f"NOTE#{tenant}"), "sk": S(effect_key)}


@dataclass(frozen=True, slots=True)
class Note:
    tenant: str
    effect_key: str
    text: str
    thread_id: str
    branch_id: str
    call_id: str
    created_at: int


class Notes:
    def __init__(self, ddb: Any, state_table: str) -> None:
        self.ddb = ddb
        self.table = state_table

    def store(self, note: Note) -> int:
        """Store the note once per effect key; returns its number. `n` is the tenant's note count
        at store time (a display number: two concurrent first notes may share one)."""
        key = note_key(note.tenant, note.effect_key)
        existing = self._get(key)
        if existing is not None:
            return int(existing["n"]["N"])
        count = self.ddb.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": key["pk"]},
            Select="COUNT",
            ConsistentRead=True,
        )["Count"]
        n = count + 1
        item = {
            **key,
            "kind": S("note"),
            "n": N(n),
            "text": S(note.text),
            "thread_id": S(note.thread_id),
            "branch_id": S(note.branch_id),
            "call_id": S(note.call_id),
            "created_at": N(note.created_at),
        }
        try:
            self.ddb.put_item(TableName=self.table, Item=item, ConditionExpression="attribute_not_exists(pk)")
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            stored = self._get(key)  # a concurrent dispatch of the same key stored it first
            assert stored is not None
            n = int(stored["n"]["N"])
        return n

    def _get(self, key: Item) -> Item | None:
        item: Item | None = self.ddb.get_item(TableName=self.table, Key=key, ConsistentRead=True).get("Item")
        return item
