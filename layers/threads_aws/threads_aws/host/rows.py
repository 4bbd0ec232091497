"""StateTable side items the host reads or writes in the same transaction as an append.

- ``RECEIPT#<tenant, '%' and '#' escaped>#runs#<idempotency key>`` / ``RECEIPT``: the run
  receipt of POST /v1/runs (run_receipts of semantics.md §2), written with the run's user_input.
- ``APPROVAL#<challenge_id>`` / ``APPROVAL`` and ``Q#<branch_id>`` / ``<call_id>``: the approval
  and question rows the worker writes (layout in `engine.records`); a decision consumes the
  approval row with ``state = open``, an answer moves the question row to ``answered``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

OPERATION_RUNS = "runs"


def receipt_key(tenant: str, idempotency_key: str) -> dict[str, Any]:
    # The tenant is escaped ('%' then '#'), so no (tenant, key) pair can spell another tenant's
    # row: "t" + "x#runs#k" and "t#runs#x" + "k" are different receipts.
    t = tenant.replace("%", "%25").replace("#", "%23")
    return {"pk": {"S": f"RECEIPT#{t}#{OPERATION_RUNS}#{idempotency_key}"}, "sk": {"S": "RECEIPT"}}


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
    def from_item(cls, item: dict[str, Any]) -> Receipt:
        return cls(
            *(item[k]["S"] for k in ("principal_key", "body_hash", "thread_id", "branch_id", "run_id"))
        )


def receipt_put(
    table: str, tenant: str, idempotency_key: str, receipt: Receipt, created_at: int
) -> dict[str, Any]:
    return {
        "Put": {
            "TableName": table,
            "Item": {
                **receipt_key(tenant, idempotency_key),
                "kind": {"S": "run_receipt"},
                "tenant": {"S": tenant},
                "operation": {"S": OPERATION_RUNS},
                "idempotency_key": {"S": idempotency_key},
                "principal_key": {"S": receipt.principal_key},
                "body_hash": {"S": receipt.body_hash},
                "thread_id": {"S": receipt.thread_id},
                "branch_id": {"S": receipt.branch_id},
                "run_id": {"S": receipt.run_id},
                "created_at": {"N": str(created_at)},
            },
            "ConditionExpression": "attribute_not_exists(pk)",
        }
    }


def approval_key(challenge_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"APPROVAL#{challenge_id}"}, "sk": {"S": "APPROVAL"}}


def question_key(branch_id: str, call_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"Q#{branch_id}"}, "sk": {"S": call_id}}


def question_answered(table: str, branch_id: str, call_id: str, now: int) -> dict[str, Any]:
    return {
        "Update": {
            "TableName": table,
            "Key": question_key(branch_id, call_id),
            "UpdateExpression": "SET #st = :answered, decided_at = :at",
            "ConditionExpression": "#st = :open",
            "ExpressionAttributeNames": {"#st": "state"},
            "ExpressionAttributeValues": {
                ":answered": {"S": "answered"},
                ":open": {"S": "open"},
                ":at": {"N": str(now)},
            },
        }
    }


@dataclass(frozen=True, slots=True)
class ApprovalRow:
    challenge_id: str
    tenant: str
    thread_id: str
    branch_id: str
    call_id: str
    args_hash: str
    expires_at: int
    state: str
    tool: str
    input: dict[str, Any]
    suggested_rules: list[str]

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> ApprovalRow:
        def s(k: str, default: str = "") -> str:
            v = item.get(k)
            return v["S"] if v and "S" in v else default

        return cls(
            challenge_id=item["pk"]["S"].split("#", 1)[1],
            tenant=s("tenant"),
            thread_id=s("thread_id"),
            branch_id=s("branch_id"),
            call_id=s("call_id"),
            args_hash=s("args_hash"),
            expires_at=int(item["expires_at"]["N"]) if "expires_at" in item else 0,
            state=s("state", "open"),
            tool=s("tool"),
            input=json.loads(s("input", "{}")),
            suggested_rules=json.loads(s("suggested_rules", "[]")),
        )


def approval_consume(table: str, challenge_id: str, state: str, decided_by: str, now: int) -> dict[str, Any]:
    """Consume the open row in the decision's transaction: a second answer fails the condition."""
    return {
        "Update": {
            "TableName": table,
            "Key": approval_key(challenge_id),
            "UpdateExpression": "SET #st = :new, decided_by = :by, decided_at = :at",
            "ConditionExpression": "#st = :open",
            "ExpressionAttributeNames": {"#st": "state"},
            "ExpressionAttributeValues": {
                ":new": {"S": state},
                ":open": {"S": "open"},
                ":by": {"S": decided_by},
                ":at": {"N": str(now)},
            },
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
    }
