"""Reply senders against local HTTP fakes of the Slack Web API and the WhatsApp Cloud API:
text and approval prompts, the metadata lookup that reconciles a begun Slack send, and the
classification of every failure (retryable / rejected / outcome unknown)."""

from __future__ import annotations

import socket

import pytest
from threads_aws.channels import sender_for
from threads_aws.channels.errors import SendOutcomeUnknown, SendRejected, SendRetryable
from threads_aws.channels.installations import Installation
from threads_aws.channels.model import ChannelSecrets
from threads_aws.channels.replies import approval_op, reply_ops, split_text
from threads_aws.channels.slack_api import SlackSender
from threads_aws.channels.whatsapp_api import WhatsAppSender, within_service_window
from threads_aws_dev.fakes.slack import DEFAULT_TOKEN, FakeSlack
from threads_aws_dev.fakes.whatsapp import DEFAULT_PHONE_NUMBER_ID, FakeWhatsApp
from threads_aws_dev.fakes.whatsapp import DEFAULT_TOKEN as WA_TOKEN

CALL = "send_12_0"


@pytest.fixture
def slack():
    fake = FakeSlack()
    fake.hang_s = 1.0
    with fake:
        yield fake


@pytest.fixture
def wa():
    fake = FakeWhatsApp()
    fake.hang_s = 1.0
    with fake:
        yield fake


def _slack(fake: FakeSlack, **kw) -> SlackSender:
    return SlackSender(DEFAULT_TOKEN, base_url=fake.url, timeout_s=kw.pop("timeout_s", 0.3), **kw)


def _wa(fake: FakeWhatsApp, **kw) -> WhatsAppSender:
    return WhatsAppSender(WA_TOKEN, DEFAULT_PHONE_NUMBER_ID, base_url=fake.url, timeout_s=0.3, **kw)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- reply ops (pure) ----------------------------------------------------------------------------


def test_reply_ops_are_deterministic_and_within_limits():
    text = ("word " * 400 + "\n\n") * 6  # ~12,000 chars
    ops = reply_ops("slack", text)
    assert ops == reply_ops("slack", text)
    assert len(ops) > 1 and all(len(o["text"]) <= 3_900 for o in ops)
    assert "".join(o["text"] for o in ops) == text
    assert reply_ops("whatsapp", "short") == [{"kind": "text", "text": "short"}]
    assert reply_ops("slack", "") == [{"kind": "text", "text": ""}]
    assert split_text("x" * 10, 4) == ["xxxx", "xxxx", "xx"]  # no break point: hard cut


def test_approval_op_is_cut_to_the_provider_prompt_limit():
    op = approval_op("whatsapp", "ch_1", "note", "x" * 5000)
    assert op["kind"] == "approval" and op["challenge_id"] == "ch_1" and len(op["text"]) == 1024
    assert approval_op("slack", "ch_1", "note", "buy milk")["text"] == "Approval needed: note\nbuy milk"


# -- Slack ---------------------------------------------------------------------------------------


def test_slack_text_reply_goes_to_the_thread_with_our_metadata(slack):
    receipt = _slack(slack).send("C1:1790000000.000100", {"kind": "text", "text": "Done."}, call_id=CALL)
    (posted,) = slack.posted
    assert posted["channel"] == "C1" and posted["thread_ts"] == "1790000000.000100"
    assert posted["text"] == "Done."
    assert posted["metadata"] == {"event_type": "threads_channel_send", "event_payload": {"call_id": CALL}}
    (msg,) = slack.bot_messages("C1")
    assert receipt.message_id == msg["ts"] and receipt.provider_receipt == f"C1:{msg['ts']}"
    req = slack.requests[-1]
    assert req.headers["authorization"] == f"Bearer {DEFAULT_TOKEN}"
    assert req.headers["content-type"].startswith("application/json")


def test_slack_top_level_conversation_posts_without_thread(slack):
    _slack(slack).send("D1", {"kind": "text", "text": "hi"}, call_id=CALL)
    assert "thread_ts" not in slack.posted[0]


