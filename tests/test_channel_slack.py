"""Slack webhook adapter: signature vectors, url_verification, and parsing of Events API and
interactivity deliveries into inbox items (pure; no AWS)."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest
from threads_aws.channels import adapter_for
from threads_aws.channels.errors import NoChallenge, Unverified
from threads_aws.channels.model import ChannelSecrets, Decision, InboxItem, WebhookRequest
from threads_aws.channels.slack import SlackAdapter, signature
from threads_aws_dev.fakes import slack as fs

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
NOW_S = 1_790_000_000
NOW_MS = NOW_S * 1000
TEAM = "T024BE7LD"
SECRETS = ChannelSecrets(signing_secret=SECRET)

# Slack's published example (api.slack.com/authentication/verifying-requests-from-slack).
DOC_BODY = (
    b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V"
    b"&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text="
    b"&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN"
    b"&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
)
DOC_TS = "1531420618"
DOC_SIG = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"


def _msg(text: str = "hello", ts: str = "1790000000.000100", **kw) -> dict:
    return fs.event_callback(
        fs.message_event("C1", "U1", text, ts, **kw), team_id=TEAM, event_id="Ev09", event_time=NOW_S
    )


def _req(doc: dict, *, timestamp: int = NOW_S, retry_num: int | None = None) -> WebhookRequest:
    return fs.signed_json(SECRET, doc, timestamp=timestamp, retry_num=retry_num).request()


# -- verify --------------------------------------------------------------------------------------


def test_signature_matches_slacks_published_example():
    assert signature(SECRET, DOC_TS, DOC_BODY) == DOC_SIG
    req = WebhookRequest(
        "POST", DOC_BODY, {"X-Slack-Request-Timestamp": DOC_TS, "X-Slack-Signature": DOC_SIG}
    )
    SlackAdapter().verify(req, SECRETS, int(DOC_TS) * 1000 + 5_000)


def test_signature_agrees_with_slack_sdk():
    from slack_sdk.signature import SignatureVerifier

    class Clock:
        def now(self) -> float:
            return float(NOW_S)

    req = _req(_msg("héllo ✓"))
    theirs = SignatureVerifier(SECRET, clock=Clock())
    assert theirs.is_valid(req.body, req.header("X-Slack-Request-Timestamp"), req.header("X-Slack-Signature"))
    SlackAdapter().verify(req, SECRETS, NOW_MS)


def test_valid_request_verifies_with_lowercase_headers():
    req = _req(_msg())
    lower = WebhookRequest("POST", req.body, {k.lower(): v for k, v in req.headers.items()})
    SlackAdapter().verify(lower, SECRETS, NOW_MS)


@pytest.mark.parametrize(
    "mutate, why",
    [
        (lambda b, h: (b, {**h, "X-Slack-Signature": "v0=" + "0" * 64}), "forged"),
        (lambda b, h: (b[:-2] + bytes([b[-2] ^ 1]) + b[-1:], h), "body altered by one byte"),
        (lambda b, h: (b + b" ", h), "byte appended"),
        (lambda b, h: (b, {k: v for k, v in h.items() if k != "X-Slack-Signature"}), "no signature"),
        (lambda b, h: (b, {k: v for k, v in h.items() if k != "X-Slack-Request-Timestamp"}), "no timestamp"),
        (lambda b, h: (b, {**h, "X-Slack-Request-Timestamp": "17900000O0"}), "non-numeric timestamp"),
        (lambda b, h: (b, {**h, "X-Slack-Signature": "v0=ü"}), "non-ascii signature"),
    ],
)
def test_forgeries_are_unverified(mutate, why):
    req = _req(_msg())
    body, headers = mutate(req.body, dict(req.headers))
    with pytest.raises(Unverified):
        SlackAdapter().verify(WebhookRequest("POST", body, headers), SECRETS, NOW_MS)


def test_wrong_secret_is_unverified():
    with pytest.raises(Unverified):
        SlackAdapter().verify(_req(_msg()), ChannelSecrets(signing_secret="other-secret"), NOW_MS)
    with pytest.raises(Unverified):
        SlackAdapter().verify(_req(_msg()), ChannelSecrets(), NOW_MS)


def test_replay_window_is_five_minutes_either_side():
    a = SlackAdapter()
    for skew in (-300, 0, 300):
        a.verify(_req(_msg(), timestamp=NOW_S + skew), SECRETS, NOW_MS)
    for skew in (-301, 301, -86_400):
        with pytest.raises(Unverified, match="5-minute"):
            a.verify(_req(_msg(), timestamp=NOW_S + skew), SECRETS, NOW_MS)


def test_a_resigned_stale_body_with_fresh_timestamp_needs_the_secret():
    """Replaying an old body under a fresh timestamp fails: the timestamp is signed."""
    old = _req(_msg(), timestamp=NOW_S - 3600)
    replay = WebhookRequest("POST", old.body, {**old.headers, "X-Slack-Request-Timestamp": str(NOW_S)})
    with pytest.raises(Unverified, match="does not match"):
        SlackAdapter().verify(replay, SECRETS, NOW_MS)


# -- url_verification / GET ----------------------------------------------------------------------


def test_url_verification_echoes_challenge_and_yields_no_items():
    a = SlackAdapter()
    req = _req(fs.url_verification("3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"))
    assert a.claimed_installations(req) == ()
    a.verify(req, SECRETS, NOW_MS)
    d = a.parse(req)
    assert d.items == () and d.echo == "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
    ack = a.ack(d)
    assert ack.status == 200 and ack.body == d.echo.encode()
    assert ack.headers["content-type"] == "text/plain"


def test_slack_has_no_get_challenge():
    with pytest.raises(NoChallenge):
        SlackAdapter().challenge(WebhookRequest("GET", query={"hub.challenge": "x"}), SECRETS)


# -- parse: messages -----------------------------------------------------------------------------


def test_channel_message_becomes_one_item_in_its_own_thread():
    a = adapter_for("slack")
    req = _req(_msg("hello there"))
    assert a.claimed_installations(req) == (TEAM,)
    d = a.parse(req)
    assert d.delivery_id == "Ev09" and d.installation_ids == (TEAM,)
    assert d.items == (
        InboxItem(
            installation_id=TEAM,
            delivery_id="Ev09",
            item_key="C1:1790000000.000100",
            conversation="C1:1790000000.000100",
            sender="U1",
            kind="message",
            text="hello there",
            sent_at_ms=1_790_000_000_000,
        ),
    )
    assert a.ack(d).status == 200 and a.ack(d).body == b""


def test_thread_reply_maps_to_the_thread_and_dm_to_the_channel():
    a = SlackAdapter()
    reply = a.parse(_req(_msg("more", ts="1790000005.000200", thread_ts="1790000000.000100")))
    assert reply.items[0].conversation == "C1:1790000000.000100"
    assert reply.items[0].item_key == "C1:1790000005.000200"
    dm_ev = fs.message_event("D1", "U1", "hi", "1790000001.000001", channel_type="im")
    dm = a.parse(_req(fs.event_callback(dm_ev, team_id=TEAM, event_id="Ev10", event_time=NOW_S)))
    assert dm.items[0].conversation == "D1"


def test_app_mention_is_a_message_keyed_like_the_message_event():
    a = SlackAdapter()
    ev = fs.message_event("C1", "U1", "<@U0BOT> hi", "1790000000.000100", kind="app_mention")
    mention = a.parse(_req(fs.event_callback(ev, team_id=TEAM, event_id="EvM", event_time=NOW_S)))
    plain = a.parse(_req(_msg("<@U0BOT> hi")))
    assert mention.items[0].kind == "message"
    # Slack delivers one message twice (app_mention + message.channels, two event_ids): one key.
    assert mention.items[0].item_key == plain.items[0].item_key
    assert mention.delivery_id != plain.delivery_id


def test_redeliveries_parse_to_the_same_item_key():
    a = SlackAdapter()
    first = a.parse(_req(_msg()))
    for n in (1, 2, 3):
        again = _req(_msg(), timestamp=NOW_S + 60 * n, retry_num=n)
        a.verify(again, SECRETS, NOW_MS + 60_000 * n)
        assert a.parse(again).items == first.items


@pytest.mark.parametrize(
    "kw, why",
    [
        ({"bot_id": "B0BOT"}, "bot message"),
        ({"subtype": "bot_message"}, "bot message"),
        ({"subtype": "message_changed"}, "subtype"),
        ({"subtype": "message_deleted"}, "subtype"),
        ({"subtype": "channel_join"}, "subtype"),
    ],
)
def test_bot_messages_and_edits_are_ignored(kw, why):
    d = SlackAdapter().parse(_req(_msg(**kw)))
    assert d.items == () and why in d.ignored[0]


def test_our_own_user_is_ignored_and_kept_subtypes_are_messages():
    a = SlackAdapter()
    ev = fs.message_event("C1", "U0BOT", "echo", "1790000000.000300")
    own = a.parse(_req(fs.event_callback(ev, team_id=TEAM, event_id="Ev11", event_time=NOW_S)))
    assert own.items == () and own.ignored == ("our own message",)
    for sub in ("thread_broadcast", "file_share"):
        assert a.parse(_req(_msg(subtype=sub))).items[0].text == "hello"


def test_other_events_and_garbage_produce_no_items():
    a = SlackAdapter()
    ev = {"type": "reaction_added", "user": "U1", "reaction": "+1"}
    assert a.parse(_req(fs.event_callback(ev, team_id=TEAM, event_id="Ev12", event_time=NOW_S))).items == ()
    assert a.parse(WebhookRequest("POST", b"\xff\xfe")).ignored == ("unparseable body",)
    assert a.parse(WebhookRequest("POST", b"[1,2]")).items == ()
    assert a.claimed_installations(WebhookRequest("POST", b"not json")) == ()


def test_enterprise_install_uses_the_enterprise_id():
    ev = fs.message_event("C1", "U1", "hi", "1790000000.000100")
    doc = fs.event_callback(ev, team_id=TEAM, event_id="Ev13", event_time=NOW_S, enterprise_id="E0ORG")
    a = SlackAdapter()
    assert a.claimed_installations(_req(doc)) == ("E0ORG",)
    assert a.parse(_req(doc)).items[0].installation_id == "E0ORG"


# -- parse: interactivity ------------------------------------------------------------------------


def _press(
    decision: str = "grant", *, thread_ts: str | None = "1790000000.000100", actions=None
) -> WebhookRequest:
    payload = fs.block_actions(
        actions or [fs.button_action("ch_123", decision)],
        team_id=TEAM,
        user="U0APPROVER",
        channel="C1",
        message_ts="1790000010.000500",
        trigger_id="13345224609.738474920.8088930838d88f008e0",
        thread_ts=thread_ts,
    )
    return fs.signed_form(SECRET, payload, timestamp=NOW_S).request()


def test_block_actions_press_becomes_a_decision_in_the_conversation():
    a = SlackAdapter()
    req = _press("grant")
    assert req.body.startswith(b"payload=")
    a.verify(req, SECRETS, NOW_MS)  # signed over the form bytes, not the decoded JSON
    assert a.claimed_installations(req) == (TEAM,)
    d = a.parse(req)
    (item,) = d.items
    assert item.kind == "decision" and item.decision == Decision("ch_123", "grant")
    assert item.sender == "U0APPROVER"
    assert item.conversation == "C1:1790000000.000100"  # the thread the prompt was posted in
    assert item.item_key == "13345224609.738474920.8088930838d88f008e0#0"
    assert item.reply_to == "1790000010.000500" and item.text is None
    assert a.ack(d).status == 200 and a.ack(d).body == b""
    assert a.parse(_press("deny")).items[0].decision == Decision("ch_123", "deny")


def test_press_in_a_dm_maps_to_the_dm_conversation():
    assert SlackAdapter().parse(_press(thread_ts=None)).items[0].conversation == "C1"


def test_foreign_buttons_are_not_decisions():
    other = {"type": "button", "action_id": "approve", "value": "ch_123", "action_ts": "1790000000.1"}
    empty = dict(fs.button_action("", "grant"))
    d = SlackAdapter().parse(_press(actions=[other, empty, fs.button_action("ch_9", "deny")]))
    assert [i.decision for i in d.items] == [Decision("ch_9", "deny")]
    assert d.items[0].item_key.endswith("#2")
    assert len(d.ignored) == 2


def test_form_body_that_is_altered_after_signing_is_unverified():
    req = _press()
    tampered = urlencode({"payload": json.dumps({"type": "block_actions"})}).encode()
    with pytest.raises(Unverified):
        SlackAdapter().verify(WebhookRequest("POST", tampered, req.headers), SECRETS, NOW_MS)


def test_free_text_is_never_a_decision():
    d = SlackAdapter().parse(_req(_msg("threads_grant ch_123")))
    assert d.items[0].kind == "message" and d.items[0].decision is None


def test_inbox_item_json_round_trip_and_delivery_data():
    item = SlackAdapter().parse(_req(_msg())).items[0]
    assert InboxItem.from_dict(json.loads(json.dumps(item.as_dict()))) == item
    press = SlackAdapter().parse(_press()).items[0]
    assert InboxItem.from_dict(json.loads(json.dumps(press.as_dict()))) == press
    assert item.channel_delivery_data("slack") == {
        "channel": "slack",
        "installation": TEAM,
        "conversation": "C1:1790000000.000100",
        "delivery_id": "Ev09",
        "item_key": "C1:1790000000.000100",
        "text": "hello",
    }
    with pytest.raises(ValueError):
        press.channel_delivery_data("slack")


def test_channel_delivery_data_is_a_valid_event():
    from threads_aws.core._validators import EVENT_VALIDATORS
    from threads_aws.core.canonical import new_uuid7

    item = SlackAdapter().parse(_req(_msg())).items[0]
    event = {
        "seq": 1,
        "thread_id": new_uuid7(),
        "branch_id": new_uuid7(),
        "epoch": 1,
        "event_id": new_uuid7(),
        "time": NOW_MS,
        "prev_hash": "0" * 64,
        "type": "channel_delivery",
        "type_version": 1,
        "critical": True,
        "actor": {
            "kind": "channel",
            "principal": {"issuer": f"slack:{TEAM}", "tenant": "acme", "subject": "U1"},
        },
        "data": item.channel_delivery_data("slack"),
    }
    EVENT_VALIDATORS["channel_delivery"](event)  # raises SchemaError on any mismatch
    with pytest.raises(Exception, match="item_key"):
        EVENT_VALIDATORS["channel_delivery"]({**event, "data": {**event["data"], "item_key": ""}})
