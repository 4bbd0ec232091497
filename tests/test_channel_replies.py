"""Replies as effects, on moto and the local Slack / WhatsApp Web API fakes: derived from the log
after a run, sent once, and reconciled (never blindly re-sent) after a crash after `effect_begin`
or a lost answer; WhatsApp, which has no lookup, parks on doubt."""

from __future__ import annotations

import json
from typing import Any

import pytest
from threads_aws.channels.consumer import Consumer
from threads_aws.channels.secrets import SecretResolver
from threads_aws.channels.webhook import handle
from threads_aws.core.importer import import_log
from threads_aws.engine import replies
from threads_aws.engine.step import advance
from threads_aws.store.inbox import Inbox
from threads_aws_dev.fakes import slack as fs
from threads_aws_dev.fakes import whatsapp as fw
from threads_aws_dev.fakes.slack import FakeSlack
from threads_aws_dev.fakes.whatsapp import FakeWhatsApp

NOW_S = 1_790_000_000
SECRET = "replies-signing-secret"
APP_SECRET = "replies-app-secret"


class Crash(BaseException):
    """The worker process dying: nothing after it runs (not an Exception the step could catch)."""


@pytest.fixture
def fakes():
    slack = FakeSlack(tokens=["xoxb-r"]).start()
    wa = FakeWhatsApp(tokens=["wa-r"], phone_number_ids=["111"]).start()
    yield slack, wa
    slack.stop()
    wa.stop()


@pytest.fixture
def env(aws, fakes, tmp_path, monkeypatch):
    slack, wa = fakes
    channels = {
        "installations": [
            {
                "channel": "slack",
                "installation_id": "T1",
                "tenant": "acme",
                "agent": "demo",
                "approvers": ["U0APPROVER"],
                "secrets": {"signing_secret": {"value": SECRET}, "bot_token": {"value": "xoxb-r"}},
            },
            {
                "channel": "whatsapp",
                "installation_id": "111",
                "tenant": "acme",
                "agent": "demo",
                "secrets": {
                    "app_secret": {"value": APP_SECRET},
                    "verify_token": {"value": "vt"},
                    "access_token": {"value": "wa-r"},
                },
            },
        ]
    }
    path = tmp_path / "channels.json"
    path.write_text(json.dumps(channels))
    monkeypatch.setenv("CHANNELS_FILE", str(path))
    monkeypatch.setenv("SLACK_API_URL", slack.url)
    monkeypatch.setenv("WHATSAPP_API_URL", wa.url)
    replies.forget_senders()
    aws.clock.now = NOW_S * 1000
    yield aws, aws.services()
    replies.forget_senders()


def deliver(aws, svc, signed, channel="slack") -> Any:
    ev = {
        "version": "2.0",
        "rawPath": f"/channels/{channel}/events",
        "headers": {k.lower(): v for k, v in signed.headers.items()},
        "requestContext": {"http": {"method": "POST", "path": f"/channels/{channel}/events"}},
        "body": signed.body.decode(),
        "isBase64Encoded": False,
    }
    out = handle(ev, provider=channel, services=svc, resolver=SecretResolver(env={}))
    assert out["statusCode"] == 200, out
    row = Inbox(aws.ddb, aws.resources.state_table).all_rows()[-1]
    Consumer(svc).apply_thread(row.thread_id, row.branch_id, [row.pk])
    return row


def slack_message(text: str, ts: str = "1790000000.000100") -> Any:
    ev = fs.message_event("C1", "U1", text, ts)
    return fs.signed_json(
        SECRET, fs.event_callback(ev, team_id="T1", event_id="Ev" + ts, event_time=NOW_S), timestamp=NOW_S
    )


def step(aws, svc, branch_id: str, holder: str = "w1") -> str:
    return advance(svc.engine(), branch_id, holder_id=holder, deadline_ms=aws.clock() + 300_000).state


def types(svc, branch_id: str) -> list[str]:
    return [e["type"] for e in import_log(svc.stores.events.export(branch_id)).fold.events]


def events(svc, branch_id: str) -> list[dict[str, Any]]:
    return import_log(svc.stores.events.export(branch_id)).fold.events


