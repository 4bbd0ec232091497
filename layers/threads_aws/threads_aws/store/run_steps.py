"""The run-step queue (SQS FIFO, one message group per branch): "advance branch X" messages.
The host wakes a branch with one; the worker re-enqueues one when its step runs out of time.

A duplicate step is harmless: every decision comes from the log, so a second step finds the
branch parked or idle and appends nothing. Deduplication is therefore only an optimisation:
with `head_seq`, the id ``<branch>:<head_seq>:<reason>`` collapses wake-ups for the same state
of the log; without it every message is distinct, so a step that made no progress before its
deadline can never be swallowed by the 5-minute dedup window.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

from .. import observability


class RunStepQueue:
    def __init__(self, sqs: Any, queue_url: str) -> None:
        self.sqs = sqs
        self.url = queue_url

    def enqueue(self, branch_id: str, *, reason: str, head_seq: int | None = None) -> None:
        dedup = f"{branch_id}:{head_seq}:{reason}" if head_seq is not None else uuid.uuid4().hex
        body: dict[str, Any] = {"branch_id": branch_id, "reason": reason}
        if head_seq is not None:
            body["head_seq"] = head_seq
        self.sqs.send_message(
            QueueUrl=self.url,
            MessageBody=json.dumps(body),
            MessageGroupId=branch_id,
            MessageDeduplicationId=dedup[:128],
            # The request id bound in this invocation (observability) travels with the step.
            **observability.message_attributes(),
        )

    def retry_later(self, handles: Sequence[tuple[str, int]]) -> list[str]:
        """Make received messages (receipt handle, seconds) visible again after those seconds:
        ChangeMessageVisibility, ten at a time. Returns SQS's messages for entries it refused."""
        refused: list[str] = []
        for i in range(0, len(handles), 10):
            entries = [
                {"Id": str(j), "ReceiptHandle": handle, "VisibilityTimeout": seconds}
                for j, (handle, seconds) in enumerate(handles[i : i + 10])
            ]
            out = self.sqs.change_message_visibility_batch(QueueUrl=self.url, Entries=entries)
            refused += [str(f.get("Message")) for f in out.get("Failed") or []]
        return refused
