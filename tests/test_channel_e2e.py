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
from helpers.dev_process import DevProcess, dev_process, wait_until
from threads_aws_dev.fakes import slack as fs
from threads_aws_dev.fakes import whatsapp as fw
from threads_aws_dev.fakes.slack import FakeSlack
from threads_aws_dev.fakes.whatsapp import FakeWhatsApp

SECRET = "e2e-slack-signing-secret"
APP_SECRET = "e2e-whatsapp-app-secret"
VERIFY = "e2e-verify-token"
TEAM = "T0E2E"
PNID = "100000000000009"
APPROVER = "U0APPROVER"


@pytest.fixture(scope="module")
def fakes() -> Iterator[tuple[FakeSlack, FakeWhatsApp]]:
    slack = FakeSlack(tokens=["xoxb-e2e"]).start()
    wa = FakeWhatsApp(tokens=["wa-e2e"], phone_number_ids=[PNID]).start()
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


wait = wait_until


def inbox_rows(dev: DevProcess) -> list[Any]:
    return dev.inbox_rows()


READER = "dev:reader:acme:ops"  # a principal of the installation's tenant (reads only)


def thread_events(dev: DevProcess, thread_id: str) -> list[dict[str, Any]]:
    return dev.timeline(thread_id, token=READER)


def row_for(dev: DevProcess, item_key: str) -> Any:
    return wait(lambda: next((r for r in inbox_rows(dev) if r.item_key == item_key), None), what=item_key)


def replies_in(slack: FakeSlack, thread_ts: str) -> list[dict[str, Any]]:
    return [m for m in slack.bot_messages("C1") if m.get("thread_ts") == thread_ts]


def test_slack_message_starts_a_run_and_the_answer_is_posted_once(dev, fakes):
    slack, _ = fakes
    ts = "1790000100.000100"
    status, _ = send(dev, "/channels/slack/events", slack_message("hello there", ts, "EvA1"))
    assert status == 200
    row = row_for(dev, f"C1:{ts}")
    # the consumer applies it, the worker runs the turn on the demo model, then replies
    posted = wait(lambda: replies_in(slack, ts), what="the reply")
    assert [m["text"] for m in posted] == ['You said: "hello there"']
    # the post lands before its effect_commit (effect_begin, post, commit): wait for the commit
    events = wait(
        lambda: (evs := thread_events(dev, row.thread_id)) and evs[-1]["type"] == "tool_result" and evs,
        what="the send's tool_result",
    )
    types = [e["type"] for e in events]
    assert types[:3] == ["thread_started", "channel_delivery", "user_input"]
    assert types[-5:] == ["tool_call", "permission_decision", "effect_begin", "effect_commit", "tool_result"]
    call = next(e for e in events if e["type"] == "tool_call")
    response = next(e for e in events if e["type"] == "model_response")
    assert call["data"]["call_id"] == f"send_{response['seq']}_0" and call["actor"] == {"kind": "host"}
    assert call["data"]["input"]["address"] == f"C1:{ts}"
    time.sleep(1.0)
    assert len(replies_in(slack, ts)) == 1


def test_the_same_delivery_three_times_starts_one_run_and_posts_one_answer(dev, fakes):
    slack, _ = fakes
    ts = "1790000300.000100"
    first = slack_message("once please", ts, "EvR1")
    for retry in (None, 1, 2):
        signed = fs.signed_json(SECRET, json.loads(first.body), timestamp=int(time.time()), retry_num=retry)
        assert send(dev, "/channels/slack/events", signed)[0] == 200
    row = row_for(dev, f"C1:{ts}")
    wait(lambda: replies_in(slack, ts), what="the reply")
    time.sleep(1.5)
    assert len(replies_in(slack, ts)) == 1
    types = [e["type"] for e in thread_events(dev, row.thread_id)]
    assert types.count("user_input") == 1 and types.count("channel_delivery") == 1
    assert len([r for r in inbox_rows(dev) if r.item_key == f"C1:{ts}"]) == 1


