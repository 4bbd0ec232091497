"""The example tool's expense ledger (ToolExampleTable): one row per effect key, written once."""

from __future__ import annotations

import time
from typing import Any


def record_once(
    ddb: Any, table: str, effect_key: str, tenant: str, thread_id: str, amount: int, memo: str
) -> None:
    """Write the expense of this effect key unless an earlier attempt already did."""
    item = {
        "id": {"S": f"expense#{effect_key}"},
        "tenant": {"S": tenant},
        "thread_id": {"S": thread_id},
        "amount_cents": {"N": str(amount)},
        "memo": {"S": memo},
        "created_at": {"N": str(int(time.time() * 1000))},
    }
    try:
        ddb.put_item(TableName=table, Item=item, ConditionExpression="attribute_not_exists(id)")
    except ddb.exceptions.ConditionalCheckFailedException:
        pass  # an earlier attempt of this effect wrote it: the same answer follows
