"""Schedule occurrences (schedule_occurrences of semantics.md §2): one row per (tenant,
schedule_id, occurrence_at), the reservation that makes exactly one scheduler fire an occurrence.

Item: pk ``OCCURRENCE#<tenant>#<schedule_id>#<occurrence_at:016d>`` (tenant and schedule id
escaped, '%' then '#'), sk ``OCCURRENCE``: kind "schedule_occurrence", tenant, schedule_id,
occurrence_at (N, UTC ms), state (pending → fired | skipped), reason (missed | overlap |
removed), thread_id, branch_id, claimed_at, logged_seq (the seq of its schedule_fired /
schedule_skipped), and, frozen while pending, agent, input_json, timezone, principal (S: JSON).
A pending row is in the thread's pending index: gsi1pk ``OCCURRENCESQ#<thread_id>``, gsi1sk
``<occurrence_at:016d>#<schedule_id>`` (occurrence order), removed when it is decided.

1. `reserve`: a `Put` with ``attribute_not_exists(pk)``; of two schedulers, one wins; the loser
   (and a retried EventBridge delivery) finds the row and goes on to decide what is pending.
2. `decide`: a companion of the append that logs the decision (``state = pending``), so a stale
   scheduler's update matches nothing and its append rolls back; `retire` decides with no
   append (a removed schedule or agent).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from .dynamo import N, S, condition_failed, each_item, n_of, s_of
from .inbox import esc
from .records import Companion, Item

TAG = "schedule_occurrence"


def occurrence_key(tenant: str, schedule_id: str, occurrence_at: int) -> Item:
    return {
        "pk": S(f"OCCURRENCE#{esc(tenant)}#{esc(schedule_id)}#{occurrence_at:016d}"),
        "sk": S("OCCURRENCE"),
    }


@dataclass(frozen=True, slots=True)
class OccurrenceRow:
    tenant: str
    schedule_id: str
    occurrence_at: int
    thread_id: str
    branch_id: str
    agent: str
    input: str
    timezone: str
    claimed_at: int
    principal: dict[str, str] | None = None  # whose run a fired occurrence starts (frozen)
    state: str = "pending"
    reason: str | None = None  # a pending row may already carry `missed`
    logged_seq: int | None = None

    @property
    def occurrence_id(self) -> str:
        return f"{self.schedule_id}@{self.occurrence_at}"

    def key(self) -> Item:
        return occurrence_key(self.tenant, self.schedule_id, self.occurrence_at)

    def to_item(self) -> Item:
        item: Item = {
            **self.key(),
            "kind": S("schedule_occurrence"),
            "tenant": S(self.tenant),
            "schedule_id": S(self.schedule_id),
            "occurrence_at": N(self.occurrence_at),
            "state": S(self.state),
            "thread_id": S(self.thread_id),
            "branch_id": S(self.branch_id),
            "claimed_at": N(self.claimed_at),
            "agent": S(self.agent),
            "input_json": S(json.dumps(self.input)),
            "timezone": S(self.timezone),
            "gsi1pk": S(f"OCCURRENCESQ#{self.thread_id}"),
            "gsi1sk": S(f"{self.occurrence_at:016d}#{self.schedule_id}"),
        }
        if self.reason is not None:
            item["reason"] = S(self.reason)
        if self.principal is not None:
            item["principal"] = S(json.dumps(self.principal, sort_keys=True))
        return item

    @classmethod
    def from_item(cls, item: Item) -> OccurrenceRow:
        return cls(
            tenant=s_of(item, "tenant") or "",
            schedule_id=s_of(item, "schedule_id") or "",
            occurrence_at=n_of(item, "occurrence_at") or 0,
            thread_id=s_of(item, "thread_id") or "",
            branch_id=s_of(item, "branch_id") or "",
            agent=s_of(item, "agent") or "",
            input=json.loads(s_of(item, "input_json") or '""'),
            timezone=s_of(item, "timezone") or "UTC",
            claimed_at=n_of(item, "claimed_at") or 0,
            principal=json.loads(s_of(item, "principal") or "null"),
            state=s_of(item, "state") or "pending",
            reason=s_of(item, "reason"),
            logged_seq=n_of(item, "logged_seq"),
        )


class Occurrences:
    def __init__(self, ddb: Any, state_table: str) -> None:
        self.ddb = ddb
        self.table = state_table

    def reserve(self, row: OccurrenceRow) -> bool:
        """Insert the pending row; False if this occurrence was reserved already."""
        try:
            self.ddb.put_item(
                TableName=self.table, Item=row.to_item(), ConditionExpression="attribute_not_exists(pk)"
            )
        except ClientError as exc:
            if condition_failed(exc):
                return False
            raise
        return True

    def get(self, tenant: str, schedule_id: str, occurrence_at: int) -> OccurrenceRow | None:
        out = self.ddb.get_item(
            TableName=self.table, Key=occurrence_key(tenant, schedule_id, occurrence_at), ConsistentRead=True
        )
        item = out.get("Item")
        return OccurrenceRow.from_item(item) if item else None

    def pending(self, thread_id: str) -> list[OccurrenceRow]:
        """The thread's pending rows in occurrence order (eventually consistent index)."""
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": "gsi1",
            "KeyConditionExpression": "gsi1pk = :pk",
            "ExpressionAttributeValues": {":pk": S(f"OCCURRENCESQ#{thread_id}")},
        }
        rows = (OccurrenceRow.from_item(i) for i in each_item(self.ddb.query, kwargs))
        return [r for r in rows if r.state == "pending"]

    def _update(
        self, row: OccurrenceRow, state: str, reason: str | None, seq: int, now: int
    ) -> dict[str, Any]:
        values: dict[str, Any] = {":st": S(state), ":pending": S("pending"), ":seq": N(seq), ":at": N(now)}
        expr = "SET #st = :st, logged_seq = :seq, decided_at = :at"
        if reason is not None:
            expr += ", reason = :why"
            values[":why"] = S(reason)
        return {
            "TableName": self.table,
            "Key": row.key(),
            "UpdateExpression": expr + " REMOVE gsi1pk, gsi1sk",
            "ConditionExpression": "#st = :pending",
            "ExpressionAttributeNames": {"#st": "state"},
            "ExpressionAttributeValues": values,
        }

    def decide(self, row: OccurrenceRow, state: str, reason: str | None, seq: int, now: int) -> Companion:
        """fired / skipped at `seq`, to commit with the events that log it (fails unless pending)."""
        return Companion(TAG, {"Update": self._update(row, state, reason, seq, now)})

    def retire(self, row: OccurrenceRow, reason: str, now: int) -> bool:
        """Decide with nothing appended (removed: the schedule, agent or pin is gone)."""
        try:
            self.ddb.update_item(**self._update(row, "retired", reason, 0, now))
        except ClientError as exc:
            if condition_failed(exc):
                return False
            raise
        return True
