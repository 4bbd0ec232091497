"""Thread schedules: one row per schedule a thread has (created through the add-only
``/v1/threads/{thread_id}/schedules`` routes, or declared on an agent).

Item: pk ``SCHEDULE#<schedule_id>``, sk ``SCHEDULE``: kind "schedule", schedule_id, tenant,
thread_id, branch_id, cron, timezone (IANA), input (the user_input text), agent (the name the
thread is pinned to), created_by (S: JSON principal), created_at, state (active | deleted),
checked_until (N: the local ticker's watermark, so occurrences that fell due while no host ran
are found as ``missed``). Indexes (gsi1): gsi1pk ``SCHEDULES#<thread_id>``, gsi1sk
``<created_at:016d>#<schedule_id>`` (a thread's schedules, oldest first). The ticker's list of
every active schedule is a second, small item per schedule (gsi1 holds one key pair per item):
pk ``SCHEDULE#<schedule_id>``, sk ``ACTIVE``, gsi1pk ``SCHEDULES#ACTIVE``. Creating writes both
in one transaction; deleting marks the row deleted (out of the thread's index) and removes the
marker in one transaction.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .dynamo import N, S, Tagged, each_item, n_of, s_of, transact
from .records import Item, StateConflict

ACTIVE = "SCHEDULES#ACTIVE"


def schedule_key(schedule_id: str) -> Item:
    return {"pk": S(f"SCHEDULE#{schedule_id}"), "sk": S("SCHEDULE")}


def active_key(schedule_id: str) -> Item:
    return {"pk": S(f"SCHEDULE#{schedule_id}"), "sk": S("ACTIVE")}


@dataclass(frozen=True, slots=True)
class ScheduleRow:
    schedule_id: str
    tenant: str
    thread_id: str
    branch_id: str
    cron: str
    timezone: str
    input: str
    agent: str
    created_by: dict[str, str] = field(default_factory=dict)
    created_at: int = 0
    state: str = "active"
    checked_until: int = 0

    def public(self) -> dict[str, Any]:
        return {
            "schedule_id": self.schedule_id,
            "thread_id": self.thread_id,
            "branch_id": self.branch_id,
            "cron": self.cron,
            "timezone": self.timezone,
            "input": self.input,
            "created_at": self.created_at,
        }

    def to_item(self) -> Item:
        return {
            **schedule_key(self.schedule_id),
            "kind": S("schedule"),
            "schedule_id": S(self.schedule_id),
            "tenant": S(self.tenant),
            "thread_id": S(self.thread_id),
            "branch_id": S(self.branch_id),
            "cron": S(self.cron),
            "timezone": S(self.timezone),
            "input": S(self.input),
            "agent": S(self.agent),
            "created_by": S(json.dumps(self.created_by, sort_keys=True)),
            "created_at": N(self.created_at),
            "state": S(self.state),
            "checked_until": N(self.checked_until),
            "gsi1pk": S(f"SCHEDULES#{self.thread_id}"),
            "gsi1sk": S(f"{self.created_at:016d}#{self.schedule_id}"),
        }

    @classmethod
    def from_item(cls, item: Item) -> ScheduleRow:
        return cls(
            schedule_id=s_of(item, "schedule_id") or "",
            tenant=s_of(item, "tenant") or "",
            thread_id=s_of(item, "thread_id") or "",
            branch_id=s_of(item, "branch_id") or "",
            cron=s_of(item, "cron") or "",
            timezone=s_of(item, "timezone") or "UTC",
            input=s_of(item, "input") or "",
            agent=s_of(item, "agent") or "",
            created_by=json.loads(s_of(item, "created_by") or "{}"),
            created_at=n_of(item, "created_at") or 0,
            state=s_of(item, "state") or "active",
            checked_until=n_of(item, "checked_until") or 0,
        )


class Schedules:
    def __init__(self, ddb: Any, state_table: str) -> None:
        self.ddb = ddb
        self.table = state_table

    def create(self, row: ScheduleRow) -> None:
        """The row and its active marker, in one transaction (a repeated id fails)."""
        marker = {
            **active_key(row.schedule_id),
            "kind": S("schedule_active"),
            "gsi1pk": S(ACTIVE),
            "gsi1sk": S(row.schedule_id),
        }
        cond = "attribute_not_exists(pk)"
        failed = transact(
            self.ddb,
            [
                Tagged(
                    "schedule",
                    {"Put": {"TableName": self.table, "Item": row.to_item(), "ConditionExpression": cond}},
                ),
                Tagged(
                    "active", {"Put": {"TableName": self.table, "Item": marker, "ConditionExpression": cond}}
                ),
            ],
        )
        if failed is not None:
            raise StateConflict(f"schedule {row.schedule_id} exists")

    def get(self, schedule_id: str) -> ScheduleRow | None:
        out = self.ddb.get_item(TableName=self.table, Key=schedule_key(schedule_id), ConsistentRead=True)
        item = out.get("Item")
        return ScheduleRow.from_item(item) if item else None

    def of_thread(self, thread_id: str) -> list[ScheduleRow]:
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": "gsi1",
            "KeyConditionExpression": "gsi1pk = :pk",
            "ExpressionAttributeValues": {":pk": S(f"SCHEDULES#{thread_id}")},
        }
        rows = (ScheduleRow.from_item(i) for i in each_item(self.ddb.query, kwargs))
        return [r for r in rows if r.state == "active"]

    def active_ids(self) -> list[str]:
        """Every active schedule's id (the local ticker's work list)."""
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": "gsi1",
            "KeyConditionExpression": "gsi1pk = :pk",
            "ExpressionAttributeValues": {":pk": S(ACTIVE)},
        }
        return [s_of(i, "gsi1sk") or "" for i in each_item(self.ddb.query, kwargs)]

    def delete(self, schedule_id: str, now: int) -> bool:
        """Mark deleted and drop its active marker (one transaction); False if not active."""
        failed = transact(
            self.ddb,
            [
                Tagged(
                    "schedule",
                    {
                        "Update": {
                            "TableName": self.table,
                            "Key": schedule_key(schedule_id),
                            "UpdateExpression": "SET #st = :deleted, deleted_at = :at REMOVE gsi1pk, gsi1sk",
                            "ConditionExpression": "#st = :active",
                            "ExpressionAttributeNames": {"#st": "state"},
                            "ExpressionAttributeValues": {
                                ":deleted": S("deleted"),
                                ":active": S("active"),
                                ":at": N(now),
                            },
                        }
                    },
                ),
                Tagged("active", {"Delete": {"TableName": self.table, "Key": active_key(schedule_id)}}),
            ],
        )
        return failed is None

    def checked(self, schedule_id: str, until: int) -> None:
        """Advance the ticker's watermark (never backwards)."""
        from botocore.exceptions import ClientError

        try:
            self.ddb.update_item(
                TableName=self.table,
                Key=schedule_key(schedule_id),
                UpdateExpression="SET checked_until = :u",
                ConditionExpression="attribute_exists(pk) AND checked_until < :u",
                ExpressionAttributeValues={":u": N(until)},
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