def test_slack_approval_prompt_has_buttons_carrying_the_challenge(slack):
    op = approval_op("slack", "ch_777", "note", "buy milk")
    _slack(slack).send("C1:1790000000.000100", op, call_id="send_9_0")
    (posted,) = slack.posted
    section, actions = posted["blocks"]
    assert section["text"]["text"] == op["text"] and posted["text"] == op["text"]
    assert [(e["action_id"], e["value"], e["style"]) for e in actions["elements"]] == [
        ("threads_grant", "ch_777", "primary"),
        ("threads_deny", "ch_777", "danger"),
    ]


def test_slack_lookup_finds_a_begun_send_by_metadata(slack):
    parent = slack.add_message("C1", "hello")
    conv = f"C1:{parent['ts']}"
    sender = _slack(slack)
    sender.send(conv, {"kind": "text", "text": "other"}, call_id="send_1_0")
    receipt = sender.send(conv, {"kind": "text", "text": "mine"}, call_id=CALL)
    found = sender.lookup(conv, call_id=CALL, since_ms=1_000)
    assert found.outcome == "found" and found.receipt == receipt
    assert sender.lookup(conv, call_id="send_99_0", since_ms=1_000).outcome == "not_found"
    last = slack.requests[-1]
    assert last.path == "/api/conversations.replies" and last.form()["include_all_metadata"] == "true"


def test_slack_lookup_of_top_level_conversation_uses_history(slack):
    sender = _slack(slack)
    receipt = sender.send("D1", {"kind": "text", "text": "x"}, call_id=CALL)
    assert sender.lookup("D1", call_id=CALL, since_ms=1_000).receipt == receipt
    assert slack.requests[-1].path == "/api/conversations.history"


def test_slack_lookup_pages_and_gives_up_as_unknown(slack):
    slack.history_limit_cap = 2  # a Tier-1-limited app sees small pages
    sender = _slack(slack, lookup_pages=2)
    mine = sender.send("D1", {"kind": "text", "text": "mine"}, call_id=CALL)
    for i in range(5):  # newer messages push ours onto a later page
        sender.send("D1", {"kind": "text", "text": f"n{i}"}, call_id=f"send_2_{i}")
    assert sender.lookup("D1", call_id=CALL, since_ms=1_000).outcome == "unknown"
    assert _slack(slack, lookup_pages=5).lookup("D1", call_id=CALL, since_ms=1_000).receipt == mine


def test_slack_metadata_is_hidden_without_include_all_metadata(slack):
    _slack(slack).send("D1", {"kind": "text", "text": "x"}, call_id=CALL)
    doc = _slack(slack).call("conversations.history", {"channel": "D1"}, effectful=False)
    assert "metadata" not in doc["messages"][0]


def test_slack_begun_send_after_a_hang_is_unknown_then_reconciled_not_resent(slack):
    sender = _slack(slack)
    slack.fail("chat.postMessage", "hang")
    with pytest.raises(SendOutcomeUnknown) as e:
        sender.send("D1", {"kind": "text", "text": "x"}, call_id=CALL)
    assert e.value.reason == "timeout"
    found = sender.lookup("D1", call_id=CALL, since_ms=1_000)
    assert found.outcome == "found" and len(slack.bot_messages()) == 1


def test_slack_dropped_connection_is_unknown_transport_error(slack):
    slack.fail("chat.postMessage", "drop")
    with pytest.raises(SendOutcomeUnknown) as e:
        _slack(slack).send("D1", {"kind": "text", "text": "x"}, call_id=CALL)
    assert e.value.reason == "transport_error"
    assert _slack(slack).lookup("D1", call_id=CALL, since_ms=0).outcome == "found"


