"""Webhook → inbox → consumer on moto: the function-URL route's answers, the rows it writes (and
does not write), the conversation → thread mapping, and the consumer's appends under the lease
(channel_delivery + user_input or steer, consumed_seq in the same transaction, waits, refusals)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from threads_aws.channels.consumer import Consumer, handle_batch
from threads_aws.channels.installations import parse_installations
from threads_aws.channels.secrets import SecretResolver
from threads_aws.channels.webhook import handle
from threads_aws.core.importer import import_log
from threads_aws.store.inbox import Inbox
from threads_aws_dev.fakes import slack as fs
from threads_aws_dev.fakes import whatsapp as fw

NOW_S = 1_790_000_000
SECRET = "slack-signing-secret"
APP_SECRET = "wa-app-secret"


def installs(approvers: tuple[str, ...] = ("U0APPROVER",)) -> Any:
    return parse_installations(
        {
            "installations": [
                {
                    "channel": "slack",
                    "installation_id": "T1",
                    "tenant": "acme",
                    "agent": "demo",
                    "approvers": list(approvers),
                    "secrets": {"signing_secret": {"value": SECRET}, "bot_token": {"value": "xoxb-test"}},
                },
                {
                    "channel": "whatsapp",
                    "installation_id": "111",
                    "tenant": "acme",
                    "agent": "demo",
                    "secrets": {
                        "app_secret": {"value": APP_SECRET},
                        "verify_token": {"value": "vt-1"},
                        "access_token": {"value": "wa-token"},
                    },
                },
            ]
        }
    )


def url_event(method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None, query=None):
    ev: dict[str, Any] = {
        "version": "2.0",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {k.lower(): v for k, v in (headers or {}).items()},
        "requestContext": {"http": {"method": method, "path": path}},
        "body": body.decode(),
        "isBase64Encoded": False,
    }
    if query:
        ev["queryStringParameters"] = query
    return ev


@pytest.fixture
def env(aws):
    aws.clock.now = NOW_S * 1000
    svc = aws.services()
    return aws, svc


def post(svc, signed, provider="slack", channel="slack", **kw):
    return handle(
        url_event("POST", f"/channels/{channel}/events", signed.body, signed.headers),
        provider=provider,
        services=svc,
        installations=kw.get("installations") or installs(),
        resolver=SecretResolver(env={}),
    )


def slack_message(text="hello", ts="1790000000.000100", event_id="Ev1", user="U1", thread_ts=None):
    ev = fs.message_event("C1", user, text, ts, thread_ts=thread_ts)
    doc = fs.event_callback(ev, team_id="T1", event_id=event_id, event_time=NOW_S)
    return fs.signed_json(SECRET, doc, timestamp=NOW_S)


def state_items(aws) -> int:
    n = 0
    for table in (aws.resources.state_table, aws.resources.events_table):
        n += aws.ddb.scan(TableName=table, Select="COUNT")["Count"]
    return n


def queued(aws, url) -> list[dict[str, Any]]:
    out = []
    while True:
        got = aws.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"])
        msgs = got.get("Messages") or []
        if not msgs:
            return out
        for m in msgs:
            out.append(m)
            aws.sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])


def events_of(svc, branch_id) -> list[dict[str, Any]]:
    return import_log(svc.stores.events.export(branch_id)).fold.events


def test_signed_message_is_stored_mapped_and_queued_before_the_ack(env):
    aws, svc = env
    out = post(svc, slack_message())
    assert out["statusCode"] == 200
    rows = Inbox(aws.ddb, aws.resources.state_table).all_rows()
    assert [(r.channel, r.item_key, r.tenant) for r in rows] == [("slack", "C1:1790000000.000100", "acme")]
    row = rows[0]
    assert row.consumed_seq is None and row.item["conversation"] == "C1:1790000000.000100"
    # the thread exists (thread_started of the installation's agent) and is the tenant's
    events = events_of(svc, row.branch_id)
    assert [e["type"] for e in events] == ["thread_started"]
    assert events[0]["data"]["agent_name"] == "demo"
    assert svc.stores.threads.get_thread("acme", row.thread_id) is not None
    assert svc.stores.threads.get_thread("other", row.thread_id) is None
    wake = queued(aws, aws.resources.inbox_queue_url)
    assert len(wake) == 1
    body = json.loads(wake[0]["Body"])
    assert body["thread_id"] == row.thread_id and body["keys"] == [row.pk]
    assert wake[0]["Attributes"]["MessageGroupId"] == row.thread_id


def test_redelivery_three_times_stores_one_row_and_applies_once(env):
    aws, svc = env
    first = slack_message()
    for retry in (None, 1, 2):
        doc = json.loads(first.body)
        signed = fs.signed_json(SECRET, doc, timestamp=NOW_S, retry_num=retry)
        assert post(svc, signed)["statusCode"] == 200
    rows = Inbox(aws.ddb, aws.resources.state_table).all_rows()
    assert len(rows) == 1
    wakes = queued(aws, aws.resources.inbox_queue_url)
    assert len(wakes) == 1  # the same keys: SQS's deduplication id collapses the wake-ups
    consumer = Consumer(svc)
    for _ in range(3):
        consumer.apply_thread(rows[0].thread_id, rows[0].branch_id, [rows[0].pk])
    types = [e["type"] for e in events_of(svc, rows[0].branch_id)]
    assert types == ["thread_started", "channel_delivery", "user_input"]
    steps = queued(aws, aws.resources.run_step_queue_url)
    assert len(steps) == 1 and json.loads(steps[0]["Body"])["branch_id"] == rows[0].branch_id


def test_forged_or_stale_signature_is_401_and_writes_nothing(env):
    aws, svc = env
    before = state_items(aws)
    good = slack_message()
    forged = fs.Signed(body=good.body, headers={**good.headers, "X-Slack-Signature": "v0=" + "0" * 64})
    out = post(svc, forged)
    assert out["statusCode"] == 401 and json.loads(out["body"])["error"]["code"] == "unverified"
    stale = fs.signed_json(SECRET, json.loads(good.body), timestamp=NOW_S - 301)
    assert post(svc, stale)["statusCode"] == 401
    assert state_items(aws) == before
    assert queued(aws, aws.resources.inbox_queue_url) == []


def _deep(levels: int) -> bytes:
    return b'{"team_id":"T1","x":' + b"[" * levels + b"]" * levels + b"}"


@pytest.mark.parametrize(
    "provider, body",
    [
        ("slack", _deep(3_000)),  # Events API JSON, no signature at all
        ("slack", b"payload=" + b"%5B" * 3_000),  # interactivity: a url-encoded form
        ("whatsapp", b'{"object":"whatsapp_business_account","entry":' + b"[" * 5_000 + b"]" * 5_000 + b"}"),
    ],
    ids=["slack-json", "slack-form", "whatsapp"],
)
def test_a_deeply_nested_body_is_401_before_any_parse(env, provider, body):
    aws, svc = env
    before = state_items(aws)
    out = post(svc, fs.Signed(body=body, headers={}), provider=provider, channel=provider)
    err = json.loads(out["body"])["error"]
    assert out["statusCode"] == 401 and err["code"] == "unverified" and "levels" in err["message"]
    assert state_items(aws) == before
    assert queued(aws, aws.resources.inbox_queue_url) == []


def test_a_signed_body_over_the_bounds_is_refused_and_a_normal_one_still_lands(env):
    from threads_aws.channels import bounds

    aws, svc = env
    deep = fs.signed_json(SECRET, json.loads(_deep(bounds.MAX_DEPTH + 1)), timestamp=NOW_S)
    assert post(svc, deep)["statusCode"] == 401
    big = fs.event_callback(
        fs.message_event("C1", "U1", "x" * bounds.MAX_BODY_BYTES, "1790000000.000100"),
        team_id="T1",
        event_id="Ev1",
        event_time=NOW_S,
    )
    out = post(svc, fs.signed_json(SECRET, big, timestamp=NOW_S))
    assert out["statusCode"] == 401 and "bytes" in json.loads(out["body"])["error"]["message"]
    assert Inbox(aws.ddb, aws.resources.state_table).all_rows() == []
    # Within the bounds (a dozen levels, like Slack's rich-text blocks), a signed body lands.
    nested = fs.message_event("C1", "U1", "hello", "1790000000.000100")
    nested["blocks"] = json.loads("[" * 12 + '{"type":"rich_text"}' + "]" * 12)
    doc = fs.event_callback(nested, team_id="T1", event_id="Ev1", event_time=NOW_S)
    assert post(svc, fs.signed_json(SECRET, doc, timestamp=NOW_S))["statusCode"] == 200
    assert len(Inbox(aws.ddb, aws.resources.state_table).all_rows()) == 1


def test_depth_skips_brackets_inside_strings():
    from threads_aws.channels.bounds import depth

    assert depth(b'{"a":"[[[[{{{{\\"x\\"]]"}') == 1
    assert depth(b"[[1],[2,[3]]]") == 3
    assert depth(b"") == 0


def test_unknown_channel_other_provider_and_get_without_challenge_are_404(env):
    aws, svc = env
    assert post(svc, slack_message(), channel="teams")["statusCode"] == 404
    # the Slack function does not serve the WhatsApp channel
    assert post(svc, slack_message(), channel="whatsapp")["statusCode"] == 404
    ev = url_event("GET", "/channels/slack/events")
    out = handle(
        ev, provider="slack", services=svc, installations=installs(), resolver=SecretResolver(env={})
    )
    assert out["statusCode"] == 404 and json.loads(out["body"])["error"]["code"] == "not_found"
    bad_path = url_event("POST", "/channels/slack/other", b"{}")
    assert handle(bad_path, provider="slack", services=svc, installations=installs())["statusCode"] == 404


def test_whatsapp_challenge_and_signed_message(env):
    aws, svc = env
    q = {"hub.mode": "subscribe", "hub.verify_token": "vt-1", "hub.challenge": "12345"}
    ev = url_event("GET", "/channels/whatsapp/events", query=q)
    kw = {
        "provider": "whatsapp",
        "services": svc,
        "installations": installs(),
        "resolver": SecretResolver(env={}),
    }
    out = handle(ev, **kw)
    assert out["statusCode"] == 200 and out["body"] == "12345"
    bad = url_event("GET", "/channels/whatsapp/events", query={**q, "hub.verify_token": "nope"})
    assert handle(bad, **kw)["statusCode"] == 401
    doc = fw.webhook(
        "111", messages=[fw.text_message("15551230000", "hi there", wamid="wamid.1", timestamp=NOW_S)]
    )
    signed = fw.signed(APP_SECRET, doc)
    assert post(svc, signed, provider="whatsapp", channel="whatsapp")["statusCode"] == 200
    rows = Inbox(aws.ddb, aws.resources.state_table).all_rows()
    assert [(r.channel, r.item_key) for r in rows] == [("whatsapp", "wamid.1")]
    Consumer(svc).apply_thread(rows[0].thread_id, rows[0].branch_id, [rows[0].pk])
    evs = events_of(svc, rows[0].branch_id)
    assert [e["type"] for e in evs] == ["thread_started", "channel_delivery", "user_input"]
    delivery, user_input = evs[1], evs[2]
    sender = {"issuer": "whatsapp:111", "subject": "15551230000", "tenant": "acme"}
    assert delivery["actor"] == {"kind": "channel", "principal": sender}
    assert user_input["actor"]["principal"] == sender
    assert user_input["data"] == {
        "source": "channel",
        "text": "hi there",
        "delivery_event_id": delivery["event_id"],
    }
    assert Inbox(aws.ddb, aws.resources.state_table).get(rows[0].pk).consumed_seq == delivery["seq"]
    assert Inbox(aws.ddb, aws.resources.state_table).pending(rows[0].thread_id) == []


def test_same_conversation_same_thread_and_open_turn_gets_steer(env):
    aws, svc = env
    post(svc, slack_message("first", ts="1790000000.000100", event_id="Ev1"))
    # a reply in the thread the first message started: same conversation
    post(svc, slack_message("second", ts="1790000001.000100", event_id="Ev2", thread_ts="1790000000.000100"))
    rows = Inbox(aws.ddb, aws.resources.state_table).all_rows()
    assert len(rows) == 2 and rows[0].thread_id == rows[1].thread_id
    res = Consumer(svc).apply_thread(rows[0].thread_id, rows[0].branch_id)
    assert res.applied == 2
    types = [e["type"] for e in events_of(svc, rows[0].branch_id)]
    # no run step ran between them: the first opened a turn, the second steers it
    assert types == ["thread_started", "channel_delivery", "user_input", "channel_delivery", "steer"]
    # a new top-level message is a new conversation → a new thread
    post(svc, slack_message("other", ts="1790000002.000100", event_id="Ev3"))
    rows = Inbox(aws.ddb, aws.resources.state_table).all_rows()
    assert len({r.thread_id for r in rows}) == 2


def test_busy_branch_leaves_items_queued_then_applies_in_order(env):
    aws, svc = env
    post(svc, slack_message("one", ts="1790000000.000100", event_id="Ev1"))
    row = Inbox(aws.ddb, aws.resources.state_table).all_rows()[0]
    lease = svc.stores.events.acquire_lease(row.branch_id, "worker-x", ttl_ms=60_000, now_ms=aws.clock())
    post(svc, slack_message("two", ts="1790000001.000100", event_id="Ev2", thread_ts="1790000000.000100"))
    wakes = queued(aws, aws.resources.inbox_queue_url)
    records = [
        {
            "messageId": m["MessageId"],
            "receiptHandle": m["ReceiptHandle"],
            "body": m["Body"],
            "attributes": m["Attributes"],
        }
        for m in wakes
    ]
    out = handle_batch({"Records": records}, svc)
    assert len(out["batchItemFailures"]) == 2  # both wait (the second behind the first: order)
    assert len(Inbox(aws.ddb, aws.resources.state_table).pending(row.thread_id)) == 2
    svc.stores.events.release(row.branch_id, lease)
    res = Consumer(svc).apply_thread(row.thread_id, row.branch_id)
    assert res.applied == 2
    evs = events_of(svc, row.branch_id)
    texts = [e["data"].get("text") for e in evs if e["type"] == "channel_delivery"]
    assert texts == ["one", "two"]


def test_final_refusal_consumes_and_appends_nothing(env):
    aws, svc = env
    post(svc, slack_message())
    row = Inbox(aws.ddb, aws.resources.state_table).all_rows()[0]
    svc.stores.events.set_state(row.branch_id, "read_only")
    res = Consumer(svc).apply_thread(row.thread_id, row.branch_id, [row.pk])
    assert res.refused == 1 and res.applied == 0
    assert Inbox(aws.ddb, aws.resources.state_table).get(row.pk).consumed_seq == 0
    assert [e["type"] for e in events_of(svc, row.branch_id)] == ["thread_started"]


def test_a_press_in_a_conversation_without_a_thread_stores_nothing(env):
    aws, svc = env
    payload = fs.block_actions(
        [fs.button_action("01900000-0000-7000-8000-0000000000cc", "grant")],
        team_id="T1",
        user="U0APPROVER",
        channel="C9",
        message_ts="1790000000.000900",
        trigger_id="trig-x",
        thread_ts="1790000000.000900",
    )
    before = state_items(aws)
    assert post(svc, fs.signed_form(SECRET, payload, timestamp=NOW_S))["statusCode"] == 200
    assert state_items(aws) == before
