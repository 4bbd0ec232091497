"""The run-step queue (SQS FIFO, one message group per branch): "advance branch X" messages.

A duplicate step is harmless: every decision comes from the log, so a second step finds the
branch parked or idle and appends nothing. Deduplication is therefore only an optimisation:
with `head_seq`, the id ``<branch>:<head_seq>:<reason>`` collapses wake-ups for the same state
of the log; without it (the worker's own re-enqueue) every message is distinct, so a step that
made no progress before its deadline can never be swallowed by the 5-minute dedup window.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from aws_lambda_powertools.utilities.batch import (
    SqsFifoPartialProcessor,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from ..store.run_steps import RunStepQueue
from .step import EngineContext, advance

NO_DEADLINE_MS = 900_000


class BranchBusy(Exception):
    """Another worker holds the branch: fail the record so SQS redelivers it later."""


def enqueue_step(
    sqs: Any, queue_url: str, branch_id: str, *, reason: str, head_seq: int | None = None
) -> None:
    """One "advance branch X" message (the format is `store.run_steps.RunStepQueue`'s)."""
    RunStepQueue(sqs, queue_url).enqueue(branch_id, reason=reason, head_seq=head_seq)


def handle_batch(event: dict[str, Any], context: Any, *, engine: EngineContext) -> dict[str, Any]:
    """Advance each record's branch. `busy` fails that record (and, FIFO, the rest of its group)
    so it is retried; `more` re-enqueues the branch before the Lambda deadline."""
    holder = getattr(context, "aws_request_id", None) or uuid.uuid4().hex

    def record_handler(record: SQSRecord) -> str:
        branch_id = json.loads(record.body)["branch_id"]
        remaining = NO_DEADLINE_MS
        if context is not None and hasattr(context, "get_remaining_time_in_millis"):
            remaining = context.get_remaining_time_in_millis()
        outcome = advance(engine, branch_id, holder_id=holder, deadline_ms=engine.clock() + remaining)
        if outcome.state == "busy":
            raise BranchBusy(branch_id)
        if outcome.state == "more" and engine.steps is not None:
            engine.steps.enqueue(branch_id, reason="more")
        return outcome.state

    # Report every failure as a partial failure (never raise): Lambda redelivers just those.
    processor = SqsFifoPartialProcessor(skip_group_on_error=True)
    processor.raise_on_entire_batch_failure = False  # not a constructor argument of the FIFO class
    response = process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
    return dict(response)
