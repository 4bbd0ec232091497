"""Channels end to end through `threads-aws dev` over real HTTP: signed Slack and WhatsApp webhooks
on the function-URL path `/channels/{channel}/events`, the inbox consumer and the run-step worker
fed by the local SQS pollers, replies posted to the local Slack / WhatsApp Web API fakes."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.dev_process import DevProcess, dev_process
from threads_aws.fakes import slack as fs
from threads_aws.fakes import whatsapp as fw
from threads_aws.fakes.slack import FakeSlack
from threads_aws.fakes.whatsapp import FakeWhatsApp

SECRET = "e2e-slack-signing-secret"
APP_SECRET = "e2e-whatsapp-app-secret"
VERIFY = "e2e-verify-token"
TEAM = "T0E2E"
PNID = "100000000000009"
APPROVER = "U0APPROVER"


@pytest.fixture(scope="module")
def fakes() -> Iterator[tuple[FakeSlack, FakeWhatsApp]]:
    slack = FakeSlack(tokens=["xoxb-e2e"]).start()
    wa = FakeWhatsApp(tokens=["wa-e2e"]).start()
    try:
        yield slack, wa
    finally:
        slack.stop()
        wa.stop()


@pytest.fixture(scope="module")
def dev(tmp_path_factory, fakes) -> Iterator[DevProcess]:
    slack, wa = fakes
    tmp = tmp_path_factory.mktemp("channels-e2e")
    channels = {
        "installations": [
            {
                "channel": "slack",
                "installation_id": TEAM,
                "tenant": "acme",
                "agent": "demo",
                "approvers": [APPROVER],
                "secrets": {"signing_secret": {"value": SECRET}, "bot_token": {"value": "xoxb-e2e"}},
            },
            {
                "channel": "whatsapp",
                "installation_id": PNID,
                "tenant": "acme",
                "agent": "demo",
                "secrets": {
                    "app_secret": {"value": APP_SECRET},
                    "verify_token": {"value": VERIFY},
                    "access_token": {"value": "wa-e2e"},
                },
            },
        ]
    }
    path = Path(tmp) / "channels.json"
    path.write_text(json.dumps(channels))
    env = {"CHANNELS_FILE": str(path), "SLACK_API_URL": slack.url, "WHATSAPP_API_URL": wa.url}
    with dev_process(Path(tmp), env) as d:
        yield d


def send(dev: DevProcess, path: str, signed: Any, method: str = "POST") -> tuple[int, bytes]:
    url = dev.url + path
    if getattr(signed, "query", None):
        from urllib.parse import urlencode

        url += "?" + urlencode(signed.query)
    req = urllib.request.Request(
        url, data=signed.body if method == "POST" else None, method=method, headers=dict(signed.headers)
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def slack_message(
    text: str, ts: str, event_id: str, *, user: str = "U1", thread_ts: str | None = None
) -> Any:
    now = int(time.time())
    ev = fs.message_event("C1", user, text, ts, thread_ts=thread_ts)
    return fs.signed_json(
        SECRET, fs.event_callback(ev, team_id=TEAM, event_id=event_id, event_time=now), timestamp=now
    )


def wait(pred, timeout: float = 30.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def inbox_rows(dev: DevProcess) -> list[Any]:
    import boto3
    from threads_aws.store.inbox import Inbox

    e = dev.env
    ddb = boto3.client(
        "dynamodb",
        endpoint_url=e["AWS_ENDPOINT_URL"],
        region_name=e["AWS_DEFAULT_REGION"],
        aws_access_key_id=e["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=e["AWS_SECRET_ACCESS_KEY"],
    )
    return Inbox(ddb, e["STATE_TABLE"]).all_rows()


READER = "dev:reader:acme:ops"  # a principal of the installation's tenant (reads only)


def thread_events(dev: DevProcess, thread_id: str) -> list[dict[str, Any]]:
    status, body, _ = dev.call("GET", f"/v1/threads/{thread_id}/timeline", token=READER)
    assert status == 200, body
    return [e["event"] for e in body["entries"]]


def row_for(dev: DevProcess, item_key: str) -> Any:
    return wait(lambda: next((r for r in inbox_rows(dev) if r.item_key == item_key), None), what=item_key)


def test_slack_message_starts_a_run(dev, fakes):
    status, _ = send(dev, "/channels/slack/events", slack_message("hello there", "1790000100.000100", "EvA1"))
    assert status == 200
    row = row_for(dev, "C1:1790000100.000100")
    # the consumer applies it, the worker runs the turn on the demo model
    events = wait(
        lambda: (
            (evs := thread_events(dev, row.thread_id))
            and any(e["type"] == "turn_completed" for e in evs)
            and evs
        ),
        what="the run's turn_completed",
    )
    types = [e["type"] for e in events]
    assert types[:3] == ["thread_started", "channel_delivery", "user_input"]


def test_forged_signature_is_401(dev):
    good = slack_message("hello", "1790000200.000100", "EvF1")
    forged = fs.Signed(body=good.body, headers={**good.headers, "X-Slack-Signature": "v0=" + "1" * 64})
    status, body = send(dev, "/channels/slack/events", forged)
    assert status == 401 and json.loads(body)["error"]["code"] == "unverified"


def test_whatsapp_get_challenge(dev):
    status, body = send(dev, "/channels/whatsapp/events", fw.challenge_request(VERIFY, "4242"), method="GET")
    assert status == 200 and body == b"4242"
    status, _ = send(dev, "/channels/whatsapp/events", fw.challenge_request("wrong", "4242"), method="GET")
    assert status == 401
    status, _ = send(dev, "/channels/slack/events", fw.challenge_request(VERIFY, "1"), method="GET")
    assert status == 404
    status, _ = send(dev, "/channels/nope/events", fw.challenge_request(VERIFY, "1"), method="GET")
    assert status == 404
