"""API keys, stored hashed: pk ``APIKEY#<key id>``, sk ``KEY``, where the key id is the sha256 of
the token (`host.keys`), with the principal it authenticates as (issuer, tenant, subject) and a
``revoked_at`` once revoked. The token itself is never stored."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from .dynamo import N, S, condition_failed
from .records import Item


def api_key_key(key_id: str) -> Item:
    return {"pk": S(f"APIKEY#{key_id}"), "sk": S("KEY")}


@dataclass(frozen=True, slots=True)
class ApiKeyRow:
    issuer: str
    tenant: str
    subject: str


class ApiKeyRows:
    def __init__(self, ddb: Any, state_table: str) -> None:
        self.ddb = ddb
        self.table = state_table

    def create(self, key_id: str, row: ApiKeyRow, now: int) -> None:
        """Store a new key (a collision of 256-bit ids is a ConditionalCheckFailed, never an
        overwrite)."""
        item = {
            **api_key_key(key_id),
            "kind": S("api_key"),
            "issuer": S(row.issuer),
            "tenant": S(row.tenant),
            "subject": S(row.subject),
            "created_at": N(now),
        }
        self.ddb.put_item(TableName=self.table, Item=item, ConditionExpression="attribute_not_exists(pk)")

    def revoke(self, key_id: str, now: int) -> bool:
        """False if there is no such key (or it is revoked already)."""
        try:
            self.ddb.update_item(
                TableName=self.table,
                Key=api_key_key(key_id),
                UpdateExpression="SET revoked_at = :t",
                ConditionExpression="attribute_exists(pk) AND attribute_not_exists(revoked_at)",
                ExpressionAttributeValues={":t": N(now)},
            )
        except ClientError as exc:
            if condition_failed(exc):
                return False
            raise
        return True

    def live(self, key_id: str) -> ApiKeyRow | None:
        """The key's principal, unless unknown or revoked."""
        out = self.ddb.get_item(TableName=self.table, Key=api_key_key(key_id), ConsistentRead=True)
        item = out.get("Item")
        if not item or "revoked_at" in item:
            return None
        return ApiKeyRow(item["issuer"]["S"], item["tenant"]["S"], item["subject"]["S"])
