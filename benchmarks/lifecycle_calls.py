"""AWS calls per thread deletion, per park escalation and per escalation hop, counted by a
botocore `before-call` hook on every client (DynamoDB, S3, SQS), on moto in one process (the
memory tools' figures are `tool_calls.py`'s).

- park: the step that parks a `demo-ttl` approval (it arms the escalation's wake-up first);
- hop: a wake-up not due yet, re-sent by the timer's forwarder: while the park is open, and once
  it was answered (then it stops);
- escalation: the step after `expires_at` that appends `park_escalated`;
- delete: `DELETE /v1/threads/{id}` (the Host's `delete_thread`: plan, one transaction, purge) of a
  thread of N finished turns, and of a parent with one subagent child.

    .venv/bin/python benchmarks/lifecycle_calls.py
"""

from __future__ import annotations

import json
import sys
from typing import Any

from _calls import count_calls, moto_env, summary


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def main() -> int:
    import boto3
    from moto import mock_aws
    from threads_aws.engine.queue import forward_wakeups
    from threads_aws.engine.step import advance
    from threads_aws.host.principal import Principal
    from threads_aws.services import Services
    from threads_aws.store.records import wall_ms
    from threads_aws_dev.local.infra import create_resources, default_template_path

    moto_env()
    alice = Principal("api", "bench", "alice")
    with mock_aws():
        session = boto3.Session(region_name="us-east-1")
        res = create_resources(default_template_path(), session, prefix="bench")
        counter = count_calls(session)
        clients = {n: session.client(n) for n in ("dynamodb", "s3", "sqs")}
        clock = Clock(wall_ms())
        svc = Services(res, clients=clients, session=session, clock=clock)
        host, ctx = svc.host(), svc.engine()

        def stage(name: str, fn: Any) -> Any:
            counter.clear()
            out = fn()
            total, detail = summary(counter)
            print(f"{name:52s} {total:3d} AWS calls  ({detail})")
            return out

        def step(branch_id: str) -> Any:
            return advance(ctx, branch_id, holder_id="bench", deadline_ms=clock() + 300_000)

        def settle(run: dict[str, Any]) -> None:
            while step(run["branch_id"]).state not in ("idle", "parked"):
                pass

        # -- park escalation
        run = host.start_run(alice, {"agent": "demo-ttl", "input": "note: call dad"}, "k-park")
        b = run["branch_id"]
        assert stage("park: the step that parks (arms the wake-up)", lambda: step(b)).state == "parked"
        expires = ctx.writer.load(b).fold.park_expires
        (at,) = expires.values()
        far = at + 3_600_000  # as if the TTL were an hour past now: the wake-up hops
        hop = {"Records": [{"body": json.dumps({"branch_id": b, "not_before": far, "park": True})}]}
        stage("hop: park still open (re-sent)", lambda: forward_wakeups(hop["Records"], ctx))
        clock.now = at + 1
        stage("escalation: the step past expires_at", lambda: step(b))
        assert len([e for e in ctx.writer.load(b).fold.events if e["type"] == "park_escalated"]) == 1
        challenge = next(k for k, c in ctx.writer.load(b).fold.challenges.items() if not c.consumed)
        try:
            host.decide_approval(alice, run["thread_id"], challenge, {"decision": "deny"})
        except Exception:  # noqa: BLE001 - approval_expired: recorded as a denial all the same
            pass
        settle(run)
        stage("hop: park answered (dropped)", lambda: forward_wakeups(hop["Records"], ctx))

        # -- deletion
        for turns in (1, 10):
            run = host.start_run(alice, {"agent": "demo", "input": "hello"}, f"k-del-{turns}")
            settle(run)
            for i in range(turns - 1):
                host.start_run(
                    alice, {"agent": "demo", "input": f"hi {i}", "thread_id": run["thread_id"]}, f"k{i}"
                )
                settle(run)
            stage(
                f"delete: a thread of {turns} turn(s)",
                lambda run=run: host.delete_thread(alice, run["thread_id"]),
            )
        run = host.start_run(alice, {"agent": "demo", "input": "spawn: demo: time"}, "k-child")
        for _ in range(20):
            settle(run)
            children = host.thread(alice, run["thread_id"]).get("children") or []
            for c in children:
                child = host.stores.threads.get_thread("bench", c["child_thread_id"])
                if child is not None:
                    while step(child.main_branch_id).state not in ("idle", "parked"):
                        pass
            if host.thread(alice, run["thread_id"])["status"] == "idle":
                break
        stage("delete: a parent and its subagent child", lambda: host.delete_thread(alice, run["thread_id"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