@pytest.mark.parametrize(
    "mode, cls, code",
    [
        ("ratelimited", SendRetryable, "ratelimited"),
        ("error:service_unavailable", SendRetryable, "service_unavailable"),
        ("error:internal_error", SendOutcomeUnknown, "internal_error"),
        ("error:fatal_error", SendOutcomeUnknown, "fatal_error"),
        ("status:503", SendOutcomeUnknown, None),
        ("error:not_in_channel", SendRejected, "not_in_channel"),
        ("error:is_archived", SendRejected, "is_archived"),
    ],
)
def test_slack_post_failures_are_classified(slack, mode, cls, code):
    slack.fail("chat.postMessage", mode)
    with pytest.raises(cls) as e:  # an answered failure: no need for the hang tests' short timeout
        _slack(slack, timeout_s=5.0).send("D1", {"kind": "text", "text": "x"}, call_id=CALL)
    assert type(e.value) is cls and e.value.provider_code == code
    assert slack.bot_messages() == []  # the fake refused before acting


def test_slack_rate_limit_carries_retry_after(slack):
    slack.fail("chat.postMessage", "ratelimited", retry_after_s=7)
    with pytest.raises(SendRetryable) as e:
        _slack(slack).send("D1", {"kind": "text", "text": "x"}, call_id=CALL)
    assert e.value.retry_after_s == 7 and e.value.http_status == 429


def test_slack_bad_token_and_bad_request_are_rejected(slack):
    with pytest.raises(SendRejected, match="invalid_auth"):
        SlackSender("xoxb-wrong", base_url=slack.url).send("D1", {"kind": "text", "text": "x"}, call_id=CALL)
    with pytest.raises(SendRejected, match="no_text"):
        _slack(slack).send("D1", {"kind": "text", "text": ""}, call_id=CALL)
    with pytest.raises(SendRejected, match="unknown reply op"):
        _slack(slack).send("D1", {"kind": "poll"}, call_id=CALL)


def test_slack_read_failures_are_retryable_never_unknown(slack):
    slack.fail("conversations.history", "status:500")
    with pytest.raises(SendRetryable):
        _slack(slack).lookup("D1", call_id=CALL, since_ms=0)
    slack.fail("conversations.history", "hang")
    with pytest.raises(SendRetryable):
        _slack(slack).lookup("D1", call_id=CALL, since_ms=0)


def test_slack_lookup_refused_by_slack_is_unknown(slack):
    slack.fail("conversations.replies", "error:missing_scope")
    assert _slack(slack).lookup("C1:1790000000.000100", call_id=CALL, since_ms=0).outcome == "unknown"
    # no such thread and nothing in it: Slack answers thread_not_found, which proves nothing
    assert _slack(slack).lookup("C1:1790000000.000100", call_id=CALL, since_ms=0).outcome == "unknown"


def test_connection_refused_is_retryable_not_sent():
    sender = SlackSender(DEFAULT_TOKEN, base_url=f"http://127.0.0.1:{_free_port()}/api/", timeout_s=0.5)
    with pytest.raises(SendRetryable, match="connect"):
        sender.send("D1", {"kind": "text", "text": "x"}, call_id=CALL)


def test_slack_base_url_comes_from_the_environment(slack, monkeypatch):
    monkeypatch.setenv("SLACK_API_URL", slack.url)
    inst = Installation("slack", "slack", "T0FAKE", "acme", "demo")
    sender = sender_for(inst, ChannelSecrets(bot_token=DEFAULT_TOKEN))
    assert isinstance(sender, SlackSender) and sender.base_url == slack.url
    assert sender.auth_test()["team_id"] == "T0FAKE"
    with pytest.raises(ValueError):
        sender_for(inst, ChannelSecrets())


