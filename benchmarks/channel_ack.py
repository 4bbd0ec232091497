"""Channel webhooks end to end: ack latency through `threads-aws dev`, and AWS calls per inbound
message.

Usage: python benchmarks/channel_ack.py [--posts N]

1. Latency: an in-process `threads-aws dev` (moto server, the function-URL route, the inbox
   consumer and run-step pollers running as they do locally, memory only), a Slack fake for the
   replies, and N signed Slack message posts over real HTTP to /channels/slack/events, half
   opening a new conversation (the thread is created in the inbox transaction), half replying in
   an existing one. Prints p50/p99/max ms of the time to the ack for each kind. Slack's limit is
   3,000 ms.
2. Calls: the same path in one process on moto with a botocore `before-call` counter on every
   client: the webhook (verify, route, inbox transaction, wake-up), the consumer (delivery under
   the lease), and the run step (the demo model's turn, then the reply as an effect). Prints the
   calls per stage by service.operation; and one schedule occurrence fired (reserve, decide
   under the writer, wake the branch) and the same occurrence again (an EventBridge retry).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from _calls import count_calls, moto_env, summary
from threads_aws_dev.fakes import slack as fs
from threads_aws_dev.fakes.slack import FakeSlack

SECRET = "bench-signing-secret"
TEAM = "T0BENCH"


def channels_file(tmp: Path) -> Path:
    doc = {
        "installations": [
            {
                "channel": "slack",
                "installation_id": TEAM,
                "tenant": "bench",
                "agent": "demo",
                "secrets": {"signing_secret": {"value": SECRET}, "bot_token": {"value": "xoxb-bench"}},
            }
        ]
    }
    path = tmp / "channels.json"
    path.write_text(json.dumps(doc))
    return path


def signed(text: str, ts: str, event_id: str, thread_ts: str | None = None) -> Any:
    now = int(time.time())
    ev = fs.message_event("C1", "U1", text, ts, thread_ts=thread_ts)
    doc = fs.event_callback(ev, team_id=TEAM, event_id=event_id, event_time=now)
    return fs.signed_json(SECRET, doc, timestamp=now)


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def latency(posts: int) -> None:
    from threads_aws.engine import replies
    from threads_aws_dev.local.dev import DevServer

    tmp = Path(tempfile.mkdtemp(prefix="channel-ack-"))
    slack = FakeSlack(tokens=["xoxb-bench"]).start()
    env = {"CHANNELS_FILE": str(channels_file(tmp)), "SLACK_API_URL": slack.url}
    os.environ.update(env)
    replies.forget_senders()  # the calls stage's senders point at its own (stopped) fake
    dev = DevServer(port=0, extra_env=env, state_dir=None)
    dev.start()
    try:
        url = dev.url + "/channels/slack/events"
        new: list[float] = []
        reply: list[float] = []
        base = 1_790_000_000
        root = f"{base}.000001"
        urllib.request.urlopen(_req(url, signed("root", root, "EvRoot")), timeout=30).read()
        for i in range(posts):
            fresh = i % 2 == 0
            ts = f"{base + 1 + i}.000100"
            s = signed(f"message {i}", ts, f"EvB{i}", thread_ts=None if fresh else root)
            t0 = time.perf_counter()
            with urllib.request.urlopen(_req(url, s), timeout=30) as r:
                r.read()
                assert r.status == 200
            (new if fresh else reply).append((time.perf_counter() - t0) * 1000)
        for name, xs in (("new conversation", new), ("existing conversation", reply)):
            print(
                f"ack {name:22s} n={len(xs):4d}  p50 {statistics.median(xs):7.1f} ms"
                f"  p99 {pct(xs, 99):7.1f} ms  max {max(xs):7.1f} ms"
            )
        both = new + reply
        print(
            f"ack {'all':22s} n={len(both):4d}  p50 {statistics.median(both):7.1f} ms"
            f"  p99 {pct(both, 99):7.1f} ms"
        )
    finally:
        dev.stop()
        slack.stop()


def _req(url: str, s: Any) -> urllib.request.Request:
    return urllib.request.Request(url, data=s.body, method="POST", headers=dict(s.headers))


def calls() -> None:
    import boto3
    from moto import mock_aws
    from threads_aws.channels.consumer import Consumer
    from threads_aws.channels.secrets import SecretResolver
    from threads_aws.channels.webhook import handle
    from threads_aws.engine import replies
    from threads_aws.engine.step import advance
    from threads_aws.services import Services
    from threads_aws.store.inbox import Inbox
    from threads_aws_dev.local.infra import create_resources, default_template_path

    moto_env()
    tmp = Path(tempfile.mkdtemp(prefix="channel-calls-"))
    slack = FakeSlack(tokens=["xoxb-bench"]).start()
    os.environ["CHANNELS_FILE"] = str(channels_file(tmp))
    os.environ["SLACK_API_URL"] = slack.url
    replies.forget_senders()
    with mock_aws():
        session = boto3.Session(region_name="us-east-1")
        res = create_resources(default_template_path(), session, prefix="bench")
        counter = count_calls(session)
        clients = {n: session.client(n) for n in ("dynamodb", "s3", "sqs")}
        svc = Services(res, clients=clients)

        def stage(name: str, fn: Any) -> Any:
            counter.clear()
            out = fn()
            total, detail = summary(counter)
            print(f"calls {name:34s} {total:3d}  ({detail})")
            return out

        def post(s: Any) -> dict[str, Any]:
            ev = {
                "version": "2.0",
                "rawPath": "/channels/slack/events",
                "headers": {k.lower(): v for k, v in s.headers.items()},
                "requestContext": {"http": {"method": "POST", "path": "/channels/slack/events"}},
                "body": s.body.decode(),
                "isBase64Encoded": False,
            }
            return handle(ev, provider="slack", services=svc, resolver=SecretResolver(env={}))

        root = "1790000000.000001"
        stage("webhook, new conversation", lambda: post(signed("hello", root, "EvC1")))
        row = Inbox(clients["dynamodb"], res.state_table).all_rows()[-1]
        stage(
            "consumer (delivery under the lease)",
            lambda: Consumer(svc).apply_thread(row.thread_id, row.branch_id, [row.pk]),
        )
        engine = svc.engine()
        stage(
            "run step + reply effect",
            lambda: advance(engine, row.branch_id, holder_id="b", deadline_ms=svc.clock() + 300_000),
        )
        stage(
            "webhook, existing conversation",
            lambda: post(signed("again", "1790000001.000100", "EvC2", thread_ts=root)),
        )
        rows = Inbox(clients["dynamodb"], res.state_table).all_rows()
        r2 = rows[-1]
        stage(
            "consumer (delivery under the lease)",
            lambda: Consumer(svc).apply_thread(r2.thread_id, r2.branch_id, [r2.pk]),
        )
        stage(
            "webhook, redelivery (no new row)",
            lambda: post(signed("again", "1790000001.000100", "EvC2", thread_ts=root)),
        )
        schedule_fire(svc, stage, row)
        stage(
            "webhook, forged (401)",
            lambda: post(
                fs.Signed(
                    body=b"{}",
                    headers={"X-Slack-Signature": "v0=0", "X-Slack-Request-Timestamp": str(int(time.time()))},
                )
            ),
        )
    slack.stop()


def schedule_fire(svc: Any, stage: Any, row: Any) -> None:
    """One occurrence of a thread schedule: reserve, decide under the writer (schedule_fired +
    user_input in one transaction), wake the branch; then the same occurrence again (an
    EventBridge retry), which the reservation turns away."""
    from threads_aws.engine.step import advance
    from threads_aws.host.principal import Principal
    from threads_aws.schedules.service import ScheduleService

    # the thread's last message opened a turn: run it first, or the occurrence is an overlap
    advance(svc.engine(), row.branch_id, holder_id="b", deadline_ms=svc.clock() + 300_000)

    who = Principal(issuer=f"slack:{TEAM}", tenant="bench", subject="U1")
    sched = ScheduleService.of(svc)
    made = sched.create(svc.host(), who, row.thread_id, {"cron": "*/5 * * * *", "input": "tick"})
    at = (svc.clock() // 300_000) * 300_000
    sid = made["schedule_id"]
    outcomes = stage("schedule fire", lambda: sched.fire(sid, "bench", at))
    again = stage("schedule fire, same occurrence again", lambda: sched.fire(sid, "bench", at))
    print(f"      (outcomes: {outcomes}, then {again})")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--posts", type=int, default=200)
    args = ap.parse_args(argv)
    calls()
    latency(args.posts)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
