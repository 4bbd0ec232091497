"""Lambda's SQS event source mapping, locally: per SQS event of a template function, threads that
ReceiveMessage from the (moto) queue, invoke the handler with an SQS batch event, delete what
succeeded and leave the rest to the queue: they come back when their visibility timeout ends,
the queue's own or whatever the function set with ChangeMessageVisibility, as on AWS (the
run-step worker backs off that way; see `engine.queue`). moto honours both.

Like Lambda: a handler that raises fails the whole batch; with ReportBatchItemFailures only the
`batchItemFailures` come back (a malformed answer, or an unknown id, fails the whole batch); without
it any return value means the whole batch succeeded. FIFO ordering and one-in-flight-per-group
come from the queue itself (moto holds back a group while a message of it is in flight), so
several poller threads may run per source as Lambda runs several concurrent batches.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .runtime import Handlers
from .sam import ACCOUNT, SqsSource

log = logging.getLogger("threads_aws_dev.local")

_ATTRS = [
    "ApproximateReceiveCount",
    "SentTimestamp",
    "SenderId",
    "ApproximateFirstReceiveTimestamp",
    "MessageGroupId",
    "MessageDeduplicationId",
    "SequenceNumber",
]


def queue_arn(url: str, region: str) -> str:
    return f"arn:aws:sqs:{region}:{ACCOUNT}:{url.rstrip('/').rsplit('/', 1)[-1]}"


def sqs_record(msg: dict[str, Any], arn: str, region: str) -> dict[str, Any]:
    """One record of a Lambda SQS event, from a ReceiveMessage message."""
    attributes = {k: str(v) for k, v in (msg.get("Attributes") or {}).items()}
    attributes.setdefault("ApproximateReceiveCount", "1")
    attributes.setdefault("SentTimestamp", str(int(time.time() * 1000)))
    attributes.setdefault("SenderId", ACCOUNT)
    attributes.setdefault("ApproximateFirstReceiveTimestamp", str(int(time.time() * 1000)))
    message_attributes = {}
    for name, a in (msg.get("MessageAttributes") or {}).items():
        message_attributes[name] = {
            "stringValue": a.get("StringValue"),
            "binaryValue": a.get("BinaryValue"),
            "stringListValues": a.get("StringListValues", []),
            "binaryListValues": a.get("BinaryListValues", []),
            "dataType": a.get("DataType"),
        }
    body = msg.get("Body", "")
    return {
        "messageId": msg["MessageId"],
        "receiptHandle": msg["ReceiptHandle"],
        "body": body,
        "attributes": attributes,
        "messageAttributes": message_attributes,
        "md5OfBody": msg.get("MD5OfBody") or hashlib.md5(body.encode()).hexdigest(),  # noqa: S324 - SQS's checksum
        "eventSource": "aws:sqs",
        "eventSourceARN": arn,
        "awsRegion": region,
    }


def failed_ids(source: SqsSource, ids: list[str], outcome: Any, error: BaseException | None) -> set[str]:
    """The message ids Lambda would put back on the queue for this invocation outcome."""
    if error is not None:
        return set(ids)
    if not source.report_failures:
        return set()
    if outcome is None:
        return set()
    if not isinstance(outcome, dict):
        return set(ids)
    failures = outcome.get("batchItemFailures")
    if failures is None:
        return set()
    if not isinstance(failures, list):
        return set(ids)
    out: set[str] = set()
    for f in failures:
        item = f.get("itemIdentifier") if isinstance(f, dict) else None
        if not isinstance(item, str) or item not in ids:
            return set(ids)  # Lambda treats a bad identifier as a failed batch
        out.add(item)
    return out


@dataclass
class Poller:
    """Feeds one SQS event source to its function; `start()` spawns `concurrency` threads."""

    source: SqsSource
    queue_url: str
    sqs: Any  # a boto3 SQS client
    handlers: Handlers
    region: str = "us-east-1"
    concurrency: int = 2
    # Lambda leaves failed records alone; tests of the poller itself may shorten them instead.
    retry_delay_s: int | None = None
    idle_wait_s: float = 0.05
    on_batch: Callable[[SqsSource, list[str], set[str]], None] | None = None  # tests observe batches
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> None:
        for i in range(self.concurrency):
            t = threading.Thread(target=self._loop, name=f"poller-{self.source.function}-{i}", daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop receiving; a batch in progress finishes (its records are settled) first."""
        self._stop.set()
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                worked = self.poll_once()
            except Exception:
                if self._stop.is_set():
                    return
                log.exception("poller %s: receive failed", self.source.function)
                worked = False
            if not worked:
                self._stop.wait(self.idle_wait_s)

    def poll_once(self) -> bool:
        """Receive one batch and run it; False if the queue had nothing visible."""
        # Short polls: moto's long poll spins while a FIFO group is held back, and short polls
        # let stop() return promptly.
        got = self.sqs.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=min(10, self.source.batch_size),
            WaitTimeSeconds=0,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        messages = got.get("Messages") or []
        if not messages:
            return False
        self.run_batch(messages)
        return True

    def run_batch(self, messages: list[dict[str, Any]]) -> set[str]:
        arn = queue_arn(self.queue_url, self.region)
        event = {"Records": [sqs_record(m, arn, self.region) for m in messages]}
        ids = [m["MessageId"] for m in messages]
        outcome: Any = None
        error: BaseException | None = None
        try:
            outcome = self.handlers.invoke(self.source.function, event)
        except Exception as exc:
            error = exc
            log.exception("%s failed on a batch of %d", self.source.function, len(messages))
        failed = failed_ids(self.source, ids, outcome, error)
        done = [m for m in messages if m["MessageId"] not in failed]
        for i in range(0, len(done), 10):
            chunk = done[i : i + 10]
            self.sqs.delete_message_batch(
                QueueUrl=self.queue_url,
                Entries=[{"Id": str(j), "ReceiptHandle": m["ReceiptHandle"]} for j, m in enumerate(chunk)],
            )
        for m in messages if self.retry_delay_s is not None else ():
            if m["MessageId"] in failed:
                # retry_delay_s is set: a test of the poller wants failures back at once
                try:
                    self.sqs.change_message_visibility(
                        QueueUrl=self.queue_url,
                        ReceiptHandle=m["ReceiptHandle"],
                        VisibilityTimeout=self.retry_delay_s,
                    )
                except Exception:  # it comes back after the queue's visibility timeout anyway
                    log.warning(
                        "poller %s: could not shorten visibility of %s", self.source.function, m["MessageId"]
                    )
        if failed:
            log.warning(
                "%s: %d of %d record(s) failed; they come back when their visibility ends",
                self.source.function,
                len(failed),
                len(ids),
            )
        if self.on_batch is not None:
            self.on_batch(self.source, ids, failed)
        return failed