def test_the_fake_serves_slack_sdk_webclient(slack):
    """The official SDK, pointed at the fake by base_url, gets the shapes it expects."""
    from slack_sdk import WebClient
    from slack_sdk.errors import SlackApiError

    client = WebClient(token=DEFAULT_TOKEN, base_url=slack.url)
    assert client.auth_test()["user_id"] == "U0BOT"
    res = client.chat_postMessage(
        channel="C1",
        text="via sdk",
        metadata={"event_type": "threads_channel_send", "event_payload": {"call_id": "k"}},
    )
    hist = client.conversations_history(channel="C1", include_all_metadata=True)
    assert hist["messages"][0]["ts"] == res["ts"]
    assert hist["messages"][0]["metadata"]["event_payload"] == {"call_id": "k"}
    found = SlackSender(DEFAULT_TOKEN, base_url=slack.url).lookup("C1", call_id="k", since_ms=0)
    assert found.receipt is not None and found.receipt.message_id == res["ts"]
    with pytest.raises(SlackApiError):
        WebClient(token="xoxb-bad", base_url=slack.url).auth_test()


# -- WhatsApp ------------------------------------------------------------------------------------


def test_whatsapp_text_send_returns_the_wamid(wa):
    receipt = _wa(wa).send("16505551234", {"kind": "text", "text": "Done."}, call_id=CALL)
    (sent,) = wa.sent
    assert receipt.message_id == sent["wamid"] == receipt.provider_receipt
    assert sent["to"] == "16505551234" and sent["type"] == "text" and sent["text"]["body"] == "Done."
    assert sent["biz_opaque_callback_data"] == CALL
    assert wa.requests[-1].path == f"/v21.0/{DEFAULT_PHONE_NUMBER_ID}/messages"
    assert wa.requests[-1].headers["authorization"] == f"Bearer {WA_TOKEN}"


def test_whatsapp_approval_prompt_has_reply_buttons(wa):
    _wa(wa, api_version="v20.0").send("16505551234", approval_op("whatsapp", "ch_5", "note"), call_id=CALL)
    (sent,) = wa.sent
    buttons = sent["interactive"]["action"]["buttons"]
    assert [b["reply"]["id"] for b in buttons] == ["threads:grant:ch_5", "threads:deny:ch_5"]
    assert all(len(b["reply"]["title"]) <= 20 for b in buttons)
    assert wa.requests[-1].path.startswith("/v20.0/")


def test_whatsapp_has_no_lookup_so_reconcile_is_unknown(wa):
    _wa(wa).send("16505551234", {"kind": "text", "text": "x"}, call_id=CALL)
    assert _wa(wa).lookup("16505551234", call_id=CALL, since_ms=0).outcome == "unknown"


@pytest.mark.parametrize(
    "mode, cls, code",
    [
        ("ratelimited", SendRetryable, "130429"),
        ("error:130429", SendRetryable, "130429"),
        ("error:131056", SendRetryable, "131056"),
        ("error:4", SendRetryable, "4"),
        ("transient", SendRetryable, "2"),
        ("status:500", SendOutcomeUnknown, "1"),
        ("error:131047", SendRejected, "131047"),
        ("error:100", SendRejected, "100"),
    ],
)
def test_whatsapp_failures_are_classified(wa, mode, cls, code):
    wa.fail("messages", mode)
    with pytest.raises(cls) as e:
        _wa(wa).send("16505551234", {"kind": "text", "text": "x"}, call_id=CALL)
    assert type(e.value) is cls and e.value.provider_code == code
    assert wa.sent == []


def test_whatsapp_hang_and_drop_are_unknown_after_acting(wa):
    wa.fail("messages", "hang")
    with pytest.raises(SendOutcomeUnknown) as e:
        _wa(wa).send("16505551234", {"kind": "text", "text": "x"}, call_id=CALL)
    assert e.value.reason == "timeout"
    wa.fail("messages", "drop")
    with pytest.raises(SendOutcomeUnknown) as e:
        _wa(wa).send("16505551234", {"kind": "text", "text": "y"}, call_id=CALL)
    assert e.value.reason == "transport_error"
    assert len(wa.sent) == 2  # both were acted on: only reconcile (here: parking) may follow