class CrashAfterSend:
    """The real sender, then the process dies before the result is recorded."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def send(self, *a: Any, **kw: Any) -> Any:
        self.real.send(*a, **kw)
        raise Crash

    def lookup(self, *a: Any, **kw: Any) -> Any:
        return self.real.lookup(*a, **kw)


def test_a_run_s_answer_is_sent_once_as_a_host_effect(env, fakes):
    aws, svc = env
    slack, _ = fakes
    row = deliver(aws, svc, slack_message("hi"))
    assert step(aws, svc, row.branch_id) == "idle"
    assert [m["text"] for m in slack.bot_messages("C1")] == ['You said: "hi"']
    evs = events(svc, row.branch_id)
    tail = [e["type"] for e in evs][-5:]
    assert tail == ["tool_call", "permission_decision", "effect_begin", "effect_commit", "tool_result"]
    commit = next(e for e in evs if e["type"] == "effect_commit")
    assert commit["data"]["provider_receipt"].startswith("C1:")
    # another step (a tick) derives the same call, finds it settled, sends nothing
    assert step(aws, svc, row.branch_id) == "idle"
    assert len(slack.bot_messages("C1")) == 1 and len(events(svc, row.branch_id)) == len(evs)


def test_crash_after_effect_begin_is_reconciled_not_resent(env, fakes):
    aws, svc = env
    slack, _ = fakes
    row = deliver(aws, svc, slack_message("crash me"))
    # the sender posts, then the worker dies: effect_begin is durable, nothing after it
    real = replies.Replies.sender_for(None, {"channel": "slack", "installation_id": "T1"})  # type: ignore[arg-type]
    replies._senders[("slack", "T1")] = CrashAfterSend(real)
    with pytest.raises(Crash):
        advance(svc.engine(), row.branch_id, holder_id="w1", deadline_ms=aws.clock() + 300_000)
    assert types(svc, row.branch_id)[-1] == "effect_begin"
    assert len(slack.bot_messages("C1")) == 1
    # recovery: another worker after the dead one's lease lapsed
    replies._senders[("slack", "T1")] = real
    aws.clock.advance(120_000)
    assert step(aws, svc, row.branch_id, holder="w2") == "idle"
    assert len(slack.bot_messages("C1")) == 1  # reconciled, not duplicated
    evs = events(svc, row.branch_id)
    assert [e["type"] for e in evs][-4:] == [
        "effect_begin",
        "effect_unknown",
        "effect_resolved",
        "tool_result",
    ]
    unknown, resolved = evs[-3], evs[-2]
    assert unknown["data"]["reason"] == "crash_after_begin"
    assert resolved["data"]["outcome"] == "confirmed_success" and resolved["data"]["by"] == "reconcile"


def test_a_lost_answer_is_reconciled_by_lookup(env, fakes):
    aws, svc = env
    slack, _ = fakes
    row = deliver(aws, svc, slack_message("lost answer"))
    slack.fail("chat.postMessage", "drop")  # posted, then the connection dropped
    assert step(aws, svc, row.branch_id) == "idle"
    assert len(slack.bot_messages("C1")) == 1
    evs = events(svc, row.branch_id)
    kinds = [e["type"] for e in evs]
    assert kinds[-3:] == ["effect_unknown", "effect_resolved", "tool_result"]
    assert evs[-2]["data"]["outcome"] == "confirmed_success"


def test_not_posted_is_safe_to_retry_and_sent_once(env, fakes):
    aws, svc = env
    slack, _ = fakes
    row = deliver(aws, svc, slack_message("retry me"))
    slack.fail("chat.postMessage", "ratelimited")
    assert step(aws, svc, row.branch_id) == "busy"  # the queue brings it back after a backoff
    assert slack.bot_messages("C1") == []
    assert step(aws, svc, row.branch_id) == "idle"
    assert len(slack.bot_messages("C1")) == 1
    evs = events(svc, row.branch_id)
    begins = [e["data"]["attempt"] for e in evs if e["type"] == "effect_begin"]
    assert begins == [1, 2]
    resolved = next(e for e in evs if e["type"] == "effect_resolved")
    assert resolved["data"] == {
        "by": "adapter",
        "call_id": resolved["data"]["call_id"],
        "outcome": "not_sent",
    }


def test_whatsapp_doubt_parks_for_a_human(env, fakes):
    aws, svc = env
    _, wa = fakes
    doc = fw.webhook(
        "111", messages=[fw.text_message("15550001111", "hola", wamid="wamid.R1", timestamp=NOW_S)]
    )
    row = deliver(aws, svc, fw.signed(APP_SECRET, doc), channel="whatsapp")
    wa.fail("messages", "drop")
    assert step(aws, svc, row.branch_id) == "parked"
    evs = events(svc, row.branch_id)
    assert [e["type"] for e in evs][-2:] == ["effect_unknown", "parked"]
    assert evs[-1]["data"]["address"]["kind"] == "effect"
    # it stays parked: no blind re-send
    assert step(aws, svc, row.branch_id) == "parked"
    assert len(wa.sent) == 1


def test_whatsapp_reply_round_trip(env, fakes):
    aws, svc = env
    _, wa = fakes
    doc = fw.webhook(
        "111", messages=[fw.text_message("15550002222", "hello wa", wamid="wamid.R2", timestamp=NOW_S)]
    )
    row = deliver(aws, svc, fw.signed(APP_SECRET, doc), channel="whatsapp")
    assert step(aws, svc, row.branch_id) == "idle"
    (sent,) = wa.sent
    assert sent["to"] == "15550002222" and sent["text"]["body"] == 'You said: "hello wa"'


def press(challenge_id: str, user: str, trigger: str, decision: str = "grant") -> Any:
    payload = fs.block_actions(
        [fs.button_action(challenge_id, decision)],
        team_id="T1",
        user=user,
        channel="C1",
        message_ts="1790000000.000100",
        trigger_id=trigger,
        thread_ts="1790000000.000100",
    )
    return fs.signed_form(SECRET, payload, timestamp=NOW_S)


def consumed(aws, item_key: str) -> int | None:
    return next(
        r.consumed_seq for r in Inbox(aws.ddb, aws.resources.state_table).all_rows() if r.item_key == item_key
    )


def test_decisions_jump_ahead_need_authority_and_apply_once(env, fakes):
    aws, svc = env
    slack, _ = fakes
    row = deliver(aws, svc, slack_message("note: buy milk"))
    assert step(aws, svc, row.branch_id) == "parked"
    (prompt,) = [m for m in slack.bot_messages("C1") if m.get("blocks")]
    challenge_id = next(b for b in prompt["blocks"] if b["type"] == "actions")["elements"][0]["value"]
    # a message while parked waits (the branch can't take it yet)
    follow = fs.message_event("C1", "U1", "and eggs", "1790000005.000100", thread_ts="1790000000.000100")
    doc = fs.event_callback(follow, team_id="T1", event_id="EvF", event_time=NOW_S)
    deliver(aws, svc, fs.signed_json(SECRET, doc, timestamp=NOW_S))
    assert consumed(aws, "C1:1790000005.000100") is None
    before = len(events(svc, row.branch_id))
    # a press by someone not in the installation's approvers: consumed, nothing appended
    deliver(aws, svc, press(challenge_id, "U1", "trig-a"))
    assert consumed(aws, "trig-a#0") == 0 and len(events(svc, row.branch_id)) == before
    # the approver's press jumps ahead of the waiting message and decides once
    deliver(aws, svc, press(challenge_id, "U0APPROVER", "trig-b"))
    evs = events(svc, row.branch_id)
    granted = next(e for e in evs if e["type"] == "approval_granted")
    assert consumed(aws, "trig-b#0") == granted["seq"]
    assert [e["type"] for e in evs[granted["seq"] - 1 :]][:2] == ["approval_granted", "resumed"]
    # a second press (or a late deny) of the answered challenge: consumed, nothing appended
    deliver(aws, svc, press(challenge_id, "U0APPROVER", "trig-c", "deny"))
    assert consumed(aws, "trig-c#0") == 0
    assert (
        sum(
            e["type"].startswith("approval_") and e["type"] != "approval_requested"
            for e in events(svc, row.branch_id)
        )
        == 1
    )
    # the waiting message goes in now that the branch is no longer parked (a steer: the turn is open)
    Consumer(svc).apply_thread(row.thread_id, row.branch_id)
    seq = consumed(aws, "C1:1790000005.000100")
    assert seq and events(svc, row.branch_id)[seq]["type"] == "steer"
    # the run completes and the answer is posted
    assert step(aws, svc, row.branch_id) == "idle"
    assert any(m["text"].startswith("Done") for m in slack.bot_messages("C1"))


@pytest.mark.parametrize("crash", [False, True])
def test_an_expired_approval_notifies_the_channel_once(env, fakes, crash):
    """park_escalated (engine.parks) is a reply source: the approvers' conversation gets one
    notice, sent as a host effect; a worker dying right after the send is reconciled."""
    aws, svc = env
    slack, _ = fakes
    row = deliver(aws, svc, slack_message("note: buy milk"))
    assert step(aws, svc, row.branch_id) == "parked"
    sent = len(slack.bot_messages("C1"))
    aws.clock.advance(24 * 3_600_000)
    if crash:
        real = replies.Replies.sender_for(None, {"channel": "slack", "installation_id": "T1"})  # type: ignore[arg-type]
        replies._senders[("slack", "T1")] = CrashAfterSend(real)
        with pytest.raises(Crash):
            step(aws, svc, row.branch_id)
        replies._senders[("slack", "T1")] = real
        aws.clock.advance(120_000)  # the dead worker's lease lapses
    assert step(aws, svc, row.branch_id, holder="w2") == "parked"
    assert step(aws, svc, row.branch_id, holder="w3") == "parked"
    notices = slack.bot_messages("C1")[sent:]
    notice = "Approval for note expired unanswered: a decision now counts as a denial."
    assert [m["text"] for m in notices] == [notice]
    evs = events(svc, row.branch_id)
    assert [e["type"] for e in evs].count("park_escalated") == 1
    esc = next(e for e in evs if e["type"] == "park_escalated")
    call = next(e for e in evs if e["type"] == "tool_call" and e["data"]["call_id"] == f"send_{esc['seq']}_0")
    assert call["data"]["request_event_id"] == esc["event_id"]
    assert [e["type"] for e in evs][-1] == "tool_result"
