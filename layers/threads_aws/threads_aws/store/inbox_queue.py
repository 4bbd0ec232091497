"""The channel inbox queue (SQS FIFO, one message group per thread): "apply thread T's inbox"
messages, sent by the webhook after its batch is durable, and by the run-step worker when a
step ends with items still pending (a message that could not be taken while the branch was
busy or parked).

A message names the inbox rows of its webhook (``keys``: the consumer reads them strongly
consistent, because the pending index it also queries is eventually consistent). The message is
only a wake-up: the rows are the truth, so a lost or duplicate message loses nothing and applies
nothing twice. Deduplication id = sha256 of the thread and the keys, so a webhook redelivered
within SQS's 5-minute window does not queue the same wake-up twice (a redelivery still sends it:
the first attempt may have crashed between its insert and its send).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from typing import Any


class InboxQueue:
    def __init__(self, sqs: Any, queue_url: str) -> None:
        self.sqs = sqs
        self.url = queue_url

    def wake(
        self, thread_id: str, branch_id: str, keys: Sequence[str] = (), *, reason: str = "webhook"
    ) -> None:
        body: dict[str, Any] = {"thread_id": thread_id, "branch_id": branch_id, "reason": reason}
        if keys:
            body["keys"] = sorted(keys)
            dedup = hashlib.sha256(json.dumps([thread_id, body["keys"]]).encode()).hexdigest()
        else:
            dedup = uuid.uuid4().hex
        self.sqs.send_message(
            QueueUrl=self.url,
            MessageBody=json.dumps(body),
            MessageGroupId=thread_id,
            MessageDeduplicationId=dedup[:128],
        )

    def retry_later(self, handles: Sequence[tuple[str, int]]) -> None:
        """Make received messages visible again after their backoff (best effort)."""
        for i in range(0, len(handles), 10):
            entries = [
                {"Id": str(j), "ReceiptHandle": h, "VisibilityTimeout": s}
                for j, (h, s) in enumerate(handles[i : i + 10])
            ]
            self.sqs.change_message_visibility_batch(QueueUrl=self.url, Entries=entries)