def test_whatsapp_auth_number_and_body_errors_are_rejected(wa):
    with pytest.raises(SendRejected, match="190"):
        WhatsAppSender("bad", DEFAULT_PHONE_NUMBER_ID, base_url=wa.url).send(
            "1", {"kind": "text", "text": "x"}, call_id=CALL
        )
    with pytest.raises(SendRejected, match="100"):
        WhatsAppSender(WA_TOKEN, "999", base_url=wa.url).send(
            "1", {"kind": "text", "text": "x"}, call_id=CALL
        )
    with pytest.raises(SendRejected, match="1..4096"):
        _wa(wa).send("1", {"kind": "text", "text": "x" * 4097}, call_id=CALL)
    with pytest.raises(SendRejected, match="too long"):
        _wa(wa).send("1", {"kind": "approval", "challenge_id": "c" * 250, "text": "t"}, call_id=CALL)
    assert wa.sent == []


def test_whatsapp_sender_from_installation_and_environment(wa, monkeypatch):
    monkeypatch.setenv("WHATSAPP_API_URL", wa.url)
    inst = Installation(
        "whatsapp", "whatsapp", DEFAULT_PHONE_NUMBER_ID, "acme", "demo", settings={"api_version": "v19.0"}
    )
    sender = sender_for(inst, ChannelSecrets(access_token=WA_TOKEN))
    assert isinstance(sender, WhatsAppSender)
    sender.send("16505551234", {"kind": "text", "text": "x"}, call_id=CALL)
    assert wa.requests[-1].path == f"/v19.0/{DEFAULT_PHONE_NUMBER_ID}/messages"


def test_service_window():
    assert within_service_window(1_000, 1_000 + 23 * 3600 * 1000)
    assert not within_service_window(1_000, 1_000 + 24 * 3600 * 1000)
    assert not within_service_window(None, 0)


def test_fake_control_endpoints_over_http(slack):
    import json as _json
    import urllib.request

    def post(path: str, doc: dict) -> dict:
        req = urllib.request.Request(
            slack.origin + path, _json.dumps(doc).encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=5) as r:
            return _json.loads(r.read())

    assert post("/_fake/fail", {"method": "chat.postMessage", "mode": "error:channel_not_found"}) == {
        "ok": True
    }
    with pytest.raises(SendRejected, match="channel_not_found"):
        _slack(slack).send("D1", {"kind": "text", "text": "x"}, call_id=CALL)
    _slack(slack).send("D1", {"kind": "text", "text": "y"}, call_id=CALL)
    with urllib.request.urlopen(slack.origin + "/_fake/requests", timeout=5) as r:
        seen = _json.loads(r.read())
    assert [s["path"] for s in seen] == ["/api/chat.postMessage", "/api/chat.postMessage"]
    post("/_fake/reset", {})
    assert slack.requests == [] and slack.bot_messages() == []


def test_fakes_run_as_their_own_process():
    import subprocess
    import sys

    for module, var in (
        ("threads_aws_dev.fakes.slack", "SLACK_API_URL"),
        ("threads_aws_dev.fakes.whatsapp", "WHATSAPP_API_URL"),
    ):
        port = _free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", module, "--port", str(port)], stdout=subprocess.PIPE, text=True
        )
        try:
            line = proc.stdout.readline() if proc.stdout else ""
            assert f"{var}=http://127.0.0.1:{port}/" in line
            if module.endswith("slack"):
                assert (
                    SlackSender(DEFAULT_TOKEN, base_url=f"http://127.0.0.1:{port}/api/").auth_test()["ok"]
                    is True
                )
            else:
                sender = WhatsAppSender(
                    WA_TOKEN, DEFAULT_PHONE_NUMBER_ID, base_url=f"http://127.0.0.1:{port}/"
                )
                assert sender.send("1555", {"kind": "text", "text": "x"}, call_id=CALL).message_id.startswith(
                    "wamid."
                )
        finally:
            proc.terminate()
            proc.wait(timeout=10)
