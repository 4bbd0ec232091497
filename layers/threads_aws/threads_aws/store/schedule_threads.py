"""Schedule threads (schedule_threads of semantics.md §2): the current thread of an agent-declared
schedule (one per schedule: the row's key is the schedule, so there is exactly one current).

Item: pk ``SCHEDULETHREAD#<tenant>#<schedule_id>`` (escaped, '%' then '#'), sk ``CURRENT``:
kind "schedule_thread", tenant, schedule_id, thread_id, branch_id, created_at. Created as a
companion of its thread's creation (``attribute_not_exists(pk)``): a route exists iff its
thread does, and of two syncs racing, one creates the thread, the other reads the winner's row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .dynamo import N, S, n_of, put_new, s_of
from .inbox import esc
from .records import Companion, Item

TAG = "schedule_thread"


def current_key(tenant: str, schedule_id: str) -> Item:
    return {"pk": S(f"SCHEDULETHREAD#{esc(tenant)}#{esc(schedule_id)}"), "sk": S("CURRENT")}


@dataclass(frozen=True, slots=True)
class ScheduleThread:
    tenant: str
    schedule_id: str
    thread_id: str
    branch_id: str
    created_at: int = 0

    def to_item(self) -> Item:
        return {
            **current_key(self.tenant, self.schedule_id),
            "kind": S("schedule_thread"),
            "tenant": S(self.tenant),
            "schedule_id": S(self.schedule_id),
            "thread_id": S(self.thread_id),
            "branch_id": S(self.branch_id),
            "created_at": N(self.created_at),
        }

    @classmethod
    def from_item(cls, item: Item) -> ScheduleThread:
        return cls(
            tenant=s_of(item, "tenant") or "",
            schedule_id=s_of(item, "schedule_id") or "",
            thread_id=s_of(item, "thread_id") or "",
            branch_id=s_of(item, "branch_id") or "",
            created_at=n_of(item, "created_at") or 0,
        )


class ScheduleThreads:
    def __init__(self, ddb: Any, state_table: str) -> None:
        self.ddb = ddb
        self.table = state_table

    def get(self, tenant: str, schedule_id: str) -> ScheduleThread | None:
        out = self.ddb.get_item(
            TableName=self.table, Key=current_key(tenant, schedule_id), ConsistentRead=True
        )
        item = out.get("Item")
        return ScheduleThread.from_item(item) if item else None

    def create(self, row: ScheduleThread) -> Companion:
        return Companion(TAG, put_new(self.table, row.to_item()))
