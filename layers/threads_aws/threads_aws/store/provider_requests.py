"""Provider request rows: the id a provider gave a model request it accepted, so a worker that
died while the answer was in flight can look the answer up instead of sending again
(`engine.recovery`, `model_response_recovered`). Never part of the log: a missing or lost row
only means recovery cannot look the answer up, and the attempt is abandoned `unknown` (the path
without recovery).

Item: pk ``PROVREQ#<branch_id>``, sk ``<request_event_id>`` (the `model_request` it answers):
kind "provider_request", ``provider_request_id`` (S), ``created_at`` (N, ms) and ``ttl`` (N,
epoch s: DynamoDB deletes it TTL_S later; OpenAI keeps stored responses 30 days, recovery
happens within a lease TTL, so a day is plenty).

Ordering and fencing: only the lease holder calls the model, and C2 makes the `model_request`
durable before the call, so a row names a request already in the log. The first write wins
(`attribute_not_exists`): a request is accepted by the provider once, and a second id for
it would mean two billed answers, which a lookup must not hide.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from .dynamo import N, S, condition_failed, s_of
from .records import Clock, Item, wall_ms

TTL_S = 86_400


def provider_requests_pk(branch_id: str) -> str:
    return f"PROVREQ#{branch_id}"


def provider_request_key(branch_id: str, request_event_id: str) -> Item:
    return {"pk": S(provider_requests_pk(branch_id)), "sk": S(request_event_id)}


class ProviderRequests:
    def __init__(self, ddb: Any, state_table: str, *, clock: Clock = wall_ms, ttl_s: int = TTL_S) -> None:
        self.ddb = ddb
        self.table = state_table
        self.clock = clock
        self.ttl_s = ttl_s

    def put(self, branch_id: str, request_event_id: str, provider_request_id: str) -> bool:
        """Record the id unless one is recorded; False when one was (the first stays)."""
        now = self.clock()
        item = {
            **provider_request_key(branch_id, request_event_id),
            "kind": S("provider_request"),
            "provider_request_id": S(provider_request_id),
            "created_at": N(now),
            "ttl": N(now // 1000 + self.ttl_s),
        }
        try:
            self.ddb.put_item(TableName=self.table, Item=item, ConditionExpression="attribute_not_exists(pk)")
        except ClientError as exc:
            if condition_failed(exc):
                return False
            raise
        return True

    def get(self, branch_id: str, request_event_id: str) -> str | None:
        out = self.ddb.get_item(
            TableName=self.table, Key=provider_request_key(branch_id, request_event_id), ConsistentRead=True
        )
        item = out.get("Item")
        return s_of(item, "provider_request_id") if item else None
