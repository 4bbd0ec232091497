"""An example Lambda tool (`add_expense` of the demo agent): record an expense in a ledger,
exactly once per effect key.

The worker invokes it with the documented payload (`engine/lambda_tools.py`):
`{effect_key, call_id, tool, input, thread_id, tenant, branch_id, attempt}`. Two layers make a
re-send harmless:
- Powertools Idempotency keyed on `effect_key`: a re-send after the first attempt completed
  (the worker lost the answer, or crashed before recording it) gets the saved answer back
  without running again; a re-send while the first is still running waits for it (below);
- the ledger write is itself keyed by the effect key (a conditional put), so an attempt that
  died mid-way (its idempotency record expires in progress) and is run again writes nothing new
  and answers the same.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import boto3
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent,
)
from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyAlreadyInProgressError

from ..store.expenses import record_once

WAIT_MARGIN_MS = 1000
LIMIT_CENTS = 1_000_000
Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


def make_handler(table: str) -> Handler:
    """The tool's Lambda handler over its ledger table (which also holds the idempotency records)."""
    config = IdempotencyConfig(
        event_key_jmespath="effect_key",
        raise_on_no_idempotency_key=True,  # the worker always sends one for an effect
        expires_after_seconds=24 * 3600,  # the tool's dedup_window_ms in agents.json
    )

    @idempotent(config=config, persistence_store=DynamoDBPersistenceLayer(table_name=table))
    def add_expense(event: dict[str, Any], context: Any) -> dict[str, Any]:
        args = event["input"]
        amount, memo = int(args["amount_cents"]), str(args["memo"])
        if amount > LIMIT_CENTS:  # a failure of the tool itself: the worker's error result
            raise ValueError(f"{amount / 100:.2f} is over the expense limit of {LIMIT_CENTS / 100:.2f}")
        ddb = boto3.client("dynamodb")
        record_once(
            ddb, table, event["effect_key"], str(event["tenant"]), str(event["thread_id"]), amount, memo
        )
        if args.get("delay_ms"):  # demo and tests: a slow tool (a crash can land mid-call)
            time.sleep(min(int(args["delay_ms"]), 60_000) / 1000)
        return {"text": f"Recorded {memo}: {amount / 100:.2f} (expense {event['call_id']})."}

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        while True:
            try:
                return add_expense(event, context)
            except IdempotencyAlreadyInProgressError:
                # Another invocation of this effect key is running (or died and its record has
                # not expired yet): wait for its answer rather than failing the call.
                if context.get_remaining_time_in_millis() < WAIT_MARGIN_MS * 2:
                    raise
                time.sleep(WAIT_MARGIN_MS / 1000)

    return handler
