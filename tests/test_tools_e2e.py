"""Issue 11 acceptance through `threads-aws dev` over real HTTP (a subprocess on its own state
dir, its moto store reached through the banner's endpoint):

- a Lambda tool call (the example tool, `add_expense`: Powertools Idempotency on the effect key)
  commits once although the worker is killed (`kill -9`) after `effect_begin` is durable and the
  tool has written its ledger row, and although the run step is delivered again (duplicates on
  the FIFO queue, before and after the call settles): one ledger row, one `effect_commit`, one
  `tool_result`;
- a steer sent while the turn is open lands in the next model request (its rendered bytes);
- a stop sent while a tool call runs lets that call finish, then ends the turn `interrupted`
  with no new model request.
"""

from __future__ import annotations

import json
import signal
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
from helpers.dev_process import DevProcess, dev_process

LEASE_MS = 3000  # the dead worker's lease lapses quickly (RUN_STEP_LEASE_TTL_MS)
ENV = {"RUN_STEP_LEASE_TTL_MS": str(LEASE_MS)}


def wait(pred: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def client(dev: DevProcess, service: str) -> Any:
    env = dev.env
    return boto3.client(
        service,
        endpoint_url=env["AWS_ENDPOINT_URL"],
        region_name=env["AWS_DEFAULT_REGION"],
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def ledger(dev: DevProcess) -> list[dict[str, Any]]:
    ddb = client(dev, "dynamodb")
    (table,) = [t for t in ddb.list_tables()["TableNames"] if t.endswith("-tool-example-table")]
    return [i for i in ddb.scan(TableName=table)["Items"] if i["id"]["S"].startswith("expense#")]


def run_step_queue(dev: DevProcess) -> tuple[Any, str]:
    sqs = client(dev, "sqs")
    urls = sqs.list_queues()["QueueUrls"]
    found = [u for u in urls if "run-step" in u and u.endswith(".fifo") and "dlq" not in u]
    assert len(found) == 1, urls
    return sqs, found[0]


def deliver_again(dev: DevProcess, branch_id: str) -> None:
    """A duplicate delivery of the branch's run step (a distinct message: FIFO dedup can't drop it)."""
    sqs, url = run_step_queue(dev)
    sqs.send_message(
        QueueUrl=url,
        MessageBody=json.dumps({"branch_id": branch_id, "reason": "resume"}),
        MessageGroupId=branch_id,
        MessageDeduplicationId=uuid.uuid4().hex,
    )


def queue_drained(dev: DevProcess) -> bool:
    sqs, url = run_step_queue(dev)
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    return all(attrs[n] == "0" for n in names)


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def grant(dev: DevProcess, thread_id: str) -> None:
    def open_one() -> list[dict[str, Any]]:
        status, body, _ = dev.call("GET", f"/v1/threads/{thread_id}/approvals")
        assert status == 200, body
        return body  # type: ignore[no-any-return]

    (challenge,) = wait(open_one, 30, "the approval challenge")
    status, body, _ = dev.call(
        "POST", f"/v1/threads/{thread_id}/approvals/{challenge['challenge_id']}", {"decision": "grant"}
    )
    assert status == 200, body


def result(dev: DevProcess, thread_id: str, run_id: str, timeout: float = 60) -> dict[str, Any]:
    """The run's outcome: follow its SSE windows (Last-Event-ID) until the result message."""
    deadline = time.monotonic() + timeout
    last: str | None = None
    while time.monotonic() < deadline:
        status, text, _ = dev.call(
            "GET",
            f"/v1/threads/{thread_id}/runs/{run_id}/events",
            headers={"Last-Event-ID": last} if last else None,
        )
        assert status == 200, text
        for block in text.split("\n\n"):
            fields = {k: v.removeprefix(" ") for k, _, v in (ln.partition(":") for ln in block.splitlines())}
            if "data" not in fields:
                continue
            msg = json.loads(fields["data"])
            if msg["kind"] == "result":
                return msg["result"]  # type: ignore[no-any-return]
            if "id" in fields:
                last = fields["id"]
    raise AssertionError(f"run {run_id} did not settle within {timeout}s")


def rendered_user_text(dev: DevProcess, request_ref: dict[str, Any]) -> list[str]:
    s3 = client(dev, "s3")
    body = s3.get_object(Bucket=dev.env["ARTIFACTS_BUCKET"], Key="sha256/" + request_ref["sha256"])
    out = []
    for line in body["Body"].read().splitlines()[1:]:
        v = json.loads(line)
        if v.get("role") == "user":
            out.append("".join(p.get("text", "") for p in v["content"]))
    return out


def test_a_lambda_tool_commits_once_across_kill_9_and_duplicate_steps(tmp_path: Path) -> None:
    args = {"amount_cents": 1250, "memo": "lunch", "delay_ms": 3000}
    with dev_process(tmp_path, ENV) as dev:
        run = dev.start_run("lambda: add_expense " + json.dumps(args))
        tid, bid = run["thread_id"], run["branch_id"]
        grant(dev, tid)  # add_expense asks under the demo policy
        # The tool runs (after effect_begin is durable): its ledger row is written, then it
        # sleeps; the whole process dies before the answer comes back.
        wait(lambda: ledger(dev), 30, "the tool's ledger row")
        dev.proc.send_signal(signal.SIGKILL)  # at once: the tool sleeps 3 s before answering
        assert dev.proc.wait(timeout=30) == -signal.SIGKILL
    with dev_process(tmp_path, ENV) as dev:  # the same state dir
        # The kill landed after effect_begin, before any answer. The restarted worker may already
        # be recovering (the dead lease lapses in 3 s): count from the first begin, not the end.
        before = dev.timeline(tid)
        n = kinds(before).index("effect_begin") + 1
        assert not {"effect_commit", "tool_result"} & set(kinds(before)[n:]) and len(ledger(dev)) == 1
        deliver_again(dev, bid)
        deliver_again(dev, bid)
        out = result(dev, tid, run["run_id"], timeout=120)
        assert out["status"] == "completed", out
        events = dev.timeline(tid)
        tail = kinds(events)[n - 1 :]
        # recovery: the begun effect is in doubt; inside its dedup window a re-send under the
        # same effect key is safe (the tool's idempotency answers the first attempt's result)
        assert tail[:3] == ["effect_begin", "effect_unknown", "effect_resolved"], tail
        unknown, resolved = events[n], events[n + 1]
        assert unknown["data"]["reason"] == "crash_after_begin" and unknown["actor"]["kind"] == "recovery"
        assert (resolved["data"]["outcome"], resolved["data"]["by"]) == ("safe_to_retry", "provider_dedup")
        assert kinds(events).count("effect_commit") == 1 and kinds(events).count("tool_result") == 1
        (res,) = [e for e in events if e["type"] == "tool_result"]
        assert res["data"]["origin"] == "executed" and not res["data"]["is_error"]
        assert "Recorded lunch: 12.50" in res["data"]["preview"]
        begins = [e for e in events if e["type"] == "effect_begin"]
        assert [b["data"]["attempt"] for b in begins] == list(range(1, len(begins) + 1))
        (row,) = ledger(dev)
        assert row["id"]["S"] == f"expense#{bid}:{res['data']['call_id']}"  # keyed by the effect key
        assert kinds(events)[-1] == "turn_completed"
        # one more duplicate after the run settled: it finds the branch idle and appends nothing
        deliver_again(dev, bid)
        wait(lambda: queue_drained(dev), 30, "the duplicate step to be consumed")
        assert dev.timeline(tid) == events and len(ledger(dev)) == 1


def test_steer_lands_in_the_next_request_and_stop_ends_interrupted(tmp_path: Path) -> None:
    with dev_process(tmp_path, ENV) as dev:
        # steer: the turn is open (parked on a question); the steer renders in the next request
        run = dev.start_run("ask: which colour?")
        tid = run["thread_id"]
        assert result(dev, tid, run["run_id"])["status"] == "parked"
        status, steer, _ = dev.call("POST", f"/v1/threads/{tid}/steer", {"text": "answer in French"})
        assert status == 200, steer
        call = next(e for e in dev.timeline(tid) if e["type"] == "tool_call")
        status, body, _ = dev.call(
            "POST", f"/v1/threads/{tid}/questions/{call['data']['call_id']}/answer", {"answer": "blue"}
        )
        assert status == 200, body
        assert result(dev, tid, run["run_id"])["status"] == "completed"
        events = dev.timeline(tid)
        requests = [e for e in events if e["type"] == "model_request"]
        assert len(requests) == 2
        assert "answer in French" not in rendered_user_text(dev, requests[0]["data"]["request_ref"])
        assert rendered_user_text(dev, requests[1]["data"]["request_ref"]) == [
            "ask: which colour?",
            "answer in French",
        ]
        steer_ev = next(e for e in events if e["type"] == "steer")
        assert steer_ev["event_id"] == steer["event_id"] and steer_ev["data"]["source"] == "api"

        # stop: sent while a (slow) tool call runs; the call finishes, nothing new starts
        args = {"amount_cents": 300, "memo": "coffee", "delay_ms": 2000}
        run = dev.start_run("lambda: add_expense " + json.dumps(args))
        tid = run["thread_id"]
        grant(dev, tid)
        dev.wait_for(tid, "effect_begin", timeout=30)
        status, body, _ = dev.call("POST", f"/v1/threads/{tid}/stop", {"reason": "enough"})
        assert status == 200, body
        out = result(dev, tid, run["run_id"])
        events = dev.timeline(tid)
        ks = kinds(events)
        assert ks[ks.index("stop_when_idle") :] == [
            "stop_when_idle",
            "effect_commit",
            "tool_result",
            "turn_completed",
        ], ks
        assert events[-1]["data"] == {"reason": "interrupted"}
        assert ks.count("model_request") == 1  # no request after the stop
        assert out["status"] == "failed", out  # an interrupted turn has no output
