"""WhatsApp Cloud API webhook adapter: X-Hub-Signature-256 vectors, the GET subscription
challenge, and parsing of messages, button replies and statuses (pure; no AWS)."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest
from threads_aws.channels import adapter_for
from threads_aws.channels.errors import Unverified
from threads_aws.channels.model import ChannelSecrets, Decision, InboxItem, StatusReport, WebhookRequest
from threads_aws.channels.replies import whatsapp_button_id
from threads_aws.channels.whatsapp import WhatsAppAdapter, signature
from threads_aws_dev.fakes import whatsapp as fw

APP_SECRET = "0123456789abcdef0123456789abcdef"
PNID = "106540352242922"
USER = "16505551234"
SECRETS = ChannelSecrets(app_secret=APP_SECRET, verify_token="vt-s3cret")
NOW_MS = 1_790_000_000_000


def _hook(*messages, statuses=(), pnid=PNID):
    return fw.webhook(pnid, messages=list(messages), statuses=list(statuses))


def _req(doc) -> WebhookRequest:
    return fw.signed(APP_SECRET, doc).request()


def _text(text="hi", wamid="wamid.HBgLMTY1MDU1NTEyMzQVAgASGBQzQTdCNTg5", ts=1_790_000_000):
    return fw.text_message(USER, text, wamid=wamid, timestamp=ts)


# -- verify --------------------------------------------------------------------------------------


def test_signature_is_hmac_sha256_of_the_raw_body():
    body = b'{"object":"whatsapp_business_account","entry":[]}'
    expected = "sha256=" + hmac.new(APP_SECRET.encode(), body, hashlib.sha256).hexdigest()
    assert signature(APP_SECRET, body) == expected
    # the well-known HMAC-SHA256 example vector (key "key", "The quick brown fox…")
    assert signature("key", b"The quick brown fox jumps over the lazy dog") == (
        "sha256=f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8"
    )


def test_valid_signature_verifies_any_header_case():
    req = _req(_hook(_text()))
    a = WhatsAppAdapter()
    a.verify(req, SECRETS, NOW_MS)
    upper = WebhookRequest(
        "POST", req.body, {"x-hub-signature-256": req.header("X-Hub-Signature-256").upper()}
    )
    a.verify(upper, SECRETS, NOW_MS)  # hex case does not matter


def test_escaped_unicode_body_is_verified_as_bytes():
    req = _req(_hook(_text("olá ✓")))
    assert b"\\u2713" in req.body  # Meta's escaped form: re-serialising would change the bytes
    WhatsAppAdapter().verify(req, SECRETS, NOW_MS)
    reserialised = json.dumps(json.loads(req.body), ensure_ascii=False, separators=(",", ":")).encode()
    with pytest.raises(Unverified):
        WhatsAppAdapter().verify(WebhookRequest("POST", reserialised, req.headers), SECRETS, NOW_MS)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda b, h: (b, {"X-Hub-Signature-256": "sha256=" + "0" * 64}),
        lambda b, h: (b.replace(b'"hi"', b'"hI"'), h),
        lambda b, h: (b + b"\n", h),
        lambda b, h: (b, {}),
        lambda b, h: (b, {"X-Hub-Signature-256": h["X-Hub-Signature-256"].removeprefix("sha256=")}),
        lambda b, h: (b, {"X-Hub-Signature": "sha1=" + "0" * 40}),
    ],
)
def test_forgeries_are_unverified(mutate):
    req = _req(_hook(_text()))
    body, headers = mutate(req.body, dict(req.headers))
    with pytest.raises(Unverified):
        WhatsAppAdapter().verify(WebhookRequest("POST", body, headers), SECRETS, NOW_MS)


def test_wrong_or_missing_app_secret_is_unverified():
    req = _req(_hook(_text()))
    with pytest.raises(Unverified):
        WhatsAppAdapter().verify(req, ChannelSecrets(app_secret="nope"), NOW_MS)
    with pytest.raises(Unverified):
        WhatsAppAdapter().verify(req, ChannelSecrets(verify_token="vt"), NOW_MS)


# -- GET challenge -------------------------------------------------------------------------------


def test_get_challenge_echoes_hub_challenge_as_plain_text():
    res = WhatsAppAdapter().challenge(fw.challenge_request("vt-s3cret", "1158201444").request(), SECRETS)
    assert res.status == 200 and res.body == b"1158201444" and res.headers["content-type"] == "text/plain"


@pytest.mark.parametrize(
    "query",
    [
        {"hub.mode": "subscribe", "hub.verify_token": "wrong", "hub.challenge": "1"},
        {"hub.mode": "unsubscribe", "hub.verify_token": "vt-s3cret", "hub.challenge": "1"},
        {"hub.mode": "subscribe", "hub.verify_token": "vt-s3cret"},
        {"hub.mode": "subscribe", "hub.challenge": "1"},
        {},
    ],
)
def test_get_challenge_refusals_are_unverified(query):
    with pytest.raises(Unverified):
        WhatsAppAdapter().challenge(WebhookRequest("GET", query=query), SECRETS)
    with pytest.raises(Unverified):  # no verify token configured: nothing matches
        WhatsAppAdapter().challenge(WebhookRequest("GET", query=query), ChannelSecrets())


# -- parse ---------------------------------------------------------------------------------------


def test_text_message_becomes_one_item_keyed_by_wamid():
    a = adapter_for("whatsapp")
    req = _req(_hook(_text("hello")))
    assert a.claimed_installations(req) == (PNID,)
    d = a.parse(req)
    assert d.delivery_id == "sha256:" + hashlib.sha256(req.body).hexdigest()
    assert d.items == (
        InboxItem(
            installation_id=PNID,
            delivery_id=d.delivery_id,
            item_key="wamid.HBgLMTY1MDU1NTEyMzQVAgASGBQzQTdCNTg5",
            conversation=USER,
            sender=USER,
            kind="message",
            text="hello",
            sent_at_ms=1_790_000_000_000,
        ),
    )
    assert a.ack(d).status == 200


def test_batch_of_messages_keeps_order_and_a_redelivery_keeps_keys():
    doc = _hook(_text("one", wamid="wamid.A"), _text("two", wamid="wamid.B"))
    a = WhatsAppAdapter()
    first = a.parse(_req(doc))
    assert [(i.item_key, i.text) for i in first.items] == [("wamid.A", "one"), ("wamid.B", "two")]
    # Meta may re-batch a redelivery: the keys come from the messages, not the batch.
    again = a.parse(_req(_hook(_text("two", wamid="wamid.B"))))
    assert again.items[0].item_key == "wamid.B" and again.delivery_id != first.delivery_id


def test_message_without_id_is_keyed_by_delivery_and_index():
    m = _text("x")
    del m["id"]
    d = WhatsAppAdapter().parse(_req(_hook(_text("a", wamid="wamid.A"), m)))
    assert d.items[1].item_key == f"{d.delivery_id}#1"


def test_our_button_reply_is_a_decision():
    press = fw.button_reply(
        USER,
        whatsapp_button_id("grant", "ch_42"),
        "Approve",
        wamid="wamid.P",
        timestamp=1,
        context_id="wamid.OURS",
    )
    (item,) = WhatsAppAdapter().parse(_req(_hook(press))).items
    assert item.kind == "decision" and item.decision == Decision("ch_42", "grant")
    assert item.text is None and item.reply_to == "wamid.OURS" and item.conversation == USER
    deny = fw.button_reply(USER, whatsapp_button_id("deny", "ch_42"), "Deny", wamid="wamid.Q", timestamp=1)
    assert WhatsAppAdapter().parse(_req(_hook(deny))).items[0].decision == Decision("ch_42", "deny")


@pytest.mark.parametrize(
    "button_id", ["approve:run42", "threads:maybe:ch_1", "threads:grant:", "threads:grant"]
)
def test_foreign_button_replies_are_messages_of_their_title(button_id):
    press = fw.button_reply(USER, button_id, "Approve", wamid="wamid.F", timestamp=1)
    (item,) = WhatsAppAdapter().parse(_req(_hook(press))).items
    assert item.kind == "message" and item.text == "Approve" and item.decision is None


def test_free_text_naming_a_button_id_is_never_a_decision():
    (item,) = WhatsAppAdapter().parse(_req(_hook(_text(whatsapp_button_id("grant", "ch_42"))))).items
    assert item.kind == "message" and item.decision is None


def test_template_quick_reply_is_a_message():
    m = {
        "from": USER,
        "id": "wamid.T",
        "timestamp": "1",
        "type": "button",
        "button": {"payload": "p", "text": "Yes"},
    }
    assert WhatsAppAdapter().parse(_req(_hook(m))).items[0].text == "Yes"


def test_statuses_produce_no_items_but_report_our_call_id():
    s1 = fw.status("wamid.OUT", "delivered", recipient=USER, timestamp=2, call_id="send_12_0")
    s2 = fw.status("wamid.OUT2", "failed", recipient=USER, timestamp=3, error_code=131047)
    d = WhatsAppAdapter().parse(_req(_hook(statuses=[s1, s2])))
    assert d.items == ()
    assert d.statuses == (
        StatusReport(PNID, "wamid.OUT", "delivered", call_id="send_12_0"),
        StatusReport(PNID, "wamid.OUT2", "failed", error_code=131047),
    )


def test_media_reactions_and_system_messages_are_ignored():
    image = {"from": USER, "id": "wamid.I", "timestamp": "1", "type": "image", "image": {"id": "m1"}}
    reaction = {
        "from": USER,
        "id": "wamid.R",
        "timestamp": "1",
        "type": "reaction",
        "reaction": {"emoji": "👍"},
    }
    d = WhatsAppAdapter().parse(_req(_hook(image, reaction, _text("kept", wamid="wamid.K"))))
    assert [i.item_key for i in d.items] == ["wamid.K"] and len(d.ignored) == 2


def test_username_user_without_phone_is_keyed_by_bsuid():
    m = {
        "id": "wamid.U",
        "timestamp": "1",
        "type": "text",
        "text": {"body": "hi"},
        "user_id": "US.13491208655302741918",
    }
    d = WhatsAppAdapter().parse(_req(_hook(m)))
    assert d.items[0].sender == "US.13491208655302741918" == d.items[0].conversation


def test_multi_entry_batch_names_each_installation():
    doc = _hook(_text("a", wamid="wamid.A"))
    doc["entry"].append(_hook(_text("b", wamid="wamid.B"), pnid="999")["entry"][0])
    a = WhatsAppAdapter()
    assert a.claimed_installations(_req(doc)) == (PNID, "999")
    assert [(i.installation_id, i.item_key) for i in a.parse(_req(doc)).items] == [
        (PNID, "wamid.A"),
        ("999", "wamid.B"),
    ]


def test_other_objects_and_garbage_produce_no_items():
    a = WhatsAppAdapter()
    assert a.parse(_req({"object": "page", "entry": []})).items == ()
    assert a.parse(WebhookRequest("POST", b"{")).ignored == ("unparseable body",)
    assert a.claimed_installations(WebhookRequest("POST", b"[]")) == ()
