"""The intake pipeline the webhook route calls: channel → installation → verify → parse → the
inbox batch → the ack, over the channels file and signed requests (pure; no AWS). Also the
shared intake conformance cases through the conformance fake adapter, up to the inbox keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import shared
from threads_aws.channels.errors import NoChallenge, UnknownChannel, Unverified
from threads_aws.channels.installations import parse_installations
from threads_aws.channels.intake import challenge, receive
from threads_aws.channels.secrets import SecretResolver, SecretUnavailable
from threads_aws_dev.conformance.intake_adapter import ConformanceAdapter, installations_for, webhook_request
from threads_aws_dev.fakes import slack as fs
from threads_aws_dev.fakes import whatsapp as fw

NOW_S = 1_790_000_000
NOW_MS = NOW_S * 1000
CASES = shared.CASES


def _slack(iid, secret, tenant="acme"):
    return {
        "channel": "slack",
        "installation_id": iid,
        "tenant": tenant,
        "agent": "demo",
        "approvers": ["U0APPROVER"],
        "secrets": {"signing_secret": {"value": secret}, "bot_token": {"env": "NOT_READ_ON_INTAKE"}},
    }


def _wa(iid, app_secret, verify_token, tenant="acme"):
    return {
        "channel": "whatsapp",
        "installation_id": iid,
        "tenant": tenant,
        "agent": "demo",
        "secrets": {
            "app_secret": {"value": app_secret},
            "verify_token": {"value": verify_token},
            "access_token": {"env": "NOT_READ_ON_INTAKE"},
        },
    }


INSTALLS = parse_installations(
    {
        "installations": [
            _slack("T1", "secret-one"),
            _slack("T2", "secret-two", tenant="globex"),
            _wa("111", "app-a", "vt-a"),
            _wa("222", "app-b", "vt-b", tenant="globex"),
        ]
    }
)
RESOLVER = SecretResolver(env={})


def _slack_msg(team="T1", text="hello", secret="secret-one", retry_num=None):
    ev = fs.message_event("C1", "U1", text, "1790000000.000100")
    doc = fs.event_callback(ev, team_id=team, event_id="Ev1", event_time=NOW_S)
    return fs.signed_json(secret, doc, timestamp=NOW_S, retry_num=retry_num).request()


def test_signed_slack_message_yields_its_item_with_its_installation():
    got = receive("slack", _slack_msg(), INSTALLS, RESOLVER, NOW_MS)
    ((inst, item),) = got.items
    assert inst.installation_id == "T1" and inst.tenant == "acme"
    assert item.item_key == "C1:1790000000.000100" and item.text == "hello"
    assert inst.principal(item.sender) == {"issuer": "slack:T1", "tenant": "acme", "subject": "U1"}
    assert got.response.status == 200 and got.response.body == b""


def test_the_bot_token_is_not_resolved_on_the_webhook_path():
    # NOT_READ_ON_INTAKE is unset: resolving it would raise SecretUnavailable.
    receive("slack", _slack_msg(), INSTALLS, RESOLVER, NOW_MS)


def test_redeliveries_yield_the_same_batch():
    first = receive("slack", _slack_msg(), INSTALLS, RESOLVER, NOW_MS).items
    for n in (1, 2):
        assert receive("slack", _slack_msg(retry_num=n), INSTALLS, RESOLVER, NOW_MS).items == first


def test_unknown_channel_is_not_found_before_verify():
    with pytest.raises(UnknownChannel):
        receive("teams", _slack_msg(), INSTALLS, RESOLVER, NOW_MS)
    with pytest.raises(UnknownChannel):
        challenge("teams", fw.challenge_request("vt-a", "1").request(), INSTALLS, RESOLVER)


@pytest.mark.parametrize(
    "req",
    [
        _slack_msg(secret="wrong"),
        _slack_msg(team="T1", secret="secret-two"),  # another installation's secret
        _slack_msg(team="T9", secret="secret-one"),  # an installation we don't serve
    ],
)
def test_bad_signatures_are_unverified(req):
    with pytest.raises(Unverified):
        receive("slack", req, INSTALLS, RESOLVER, NOW_MS)


def test_stale_slack_request_is_unverified():
    with pytest.raises(Unverified):
        receive("slack", _slack_msg(), INSTALLS, RESOLVER, NOW_MS + 301_000)


def test_url_verification_is_tried_against_every_installation():
    req = fs.signed_json("secret-two", fs.url_verification("chal-123"), timestamp=NOW_S).request()
    got = receive("slack", req, INSTALLS, RESOLVER, NOW_MS)
    assert got.items == () and got.response.body == b"chal-123"
    forged = fs.signed_json("nobody", fs.url_verification("chal-123"), timestamp=NOW_S).request()
    with pytest.raises(Unverified):
        receive("slack", forged, INSTALLS, RESOLVER, NOW_MS)


def test_slack_get_is_no_challenge():
    with pytest.raises(NoChallenge):
        challenge("slack", fw.challenge_request("vt-a", "1").request(), INSTALLS, RESOLVER)


def test_whatsapp_get_challenge_matches_an_installation_token():
    res = challenge("whatsapp", fw.challenge_request("vt-b", "98765").request(), INSTALLS, RESOLVER)
    assert res.status == 200 and res.body == b"98765"
    with pytest.raises(Unverified):
        challenge("whatsapp", fw.challenge_request("vt-x", "98765").request(), INSTALLS, RESOLVER)


def test_whatsapp_message_round_trip_through_intake():
    doc = fw.webhook("111", messages=[fw.text_message("15551234", "hi", wamid="wamid.1", timestamp=NOW_S)])
    got = receive("whatsapp", fw.signed("app-a", doc).request(), INSTALLS, RESOLVER, NOW_MS)
    ((inst, item),) = got.items
    assert (inst.installation_id, item.item_key, item.conversation) == ("111", "wamid.1", "15551234")
    assert got.response.status == 200


def test_a_batch_keeps_only_items_of_installations_whose_secret_verified():
    """Holding installation 111's app secret must not let anyone inject into 222's tenant."""
    doc = fw.webhook("111", messages=[fw.text_message("1555", "mine", wamid="wamid.A", timestamp=NOW_S)])
    other = fw.webhook("222", messages=[fw.text_message("1555", "theirs", wamid="wamid.B", timestamp=NOW_S)])
    doc["entry"].append(other["entry"][0])
    got = receive("whatsapp", fw.signed("app-a", doc).request(), INSTALLS, RESOLVER, NOW_MS)
    assert [(i.installation_id, it.item_key) for i, it in got.items] == [("111", "wamid.A")]
    with pytest.raises(Unverified):
        receive("whatsapp", fw.signed("app-c", doc).request(), INSTALLS, RESOLVER, NOW_MS)


def test_an_unresolvable_signing_secret_is_a_deployment_fault_not_unverified():
    insts = parse_installations(
        {
            "installations": [
                {
                    **_slack("T1", "x"),
                    "secrets": {"signing_secret": {"env": "UNSET"}, "bot_token": {"env": "B"}},
                }
            ]
        }
    )
    with pytest.raises(SecretUnavailable):
        receive("slack", _slack_msg(), insts, SecretResolver(env={}), NOW_MS)


# -- the shared intake cases, through the conformance fake adapter, up to the inbox keys -------


def _is_intake(d: Path) -> bool:
    return (d / "case.json").is_file() and json.loads((d / "case.json").read_text()).get("kind") == "intake"


@pytest.mark.parametrize("case_dir", shared.cases(_is_intake))
def test_intake_cases_responses_and_inbox_keys(case_dir):
    case = json.loads((case_dir / "case.json").read_text())
    expected = json.loads((case_dir / "expected.json").read_text())
    webhooks = case["input"]["webhooks"]
    installs = installations_for(webhooks)
    adapter = ConformanceAdapter()
    responses, keys, rows = [], set(), []
    for w in webhooks:
        try:
            got = receive(
                w["channel"], webhook_request(w), installs, RESOLVER, case["clock"]["now"], adapter=adapter
            )
        except Unverified:
            responses.append(401)
            continue
        for inst, item in got.items:  # the unique key the inbox will enforce
            key = (inst.tenant, inst.channel, inst.installation_id, item.item_key)
            if key not in keys:
                keys.add(key)
                rows.append(
                    {"channel": inst.channel, "item_key": item.item_key, "conversation": item.conversation}
                )
        responses.append(got.response.status)
    assert responses == expected["responses"]
    assert [{"channel": r["channel"], "item_key": r["item_key"]} for r in rows] == expected["inbox"]
    assert len({r["conversation"] for r in rows}) == expected["threads"]
