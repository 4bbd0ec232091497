"""The run-step queue and the worker Lambda handler, on moto SQS."""

from __future__ import annotations

import json
import time
from typing import Any

from helpers.engine import make_ctx, new_thread, run, say, types
from threads_aws.engine.context import LEASE_TTL_MS
from threads_aws.engine.queue import enqueue_step, handle_batch, retry_delay_s


class Ctx:
    aws_request_id = "req-1"
    function_name = "run-step"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:run-step"

    def __init__(self, remaining: int = 900_000) -> None:
        self.remaining = remaining

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining


def receive(aws: Any) -> list[dict[str, Any]]:
    out = aws.sqs.receive_message(
        QueueUrl=aws.resources.run_step_queue_url, MaxNumberOfMessages=10, AttributeNames=["All"]
    )
    return list(out.get("Messages", []))


def as_event(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m.get("Attributes", {}),
                "messageAttributes": {},
                "md5OfBody": m["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:run-step.fifo",
                "awsRegion": "us-east-1",
            }
            for m in messages
        ]
    }


def test_enqueue_and_handle(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    say(ctx, b, "time")
    url = aws.resources.run_step_queue_url
    enqueue_step(aws.sqs, url, b, reason="input", head_seq=2)
    enqueue_step(aws.sqs, url, b, reason="input", head_seq=2)  # same state of the log: collapsed
    msgs = receive(aws)
    assert len(msgs) == 1
    assert json.loads(msgs[0]["Body"]) == {"branch_id": b, "head_seq": 2, "reason": "input"}
    assert msgs[0]["Attributes"]["MessageGroupId"] == b
    assert handle_batch(as_event(msgs), Ctx(), engine=ctx) == {"batchItemFailures": []}
    assert types(ctx, b)[-1] == "turn_completed"


def test_busy_fails_the_record(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    say(ctx, b, "hi")
    ctx.store.acquire_lease(b, "someone-else", ttl_ms=60_000, now_ms=aws.clock())
    enqueue_step(aws.sqs, aws.resources.run_step_queue_url, b, reason="input")
    msgs = receive(aws)
    out = handle_batch(as_event(msgs), Ctx(), engine=ctx)
    assert out == {"batchItemFailures": [{"itemIdentifier": msgs[0]["MessageId"]}]}
    # Back after its short backoff, not after the queue's 1,800 s visibility timeout.
    assert receive(aws) == []
    deadline = time.monotonic() + retry_delay_s(1) + 3
    again: list[dict[str, Any]] = []
    while not again and time.monotonic() < deadline:
        time.sleep(0.25)
        again = receive(aws)
    assert [m["MessageId"] for m in again] == [msgs[0]["MessageId"]]
    assert again[0]["Attributes"]["ApproximateReceiveCount"] == "2"


def test_the_backoff_grows_with_the_receive_count(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    say(ctx, b, "hi")
    ctx.store.acquire_lease(b, "someone-else", ttl_ms=60_000, now_ms=aws.clock())
    enqueue_step(aws.sqs, aws.resources.run_step_queue_url, b, reason="input")
    msgs = receive(aws)
    msgs[0]["Attributes"]["ApproximateReceiveCount"] = "3"  # as if its third delivery
    handle_batch(as_event(msgs), Ctx(), engine=ctx)
    time.sleep(retry_delay_s(1) + 1)
    assert receive(aws) == []  # 18 s for a third failure


def test_the_retries_outlast_a_dead_workers_lease() -> None:
    assert [retry_delay_s(n) for n in range(1, 6)] == [2, 6, 18, 54, 162]
    # maxReceiveCount 5 (template.yaml): the fifth and last receive comes after the lease lapsed.
    assert sum(retry_delay_s(n) for n in range(1, 5)) * 1000 > LEASE_TTL_MS


def test_more_reenqueues(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    say(ctx, b, "hi")
    enqueue_step(aws.sqs, aws.resources.run_step_queue_url, b, reason="input")
    msgs = receive(aws)
    assert handle_batch(as_event(msgs), Ctx(remaining=1000), engine=ctx) == {"batchItemFailures": []}
    aws.sqs.delete_message(QueueUrl=aws.resources.run_step_queue_url, ReceiptHandle=msgs[0]["ReceiptHandle"])
    again = receive(aws)
    assert [json.loads(m["Body"])["reason"] for m in again] == ["more"]
    assert run(ctx, b).state == "idle"


def test_worker_handler_from_env(aws: Any, monkeypatch: Any) -> None:
    import importlib.util
    from pathlib import Path

    for k, v in aws.resources.env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    say(ctx, b, "hello")
    enqueue_step(aws.sqs, aws.resources.run_step_queue_url, b, reason="input")
    path = Path(__file__).resolve().parents[1] / "functions" / "run_step" / "app.py"
    spec = importlib.util.spec_from_file_location("run_step_app", path)
    assert spec is not None and spec.loader is not None
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    assert app.handler(as_event(receive(aws)), Ctx()) == {"batchItemFailures": []}
    assert types(ctx, b)[-1] == "turn_completed"
