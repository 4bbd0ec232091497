"""Budget ledger rows (`budget_ledger` of semantics.md §2): what each model attempt holds of each
covering budget, and one running total per (budget, limit) that makes the check atomic.

Items (state table, one partition per budget):
- total: pk ``BUDGET#<budget_id>``, sk ``TOTAL#<limit_name>``: kind "budget_total", budget_id,
  limit_name, used (N: the sum of the amounts of every row of this budget and limit, reserved
  at their bound or settled), limit_value (N, the limit as the log pins it; informative);
- row: pk ``BUDGET#<budget_id>``, sk ``ROW#<limit_name>#<attempt_key>``: kind "budget_row",
  budget_id, limit_name, attempt_key, amount (N >= 0), state reserved | settled.

`budget_id` is ``thread:<thread_id>`` or ``run:<thread_id>:<user_input event_id>``;
`attempt_key` is ``<branch_id>:<seq of the model_request>``.

Reservation: companions of the `model_request` append (one transaction with the line and the
head): per (budget, limit) a Put of the row (``attribute_not_exists(pk)``; exact amounts, one
request or one turn, are written settled at once) and an Update of the total, ``ADD used
:amount`` conditioned ``attribute_not_exists(used) OR used <= :room`` with ``room = limit -
amount`` (DynamoDB conditions can't add, so the caller subtracts; an amount over the limit never
gets here). Two workers reserving the last unit of one budget race on the same total item: the
transactions conflict or one condition fails, so at most one commits. Settlement: companions of
the append holding the attempt's answer: the row moves to settled at its actual amount
(``state = reserved``) and the total takes the difference.

The ledger is a cache of the logs (invariant 1): every change commits with the event that holds
the bytes it derives from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .dynamo import N, S, each_item, n_of, put_new, s_of
from .records import Companion, Item


def total_key(budget_id: str, limit: str) -> Item:
    return {"pk": S(f"BUDGET#{budget_id}"), "sk": S(f"TOTAL#{limit}")}


def row_key(budget_id: str, limit: str, attempt_key: str) -> Item:
    return {"pk": S(f"BUDGET#{budget_id}"), "sk": S(f"ROW#{limit}#{attempt_key}")}


@dataclass(frozen=True, slots=True)
class LedgerRow:
    budget_id: str
    limit: str
    attempt_key: str
    amount: int
    state: str

    @classmethod
    def from_item(cls, item: Item) -> LedgerRow:
        return cls(
            s_of(item, "budget_id") or "",
            s_of(item, "limit_name") or "",
            s_of(item, "attempt_key") or "",
            n_of(item, "amount") or 0,
            s_of(item, "state") or "",
        )


class BudgetLedger:
    def __init__(self, ddb: Any, state_table: str) -> None:
        self.ddb = ddb
        self.table = state_table

    # ----------------------------------------------------------------------- companions
    def reserve(
        self,
        tag: str,
        budget_id: str,
        limit: str,
        attempt_key: str,
        amount: int,
        limit_value: int,
        *,
        exact: bool,
    ) -> list[Companion]:
        """The row and the total's increment, to commit with the `model_request` (`tag` names
        the total's condition: `CompanionFailed.item` is then the stored total)."""
        if not 0 < amount <= limit_value:
            raise ValueError(f"{limit}: reserving {amount} of {limit_value}")
        row: Item = {
            **row_key(budget_id, limit, attempt_key),
            "kind": S("budget_row"),
            "budget_id": S(budget_id),
            "limit_name": S(limit),
            "attempt_key": S(attempt_key),
            "amount": N(amount),
            "state": S("settled" if exact else "reserved"),
        }
        total = {
            "TableName": self.table,
            "Key": total_key(budget_id, limit),
            "UpdateExpression": "SET #k = :kind, #b = :b, #l = :l, #lv = :lv ADD #u :a",
            "ConditionExpression": "attribute_not_exists(#u) OR #u <= :room",
            "ExpressionAttributeNames": {
                "#k": "kind",
                "#b": "budget_id",
                "#l": "limit_name",
                "#lv": "limit_value",
                "#u": "used",
            },
            "ExpressionAttributeValues": {
                ":kind": S("budget_total"),
                ":b": S(budget_id),
                ":l": S(limit),
                ":lv": N(limit_value),
                ":a": N(amount),
                ":room": N(limit_value - amount),
            },
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        return [Companion(f"{tag}:row", put_new(self.table, row)), Companion(tag, {"Update": total})]

    def settle(
        self, tag: str, budget_id: str, limit: str, attempt_key: str, amount: int, delta: int
    ) -> list[Companion]:
        """The reserved row at its actual `amount` and the total moved by `delta` (actual minus
        the bound it was reserved at), to commit with the attempt's answer."""
        row = {
            "TableName": self.table,
            "Key": row_key(budget_id, limit, attempt_key),
            "UpdateExpression": "SET #a = :a, #st = :settled",
            "ConditionExpression": "#st = :reserved",
            "ExpressionAttributeNames": {"#a": "amount", "#st": "state"},
            "ExpressionAttributeValues": {
                ":a": N(amount),
                ":settled": S("settled"),
                ":reserved": S("reserved"),
            },
        }
        out = [Companion(f"{tag}:row", {"Update": row})]
        if delta:
            total = {
                "TableName": self.table,
                "Key": total_key(budget_id, limit),
                "UpdateExpression": "ADD #u :d",
                "ConditionExpression": "attribute_exists(#u)",
                "ExpressionAttributeNames": {"#u": "used"},
                "ExpressionAttributeValues": {":d": N(delta)},
            }
            out.append(Companion(tag, {"Update": total}))
        return out

    # ---------------------------------------------------------------------------- reads
    def used(self, budget_id: str, limit: str) -> int:
        out = self.ddb.get_item(TableName=self.table, Key=total_key(budget_id, limit), ConsistentRead=True)
        return used_of(out.get("Item"))

    def rows(self, budget_id: str) -> list[LedgerRow]:
        """Every row of a budget (operators, tests, a rebuild's comparison)."""
        kw: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :row)",
            "ExpressionAttributeValues": {":pk": S(f"BUDGET#{budget_id}"), ":row": S("ROW#")},
            "ConsistentRead": True,
        }
        return [LedgerRow.from_item(i) for i in each_item(self.ddb.query, kw)]


def used_of(item: Item | None) -> int:
    """`used` of a stored total (0 when there is none yet)."""
    return (n_of(item, "used") or 0) if item else 0
