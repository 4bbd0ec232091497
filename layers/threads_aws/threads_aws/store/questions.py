"""Question rows (questions of semantics.md §2): one per ask_user call the worker parks on.

Item: pk ``Q#<branch_id>``, sk ``<call_id>``: kind "question", tenant, thread_id, branch_id,
call_id, question, options (S: JSON array, absent without options), multi_select (BOOL) (the
question clipped to `INLINE_COPY_MAX` bytes, options over it left out: the log holds the call),
expires_at (N, ms), state ("open", then answered | expired), asked_by (S: canonical JSON of the
principal who opened the turn: the only one who may answer), created_at (N, ms), decided_at
once answered.

Both writes are companions: the worker opens the row with `parked{input}`
(``attribute_not_exists(pk)``), and an answer moves it to answered (``state = open``) in the
transaction that appends the settling result.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..core.canonical import canonical_bytes
from .dynamo import N, S, b_of, n_of, put_new, s_of
from .records import INLINE_COPY_MAX, Companion, Item

TAG = "question"


def question_key(branch_id: str, call_id: str) -> Item:
    return {"pk": S(f"Q#{branch_id}"), "sk": S(call_id)}


@dataclass(frozen=True, slots=True)
class QuestionRow:
    tenant: str
    thread_id: str
    branch_id: str
    call_id: str
    input: dict[str, Any]  # the ask_user call's input (question, options?, multi_select?)
    expires_at: int
    asked_by: dict[str, Any] | None
    created_at: int
    state: str = "open"

    @classmethod
    def from_item(cls, item: Item) -> QuestionRow:
        call_input: dict[str, Any] = {"question": s_of(item, "question") or ""}
        if "options" in item:
            call_input["options"] = json.loads(item["options"]["S"])
        if b_of(item, "multi_select"):
            call_input["multi_select"] = True
        asked_by = s_of(item, "asked_by")
        return cls(
            tenant=s_of(item, "tenant") or "",
            thread_id=s_of(item, "thread_id") or "",
            branch_id=s_of(item, "branch_id") or "",
            call_id=item["sk"]["S"],
            input=call_input,
            expires_at=n_of(item, "expires_at") or 0,
            asked_by=json.loads(asked_by) if asked_by else None,
            created_at=n_of(item, "created_at") or 0,
            state=s_of(item, "state") or "open",
        )

    def item(self) -> Item:
        item: Item = {
            **question_key(self.branch_id, self.call_id),
            "kind": S("question"),
            "tenant": S(self.tenant),
            "thread_id": S(self.thread_id),
            "branch_id": S(self.branch_id),
            "call_id": S(self.call_id),
            # the log holds the whole question; the row only proves the ask is open
            "question": S(_clip(str(self.input.get("question", "")), INLINE_COPY_MAX)),
            "multi_select": {"BOOL": self.input.get("multi_select") is True},
            "expires_at": N(self.expires_at),
            "state": S(self.state),
            "created_at": N(self.created_at),
        }
        options = json.dumps(self.input["options"]) if isinstance(self.input.get("options"), list) else ""
        if options and len(options.encode("utf-8")) <= INLINE_COPY_MAX:
            item["options"] = S(options)
        if self.asked_by is not None:
            item["asked_by"] = S(canonical_bytes(self.asked_by).decode("utf-8"))
        return item


def _clip(text: str, limit: int) -> str:
    return text.encode("utf-8")[:limit].decode("utf-8", "ignore")


class Questions:
    def __init__(self, ddb: Any, state_table: str) -> None:
        self.ddb = ddb
        self.table = state_table

    def get(self, branch_id: str, call_id: str) -> QuestionRow | None:
        out = self.ddb.get_item(
            TableName=self.table, Key=question_key(branch_id, call_id), ConsistentRead=True
        )
        item = out.get("Item")
        return QuestionRow.from_item(item) if item else None

    def open(self, row: QuestionRow) -> Companion:
        """The new open row, to commit with `parked{input}`."""
        return Companion(TAG, put_new(self.table, row.item()))

    def answered(self, branch_id: str, call_id: str, now: int) -> Companion:
        """Move the open row to answered, to commit with the answer's `tool_result`."""
        update = {
            "TableName": self.table,
            "Key": question_key(branch_id, call_id),
            "UpdateExpression": "SET #st = :answered, decided_at = :at",
            "ConditionExpression": "#st = :open",
            "ExpressionAttributeNames": {"#st": "state"},
            "ExpressionAttributeValues": {":answered": S("answered"), ":open": S("open"), ":at": N(now)},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        return Companion(TAG, {"Update": update})
