"""A worker crash after `effect_begin` of a channel send, through `threads-aws dev` over real
HTTP and the local Slack Web API fake: the post reached Slack, then the process was killed
(`kill -9`) before the answer came back. The restarted host (same state dir) redelivers the run
step; once the dead worker's lease lapses, the begun send is reconciled by Slack's metadata
lookup (`effect_unknown{crash_after_begin}` → `effect_resolved{confirmed_success, reconcile}`),
never posted a second time."""

from __future__ import annotations

import json
import signal
import time
import urllib.request
from pathlib import Path
from typing import Any

from helpers.dev_process import DevProcess, dev_process, wait_until
from threads_aws_dev.fakes import slack as fs
from threads_aws_dev.fakes.slack import FakeSlack

SECRET = "crash-slack-signing-secret"
TEAM = "T0CRASH"
READER = "dev:reader:acme:ops"  # a principal of the installation's tenant (reads only)
LEASE_MS = 5000


def wait(pred: Any, timeout: float, what: str) -> Any:
    return wait_until(pred, timeout, what, every=0.2)


def thread_ids(dev: DevProcess) -> list[str]:
    return [r.thread_id for r in dev.inbox_rows()]


def events(dev: DevProcess, thread_id: str) -> list[dict[str, Any]]:
    return dev.timeline(thread_id, token=READER)


def test_a_send_begun_before_a_kill_9_is_reconciled_not_resent(tmp_path: Path):
    slack = FakeSlack(tokens=["xoxb-crash"]).start()
    slack.hang_s = 30.0  # posted, then no answer: the worker is killed while it waits
    slack.fail("chat.postMessage", "hang")
    channels = {
        "installations": [
            {
                "channel": "slack",
                "installation_id": TEAM,
                "tenant": "acme",
                "agent": "demo",
                "secrets": {"signing_secret": {"value": SECRET}, "bot_token": {"value": "xoxb-crash"}},
            }
        ]
    }
    (tmp_path / "channels.json").write_text(json.dumps(channels))
    env = {
        "CHANNELS_FILE": str(tmp_path / "channels.json"),
        "SLACK_API_URL": slack.url,
        # the dead worker's lease lapses in seconds, not the deployed 60 s (services._lease_ttl_ms)
        "RUN_STEP_LEASE_TTL_MS": str(LEASE_MS),
    }
    ts = "1790000500.000100"
    replies = lambda: [m for m in slack.bot_messages("C1") if m.get("thread_ts") == ts]  # noqa: E731
    try:
        with dev_process(tmp_path, env) as dev:
            now = int(time.time())
            ev = fs.message_event("C1", "U1", "crash me", ts)
            doc = fs.event_callback(ev, team_id=TEAM, event_id="EvK1", event_time=now)
            signed = fs.signed_json(SECRET, doc, timestamp=now)
            req = urllib.request.Request(
                dev.url + "/channels/slack/events", data=signed.body, method="POST", headers=signed.headers
            )
            with urllib.request.urlopen(req, timeout=30) as r:
                assert r.status == 200
            (thread_id,) = wait(lambda: thread_ids(dev), 30, "the inbox row")
            wait(replies, 60, "the post to reach Slack")
            wait(lambda: events(dev, thread_id)[-1]["type"] == "effect_begin", 10, "effect_begin last")
            dev.proc.send_signal(signal.SIGKILL)  # the worker dies waiting for Slack's answer
            assert dev.proc.wait(timeout=30) == -signal.SIGKILL
        with dev_process(tmp_path, env) as dev:  # the same state dir
            before = events(dev, thread_id)
            assert before[-1]["type"] == "effect_begin" and len(replies()) == 1
            # the run step comes back; after the dead worker's lease (LEASE_MS) the send is reconciled
            done = wait(
                lambda: (evs := events(dev, thread_id))[-1]["type"] == "tool_result" and evs,
                150,
                "the reconciled send",
            )
            kinds = [e["type"] for e in done]
            tail = ["effect_begin", "effect_unknown", "effect_resolved", "tool_result"]
            assert kinds[len(before) - 1 :] == tail
            unknown, resolved = done[-3], done[-2]
            assert unknown["data"]["reason"] == "crash_after_begin"
            assert (resolved["data"]["outcome"], resolved["data"]["by"]) == ("confirmed_success", "reconcile")
            time.sleep(1.0)
            assert len(replies()) == 1  # reconciled, not duplicated
            assert kinds.count("effect_begin") == 1
    finally:
        slack.stop()
