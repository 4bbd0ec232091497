"""API keys in the StateTable, stored hashed: pk `APIKEY#<sha256(token)>`, sk `KEY`, with the
principal it authenticates as and a `revoked_at` once revoked. The token itself is printed once
by `threads-aws keys create` and never stored; its sha256 is the key id."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from ..store.records import wall_ms
from .principal import Principal

TOKEN_PREFIX = "thr_"


def key_id(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _key(kid: str) -> dict[str, Any]:
    return {"pk": {"S": f"APIKEY#{kid}"}, "sk": {"S": "KEY"}}


@dataclass(frozen=True, slots=True)
class Minted:
    token: str
    key_id: str
    principal: Principal


class ApiKeys:
    def __init__(self, ddb: Any, state_table: str, *, clock: Callable[[], int] = wall_ms) -> None:
        self.ddb = ddb
        self.state_table = state_table
        self.clock = clock

    def create(self, tenant: str, subject: str, issuer: str = "api") -> Minted:
        principal = Principal(issuer, tenant, subject)
        why = principal.too_long()
        if why is not None:
            raise ValueError(why)
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        kid = key_id(token)
        self.ddb.put_item(
            TableName=self.state_table,
            Item={
                **_key(kid),
                "kind": {"S": "api_key"},
                "issuer": {"S": issuer},
                "tenant": {"S": tenant},
                "subject": {"S": subject},
                "created_at": {"N": str(self.clock())},
            },
            ConditionExpression="attribute_not_exists(pk)",
        )
        return Minted(token, kid, principal)

    def revoke(self, token_or_id: str) -> bool:
        """Revoke by token or key id; False if no such key (or already revoked)."""
        kid = token_or_id if _is_hex64(token_or_id) else key_id(token_or_id)
        try:
            self.ddb.update_item(
                TableName=self.state_table,
                Key=_key(kid),
                UpdateExpression="SET revoked_at = :t",
                ConditionExpression="attribute_exists(pk) AND attribute_not_exists(revoked_at)",
                ExpressionAttributeValues={":t": {"N": str(self.clock())}},
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def lookup(self, token: str) -> Principal | None:
        """The principal of a live key, else None (unknown or revoked)."""
        out = self.ddb.get_item(TableName=self.state_table, Key=_key(key_id(token)), ConsistentRead=True)
        item = out.get("Item")
        if not item or "revoked_at" in item:
            return None
        return Principal(item["issuer"]["S"], item["tenant"]["S"], item["subject"]["S"])


def _is_hex64(s: str) -> bool:
    return len(s) == 64 and all(c in "0123456789abcdef" for c in s)