def press(challenge_id: str, user: str, ts: str, trigger: str) -> Any:
    payload = fs.block_actions(
        [fs.button_action(challenge_id, "grant")],
        team_id=TEAM,
        user=user,
        channel="C1",
        message_ts=ts,
        trigger_id=trigger,
        thread_ts=ts,
    )
    return fs.signed_form(SECRET, payload, timestamp=int(time.time()))


def test_approval_posted_with_buttons_granted_by_an_approver_only(dev, fakes):
    slack, _ = fakes
    ts = "1790000400.000100"
    assert send(dev, "/channels/slack/events", slack_message("note: buy milk", ts, "EvN1"))[0] == 200
    row = row_for(dev, f"C1:{ts}")
    prompt = wait(lambda: [m for m in replies_in(slack, ts) if m.get("blocks")], what="the approval prompt")
    (msg,) = prompt
    actions = next(b for b in msg["blocks"] if b["type"] == "actions")
    challenge_id = actions["elements"][0]["value"]
    assert {e["action_id"] for e in actions["elements"]} == {"threads_grant", "threads_deny"}
    # a press by someone who is not an approver changes nothing
    assert send(dev, "/channels/slack/events", press(challenge_id, "U0INTRUDER", ts, "trig-1"))[0] == 200
    wait(
        lambda: any(r.consumed_seq is not None for r in inbox_rows(dev) if r.item_key == "trig-1#0"),
        what="the press consumed",
    )
    time.sleep(0.5)
    types = [e["type"] for e in thread_events(dev, row.thread_id)]
    assert "approval_granted" not in types and types.count("parked") == 1
    # the approver's press grants it, the run completes and its answer is posted
    assert send(dev, "/channels/slack/events", press(challenge_id, APPROVER, ts, "trig-2"))[0] == 200
    done = wait(lambda: [m for m in replies_in(slack, ts) if m["text"].startswith("Done")], what="the answer")
    assert len(done) == 1
    events = thread_events(dev, row.thread_id)
    granted = next(e for e in events if e["type"] == "approval_granted")
    assert granted["actor"]["principal"] == {"issuer": f"slack:{TEAM}", "subject": APPROVER, "tenant": "acme"}
    assert [e["type"] for e in events].count("turn_completed") == 1


def test_forged_signature_is_401(dev):
    good = slack_message("hello", "1790000200.000100", "EvF1")
    forged = fs.Signed(body=good.body, headers={**good.headers, "X-Slack-Signature": "v0=" + "1" * 64})
    before = inbox_rows(dev)
    status, body = send(dev, "/channels/slack/events", forged)
    assert status == 401 and json.loads(body)["error"]["code"] == "unverified"
    after = inbox_rows(dev)  # nothing stored: no inbox row (and so no thread route) for it
    assert len(after) == len(before) and all(r.item_key != "C1:1790000200.000100" for r in after)


def test_whatsapp_get_challenge(dev):
    status, body = send(dev, "/channels/whatsapp/events", fw.challenge_request(VERIFY, "4242"), method="GET")
    assert status == 200 and body == b"4242"
    status, _ = send(dev, "/channels/whatsapp/events", fw.challenge_request("wrong", "4242"), method="GET")
    assert status == 401
    status, _ = send(dev, "/channels/slack/events", fw.challenge_request(VERIFY, "1"), method="GET")
    assert status == 404
    status, _ = send(dev, "/channels/nope/events", fw.challenge_request(VERIFY, "1"), method="GET")
    assert status == 404


def test_whatsapp_signed_message_round_trip(dev, fakes):
    _, wa = fakes
    doc = fw.webhook(
        PNID,
        messages=[fw.text_message("15557770000", "hola", wamid="wamid.E2E1", timestamp=int(time.time()))],
    )
    assert send(dev, "/channels/whatsapp/events", fw.signed(APP_SECRET, doc))[0] == 200
    sent = wait(lambda: [m for m in wa.sent if m.get("to") == "15557770000"], what="the WhatsApp reply")
    assert [m["text"]["body"] for m in sent] == ['You said: "hola"']
    forged = fw.signed("not-the-app-secret", doc)
    assert send(dev, "/channels/whatsapp/events", forged)[0] == 401
