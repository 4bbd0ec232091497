"""The run-step timer (a standard SQS queue, `RunStepTimerQueue`): "advance branch X at T".

Why a queue of its own: the run-step queue is FIFO, and FIFO queues have no per-message delay.
Holding the received step message back instead (ChangeMessageVisibility) would stall the
branch's whole message group behind it (a cancel or an approval would wait out the retry) and
count every wait as a receive towards the DLQ's maxReceiveCount; an EventBridge Scheduler
schedule per wait needs a role, a PassRole grant and a clean-up, and nothing fires it locally.
A standard queue delays each message by DelaySeconds (to the second, up to 900 s), and the
local pollers honour that as they poll any other queue.

A message is `{branch_id, not_before}` (plus `park: true` for a park's escalation, whose hops
look at the log first: `engine.queue.forward_wakeups`) sent with DelaySeconds = the seconds until not_before
(rounded up, at most 900). The worker receiving it puts an ordinary step on the FIFO queue
(`engine.queue`), so the branch's steps keep one order and one holder. A step woken before
not_before (a longer wait, a duplicate) finds the retry not due and arms the timer again.
Duplicates are harmless: a step decides from the log alone.
"""

from __future__ import annotations

import json
from typing import Any

from .. import observability

MAX_DELAY_S = 900  # SQS's DelaySeconds limit


def delay_s(not_before_ms: int, now_ms: int) -> int:
    """DelaySeconds for a wake-up at `not_before_ms`: never early by rounding, at most 900."""
    wait = max(0, not_before_ms - now_ms)
    return min(MAX_DELAY_S, -(-wait // 1000))


class StepTimer:
    def __init__(self, sqs: Any, queue_url: str) -> None:
        self.sqs = sqs
        self.url = queue_url

    def wake_at(self, branch_id: str, not_before_ms: int, *, now_ms: int, park: bool = False) -> None:
        body: dict[str, Any] = {"branch_id": branch_id, "not_before": not_before_ms}
        if park:
            body["park"] = True
        self.sqs.send_message(
            QueueUrl=self.url,
            MessageBody=json.dumps(body),
            DelaySeconds=delay_s(not_before_ms, now_ms),
            **observability.message_attributes(),
        )


def parse(body: str) -> tuple[str, int, bool]:
    """(branch_id, not_before, park) of a timer message."""
    d = json.loads(body)
    return str(d["branch_id"]), int(d.get("not_before") or 0), d.get("park") is True
