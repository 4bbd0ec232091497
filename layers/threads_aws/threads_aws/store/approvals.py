"""Approval rows (approvals of semantics.md §2): one per challenge, the host's copy of what an
approver decides on.

Item: pk ``APPROVAL#<challenge_id>``, sk ``APPROVAL``: kind "approval", challenge_id, tenant,
thread_id, branch_id, call_id, args_hash, expires_at (N, ms), state ("open", then granted |
denied | expired), tool, input (S: canonical JSON of the call input; over `INLINE_COPY_MAX`
it stays in the log only and the row says ``input_in_log``, BOOL: a readback answers the
fold's call input), suggested_rules (S: JSON array of rule strings, those that fit),
created_at (N, ms), decided_by / decided_at once decided; gsi1pk ``APPROVALS#<branch_id>``,
gsi1sk ``<created_at:016d>#<challenge_id>`` (a branch's approvals, oldest first).

Both writes are companions: the worker opens the row with `approval_requested` + `parked`
(``attribute_not_exists(pk)``: a re-decided step can't overwrite a row the API already moved
on), and a decision consumes it (``state = open``) in the transaction of the decision's events,
so a second answer fails the condition and appends nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..core.canonical import canonical_bytes
from .dynamo import N, S, b_of, n_of, put_new, s_of
from .records import INLINE_COPY_MAX, Companion, Item

TAG = "approval"


def approval_key(challenge_id: str) -> Item:
    return {"pk": S(f"APPROVAL#{challenge_id}"), "sk": S("APPROVAL")}


def approvals_gsi_pk(branch_id: str) -> str:
    return f"APPROVALS#{branch_id}"


@dataclass(frozen=True, slots=True)
class ApprovalRow:
    challenge_id: str
    tenant: str
    thread_id: str
    branch_id: str
    call_id: str
    args_hash: str
    expires_at: int
    tool: str
    input: dict[str, Any] = field(default_factory=dict)
    suggested_rules: list[str] = field(default_factory=list)
    state: str = "open"
    created_at: int = 0
    input_in_log: bool = False  # the input was too large to copy: read it from the log's call

    @classmethod
    def from_item(cls, item: Item) -> ApprovalRow:
        return cls(
            challenge_id=item["pk"]["S"].split("#", 1)[1],
            tenant=s_of(item, "tenant") or "",
            thread_id=s_of(item, "thread_id") or "",
            branch_id=s_of(item, "branch_id") or "",
            call_id=s_of(item, "call_id") or "",
            args_hash=s_of(item, "args_hash") or "",
            expires_at=n_of(item, "expires_at") or 0,
            tool=s_of(item, "tool") or "",
            input=json.loads(s_of(item, "input") or "{}"),
            suggested_rules=json.loads(s_of(item, "suggested_rules") or "[]"),
            state=s_of(item, "state") or "open",
            created_at=n_of(item, "created_at") or 0,
            input_in_log=b_of(item, "input_in_log"),
        )

    def item(self) -> Item:
        payload = canonical_bytes(self.input)
        rules, room = [], INLINE_COPY_MAX
        for rule in self.suggested_rules:  # a rule quoting a huge command is not offered
            room -= len(rule.encode("utf-8")) + 4
            if room < 0:
                break
            rules.append(rule)
        inline = {"input": S(payload.decode("utf-8"))} if len(payload) <= INLINE_COPY_MAX else {}
        return {
            **approval_key(self.challenge_id),
            "kind": S("approval"),
            "challenge_id": S(self.challenge_id),
            "tenant": S(self.tenant),
            "thread_id": S(self.thread_id),
            "branch_id": S(self.branch_id),
            "call_id": S(self.call_id),
            "args_hash": S(self.args_hash),
            "expires_at": N(self.expires_at),
            "state": S(self.state),
            "tool": S(self.tool),
            **(inline or {"input_in_log": {"BOOL": True}}),
            "suggested_rules": S(json.dumps(rules)),
            "created_at": N(self.created_at),
            "gsi1pk": S(approvals_gsi_pk(self.branch_id)),
            "gsi1sk": S(f"{self.created_at:016d}#{self.challenge_id}"),
        }


class Approvals:
    def __init__(self, ddb: Any, state_table: str) -> None:
        self.ddb = ddb
        self.table = state_table

    def get(self, challenge_id: str) -> ApprovalRow | None:
        out = self.ddb.get_item(TableName=self.table, Key=approval_key(challenge_id), ConsistentRead=True)
        item = out.get("Item")
        return ApprovalRow.from_item(item) if item else None

    def open(self, row: ApprovalRow) -> Companion:
        """The new open row, to commit with `approval_requested` + `parked`."""
        return Companion(TAG, put_new(self.table, row.item()))

    def consume(self, challenge_id: str, state: str, decided_by: str, now: int) -> Companion:
        """Move the open row to `state`, to commit with the decision (fails unless open; the
        stored row comes back in the CompanionFailed)."""
        update = {
            "TableName": self.table,
            "Key": approval_key(challenge_id),
            "UpdateExpression": "SET #st = :new, decided_by = :by, decided_at = :at",
            "ConditionExpression": "#st = :open",
            "ExpressionAttributeNames": {"#st": "state"},
            "ExpressionAttributeValues": {
                ":new": S(state),
                ":open": S("open"),
                ":by": S(decided_by),
                ":at": N(now),
            },
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        return Companion(TAG, {"Update": update})
