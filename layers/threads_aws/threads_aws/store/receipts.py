"""Run receipts (run_receipts of semantics.md §2): the answer POST /v1/runs gave for an
Idempotency-Key, so a replay of the same key and body gets the same run.

Item: pk ``RECEIPT#<tenant, '%' and '#' escaped>#runs#<idempotency key>``, sk ``RECEIPT``, with
the principal key, the body hash and the accepted (thread_id, branch_id, run_id). It is written
only as a companion of the run's `user_input` (`Put` with ``attribute_not_exists(pk)``): a receipt
exists iff its run does, and of two requests racing on one key exactly one commits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .dynamo import N, S, put_new
from .records import Companion, Item

OPERATION_RUNS = "runs"
TAG = "receipt"


def receipt_key(tenant: str, idempotency_key: str) -> Item:
    # The tenant is escaped ('%' then '#'), so no (tenant, key) pair can spell another tenant's
    # row: "t" + "x#runs#k" and "t#runs#x" + "k" are different receipts.
    t = tenant.replace("%", "%25").replace("#", "%23")
    return {"pk": S(f"RECEIPT#{t}#{OPERATION_RUNS}#{idempotency_key}"), "sk": S("RECEIPT")}


@dataclass(frozen=True, slots=True)
class Receipt:
    principal_key: str
    body_hash: str
    thread_id: str
    branch_id: str
    run_id: str

    def accepted(self) -> dict[str, str]:
        return {"thread_id": self.thread_id, "branch_id": self.branch_id, "run_id": self.run_id}

    @classmethod
    def from_item(cls, item: Item) -> Receipt:
        return cls(
            *(item[k]["S"] for k in ("principal_key", "body_hash", "thread_id", "branch_id", "run_id"))
        )


class RunReceipts:
    def __init__(self, ddb: Any, state_table: str) -> None:
        self.ddb = ddb
        self.table = state_table

    def get(self, tenant: str, idempotency_key: str) -> Receipt | None:
        out = self.ddb.get_item(
            TableName=self.table, Key=receipt_key(tenant, idempotency_key), ConsistentRead=True
        )
        item = out.get("Item")
        return Receipt.from_item(item) if item else None

    def companion(self, tenant: str, idempotency_key: str, receipt: Receipt, created_at: int) -> Companion:
        """The receipt, to commit with its run's `user_input` (fails if the key has a receipt)."""
        item = {
            **receipt_key(tenant, idempotency_key),
            "kind": S("run_receipt"),
            "tenant": S(tenant),
            "operation": S(OPERATION_RUNS),
            "idempotency_key": S(idempotency_key),
            "principal_key": S(receipt.principal_key),
            "body_hash": S(receipt.body_hash),
            "thread_id": S(receipt.thread_id),
            "branch_id": S(receipt.branch_id),
            "run_id": S(receipt.run_id),
            "created_at": N(created_at),
        }
        return Companion(TAG, put_new(self.table, item))
