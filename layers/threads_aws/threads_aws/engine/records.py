"""StateTable side rows the worker writes in the same transaction as the events they mirror.
The host API reads and updates them by exactly these names.

Approvals (written with `approval_requested` + `parked{approval}`):
    pk ``APPROVAL#<challenge_id>``, sk ``APPROVAL``
    kind "approval", challenge_id, tenant, thread_id, branch_id, call_id, args_hash,
    expires_at (N, ms), state ("open"; the API moves it to granted|denied|expired with a
    conditional update ``state = open``), tool, input (S: canonical JSON of the call input),
    suggested_rules (S: JSON array of rule strings), created_at (N, ms),
    gsi1pk ``APPROVALS#<branch_id>``, gsi1sk ``<created_at:016d>#<challenge_id>`` (a branch's
    approvals, oldest first, through gsi1).

Questions (written with `parked{input}` for an ask_user call):
    pk ``Q#<branch_id>``, sk ``<call_id>``
    kind "question", tenant, thread_id, branch_id, call_id, question, options (S: JSON array,
    absent without options), multi_select (BOOL), expires_at (N, ms), state ("open"; the API
    moves it to answered|expired in the transaction that appends the settling result),
    asked_by (S: canonical JSON of the principal who opened the turn: the only one who may
    answer), created_at (N, ms).

Both rows are Put with ``attribute_not_exists(pk)``: a re-decided step can't overwrite a row the
API already moved on.
"""

from __future__ import annotations

import json
from typing import Any

from ..core.canonical import canonical_bytes


def approval_key(challenge_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"APPROVAL#{challenge_id}"}, "sk": {"S": "APPROVAL"}}


def question_key(branch_id: str, call_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"Q#{branch_id}"}, "sk": {"S": call_id}}


def approvals_gsi_pk(branch_id: str) -> str:
    return f"APPROVALS#{branch_id}"


def _json(value: Any) -> str:
    return canonical_bytes(value).decode("utf-8")


def approval_item(
    *,
    challenge_id: str,
    tenant: str,
    thread_id: str,
    branch_id: str,
    call_id: str,
    args_hash: str,
    expires_at: int,
    tool: str,
    input: dict[str, Any],
    suggested_rules: list[str],
    created_at: int,
) -> dict[str, Any]:
    return {
        **approval_key(challenge_id),
        "kind": {"S": "approval"},
        "challenge_id": {"S": challenge_id},
        "tenant": {"S": tenant},
        "thread_id": {"S": thread_id},
        "branch_id": {"S": branch_id},
        "call_id": {"S": call_id},
        "args_hash": {"S": args_hash},
        "expires_at": {"N": str(expires_at)},
        "state": {"S": "open"},
        "tool": {"S": tool},
        "input": {"S": _json(input)},
        "suggested_rules": {"S": json.dumps(suggested_rules)},
        "created_at": {"N": str(created_at)},
        "gsi1pk": {"S": approvals_gsi_pk(branch_id)},
        "gsi1sk": {"S": f"{created_at:016d}#{challenge_id}"},
    }


def question_item(
    *,
    tenant: str,
    thread_id: str,
    branch_id: str,
    call_id: str,
    input: dict[str, Any],
    expires_at: int,
    asked_by: dict[str, Any] | None,
    created_at: int,
) -> dict[str, Any]:
    item: dict[str, Any] = {
        **question_key(branch_id, call_id),
        "kind": {"S": "question"},
        "tenant": {"S": tenant},
        "thread_id": {"S": thread_id},
        "branch_id": {"S": branch_id},
        "call_id": {"S": call_id},
        "question": {"S": str(input.get("question", ""))},
        "multi_select": {"BOOL": input.get("multi_select") is True},
        "expires_at": {"N": str(expires_at)},
        "state": {"S": "open"},
        "created_at": {"N": str(created_at)},
    }
    if isinstance(input.get("options"), list):
        item["options"] = {"S": json.dumps(input["options"])}
    if asked_by is not None:
        item["asked_by"] = {"S": _json(asked_by)}
    return item


def put_new(table: str, item: dict[str, Any]) -> dict[str, Any]:
    """A TransactWriteItems Put that never overwrites."""
    return {"Put": {"TableName": table, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}}
