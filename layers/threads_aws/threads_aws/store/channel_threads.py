"""Channel routes (channel_threads of semantics.md §2): the verified (tenant, channel,
installation_id, address) → thread mapping, created or got atomically.

Item: pk ``CHANNELTHREAD#<tenant>#<channel>#<installation_id>#<address>`` (each part escaped,
'%' then '#'), sk ``ROUTE``: kind "channel_thread", tenant, channel, installation_id, address,
thread_id, branch_id (the thread's main branch), created_at.

Create-or-get: the row is a companion of the new thread's creation (`Put` with
``attribute_not_exists(pk)``), so a route exists iff its thread does. Of two webhooks racing on
one new conversation, exactly one creates the thread; the other's transaction fails the route's
condition, writes nothing, and reads the winner's row back (ALL_OLD). Only the verified address
selects the row: message text never does. A handoff moves the row to its target (`move`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .dynamo import N, S, n_of, put_new, s_of
from .inbox import esc
from .records import Companion, Item

TAG = "channel_thread"


def route_key(tenant: str, channel: str, installation_id: str, address: str) -> Item:
    pk = "CHANNELTHREAD#" + "#".join(esc(p) for p in (tenant, channel, installation_id, address))
    return {"pk": S(pk), "sk": S("ROUTE")}


@dataclass(frozen=True, slots=True)
class ChannelRoute:
    tenant: str
    channel: str
    installation_id: str
    address: str
    thread_id: str
    branch_id: str
    created_at: int = 0

    def to_item(self) -> Item:
        return {
            **route_key(self.tenant, self.channel, self.installation_id, self.address),
            "kind": S("channel_thread"),
            "tenant": S(self.tenant),
            "channel": S(self.channel),
            "installation_id": S(self.installation_id),
            "address": S(self.address),
            "thread_id": S(self.thread_id),
            "branch_id": S(self.branch_id),
            "created_at": N(self.created_at),
        }

    @classmethod
    def from_item(cls, item: Item) -> ChannelRoute:
        return cls(
            tenant=s_of(item, "tenant") or "",
            channel=s_of(item, "channel") or "",
            installation_id=s_of(item, "installation_id") or "",
            address=s_of(item, "address") or "",
            thread_id=s_of(item, "thread_id") or "",
            branch_id=s_of(item, "branch_id") or "",
            created_at=n_of(item, "created_at") or 0,
        )


class ChannelThreads:
    def __init__(self, ddb: Any, state_table: str) -> None:
        self.ddb = ddb
        self.table = state_table

    def get(self, tenant: str, channel: str, installation_id: str, address: str) -> ChannelRoute | None:
        out = self.ddb.get_item(
            TableName=self.table,
            Key=route_key(tenant, channel, installation_id, address),
            ConsistentRead=True,
        )
        item = out.get("Item")
        return ChannelRoute.from_item(item) if item else None

    def create(self, route: ChannelRoute) -> Companion:
        """The new route, to commit with its thread's creation (fails if the address has one:
        the stored route comes back in the CompanionFailed)."""
        return Companion(TAG, put_new(self.table, route.to_item()))

    def move(
        self,
        tenant: str,
        channel: str,
        installation_id: str,
        address: str,
        from_thread: str,
        to: tuple[str, str],
    ) -> Companion:
        """A handoff moves the conversation's route to its target `to` = (thread_id, branch_id):
        one conditional UPDATE on (tenant, address) that holds only while the route still names
        `from_thread` (semantics §5 Channels); it commits with the target's creation, so the
        route moves iff the target exists. A failed condition means re-read the route."""
        update = {
            "TableName": self.table,
            "Key": route_key(tenant, channel, installation_id, address),
            "UpdateExpression": "SET thread_id = :t, branch_id = :b",
            "ConditionExpression": "thread_id = :s",
            "ExpressionAttributeValues": {":t": S(to[0]), ":b": S(to[1]), ":s": S(from_thread)},
        }
        return Companion(TAG + ":move", {"Update": update})
