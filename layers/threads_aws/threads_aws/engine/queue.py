"""The run-step queue (SQS FIFO, one message group per branch): "advance branch X" messages.

A duplicate step is harmless: every decision comes from the log, so a second step finds the
branch parked or idle and appends nothing. Deduplication is therefore only an optimisation:
with `head_seq`, the id ``<branch>:<head_seq>:<reason>`` collapses wake-ups for the same state
of the log; without it (the worker's own re-enqueue) every message is distinct, so a step that
made no progress before its deadline can never be swallowed by the 5-minute dedup window.

A record that fails (its branch busy under another worker's lease, or its step raised) is
reported as a partial failure and made visible again after `retry_delay_s` of its receive count
(ChangeMessageVisibility), not after the queue's 1,800 s visibility timeout: 2, 6, 18, 54 s, so
the fifth receive (the last before the DLQ, maxReceiveCount 5) comes 80 s after the first, past
a dead worker's 60 s lease. FIFO: the records of its group behind it fail with it and get the
same delay, so the group keeps its order.

A step that ends `wait` (a model retry not due yet) armed its wake-up on the run-step timer
(`store.step_timer`, a standard queue with per-message delays) and succeeds; only if it could
not arm one is its record failed, so the backoff above wakes it instead. The timer's messages
come to this same handler: each becomes an ordinary step on the FIFO queue (`forward_wakeups`),
or, not due yet (a wait longer than the timer's 15-minute delay), is sent on again.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

from aws_lambda_powertools.utilities.batch import (
    SqsFifoPartialProcessor,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from .. import observability
from ..core.errors import LogError
from ..store.protocol import StepQueue
from ..store.records import NotFound
from ..store.run_steps import RunStepQueue
from ..store.step_timer import parse as parse_timer
from .step import EngineContext, advance

NO_DEADLINE_MS = 900_000
RETRY_BASE_S = 2
RETRY_MAX_S = 300
HOP_MIN_MS = 1_000  # a wake-up due sooner than this steps now (SQS delays are whole seconds)

log = logging.getLogger("threads_aws.engine")


class BranchBusy(Exception):
    """Another worker holds the branch: fail the record so SQS redelivers it later."""


class WakeLater(Exception):
    """A retry wait whose wake-up could not be armed: fail the record (its backoff wakes it)."""


def enqueue_step(
    sqs: Any, queue_url: str, branch_id: str, *, reason: str, head_seq: int | None = None
) -> None:
    """One "advance branch X" message (the format is `store.run_steps.RunStepQueue`'s)."""
    RunStepQueue(sqs, queue_url).enqueue(branch_id, reason=reason, head_seq=head_seq)


def retry_delay_s(receive_count: int) -> int:
    """Seconds until a failed record is received again, by its ApproximateReceiveCount."""
    return min(RETRY_BASE_S * 3 ** max(0, receive_count - 1), RETRY_MAX_S)


def back_off(steps: StepQueue, records: list[dict[str, Any]]) -> None:
    """Make failed records visible again after their backoff (best effort: without it they come
    back after the queue's visibility timeout)."""
    handles = []
    for r in records:
        try:
            count = int((r.get("attributes") or {}).get("ApproximateReceiveCount", "1"))
        except ValueError:
            count = 1
        handles.append((r["receiptHandle"], retry_delay_s(count)))
    try:
        for message in steps.retry_later(handles):
            log.warning("could not shorten the visibility of a failed step: %s", message)
    except Exception:  # noqa: BLE001 - the queue's own timeout redelivers them
        log.exception("could not shorten the visibility of %d failed step(s)", len(handles))


def forward_wakeups(records: list[dict[str, Any]], engine: EngineContext) -> dict[str, Any]:
    """Timer messages (a standard queue: no group, no order) → steps on the FIFO queue. A
    wake-up not due yet (a park's TTL past the queue's 15-minute delay, `engine.parks`) hops:
    it is sent again with the remaining delay, and no step runs. A failure raises: Lambda
    retries the whole (idempotent) batch."""
    if engine.steps is None:
        raise RuntimeError("no run-step queue to forward retry wake-ups to")
    now = engine.clock()
    for r in records:
        branch_id, not_before, park = parse_timer(r["body"])
        if not_before - now >= HOP_MIN_MS and engine.timer is not None:
            if park and not _park_open(engine, branch_id, not_before):
                continue  # answered (or the thread deleted) meanwhile: nothing left to escalate
            engine.timer.wake_at(branch_id, not_before, now_ms=now, park=park)
            continue
        engine.steps.enqueue(branch_id, reason="timer_due")
    return {"batchItemFailures": []}


def _park_open(engine: EngineContext, branch_id: str, expires_at: int) -> bool:
    """A park of the branch still waits to expire by `expires_at` (a later one re-armed its own)."""
    try:
        fold = engine.writer.load(branch_id).fold
    except (LogError, NotFound):
        return False
    return any(
        at <= expires_at and key in fold.parked and key not in fold.escalated
        for key, at in fold.park_expires.items()
    )


def handle_batch(event: dict[str, Any], context: Any, *, engine: EngineContext) -> dict[str, Any]:
    """Advance each record's branch. `busy` fails that record (and, FIFO, the rest of its group)
    so it is retried; `more` re-enqueues the branch before the Lambda deadline."""
    records = event.get("Records") or []
    if records and not str(records[0].get("eventSourceARN", "")).endswith(".fifo"):
        return forward_wakeups(records, engine)  # the run-step timer's wake-ups
    holder = getattr(context, "aws_request_id", None) or uuid.uuid4().hex

    def record_handler(record: SQSRecord) -> str:
        branch_id = json.loads(record.body)["branch_id"]
        remaining = NO_DEADLINE_MS
        if context is not None and hasattr(context, "get_remaining_time_in_millis"):
            remaining = context.get_remaining_time_in_millis()
        # The record's log keys and step metrics; the re-enqueue inside keeps its correlation id.
        with observability.step(record, branch_id) as step:
            outcome = advance(engine, branch_id, holder_id=holder, deadline_ms=engine.clock() + remaining)
            step.update(state=outcome.state, appended=outcome.appended)
            if outcome.state == "busy":
                raise BranchBusy(branch_id)
            if outcome.state == "wait" and not outcome.armed:
                raise WakeLater(branch_id)
            if outcome.state == "more" and engine.steps is not None:
                engine.steps.enqueue(branch_id, reason="more")
            return outcome.state

    # Report every failure as a partial failure (never raise): Lambda redelivers just those.
    processor = SqsFifoPartialProcessor(skip_group_on_error=True)
    processor.raise_on_entire_batch_failure = False  # not a constructor argument of the FIFO class
    response: dict[str, Any] = dict(
        process_partial_response(
            event=event, record_handler=record_handler, processor=processor, context=context
        )
    )
    failed = {f["itemIdentifier"] for f in response.get("batchItemFailures") or []}
    if failed and engine.steps is not None:
        back_off(engine.steps, [r for r in event["Records"] if r["messageId"] in failed])
    return response
