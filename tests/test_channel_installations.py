"""The channels file: format, validation errors, and secret resolution (env, inline, and
Secrets Manager through Powertools Parameters against moto)."""

from __future__ import annotations

import json

import pytest
from threads_aws.agents import load_agents
from threads_aws.channels.installations import (
    DEFAULT_FILE,
    ChannelsConfigError,
    load_installations,
    parse_installations,
)
from threads_aws.channels.secrets import SecretResolver, SecretUnavailable


def _slack(**over):
    inst = {
        "channel": "slack",
        "installation_id": "T024BE7LD",
        "tenant": "acme",
        "agent": "demo",
        "approvers": ["U0APPROVER"],
        "secrets": {"signing_secret": {"env": "SLACK_SIGNING_SECRET"}, "bot_token": {"value": "xoxb-1"}},
    }
    inst.update(over)
    return inst


def _wa(**over):
    inst = {
        "channel": "whatsapp",
        "installation_id": "106540352242922",
        "tenant": "acme",
        "agent": "demo",
        "settings": {"api_version": "v21.0"},
        "secrets": {
            "app_secret": {"secret": "threads-aws/wa", "key": "app_secret"},
            "verify_token": {"secret": "threads-aws/wa", "key": "verify_token"},
            "access_token": {"secret": "threads-aws/wa-token"},
        },
    }
    inst.update(over)
    return inst


def test_bundled_file_is_valid_and_serves_nothing():
    insts = load_installations(DEFAULT_FILE, agent_names=load_agents().keys())
    assert len(insts.all) == 2 and len(insts) == 0 and insts.channels() == []


def test_installation_identity_and_lookup():
    insts = parse_installations(
        {"installations": [_slack(), _wa(), _slack(installation_id="T2", enabled=False)]}
    )
    assert insts.channels() == ["slack", "whatsapp"] and insts.provider("slack") == "slack"
    inst = insts.get("slack", "T024BE7LD")
    assert inst is not None and insts.get("slack", "T2") is None  # disabled
    assert inst.issuer == "slack:T024BE7LD"
    assert inst.principal("U1") == {"issuer": "slack:T024BE7LD", "tenant": "acme", "subject": "U1"}
    assert inst.approver_principals() == [inst.principal("U0APPROVER")]
    assert inst.is_approver("U0APPROVER") and not inst.is_approver("U1")
    assert "xoxb-1" not in repr(inst)  # inline values never show


def test_channel_with_its_own_name_names_its_provider():
    insts = parse_installations({"installations": [_slack(channel="slack_ops", provider="slack")]})
    assert insts.provider("slack_ops") == "slack"


@pytest.mark.parametrize(
    "doc, message",
    [
        ([], "must be {"),
        ({"installations": {}}, "must be {"),
        ({"installations": [], "extra": 1}, "must be {"),
        ({"installations": [_slack(chanel="x")]}, "unknown field(s) chanel"),
        ({"installations": [_slack(channel="Slack")]}, "installations[0].channel"),
        ({"installations": [_slack(channel="teams")]}, "set provider when the channel name is not one"),
        ({"installations": [_slack(provider="teams")]}, "'teams' is not one of slack, whatsapp"),
        ({"installations": [_slack(installation_id="")]}, "installations[0].installation_id"),
        ({"installations": [_slack(tenant=3)]}, "installations[0].tenant"),
        ({"installations": [_slack(approvers="U1")]}, "approvers: must be a list"),
        ({"installations": [_slack(enabled="yes")]}, "enabled: must be true or false"),
        (
            {"installations": [_slack(settings={"api_version": "v1"})]},
            "settings: must be an object with keys among: none",
        ),
        ({"installations": [_slack(secrets={"signing_secret": {"env": "X"}})]}, "missing bot_token"),
        (
            {
                "installations": [
                    _slack(
                        secrets={"signing_secret": {"env": "X"}, "bot_token": {"env": "Y"}, "app_secret": {}}
                    )
                ]
            },
            "unknown app_secret",
        ),
        (
            {
                "installations": [
                    _slack(secrets={"signing_secret": {"env": "X", "value": "v"}, "bot_token": {"env": "Y"}})
                ]
            },
            "exactly one of env, secret, value",
        ),
        (
            {
                "installations": [
                    _slack(secrets={"signing_secret": {"env": "X", "key": "k"}, "bot_token": {"env": "Y"}})
                ]
            },
            "key: a non-empty string, only with secret",
        ),
        (
            {"installations": [_slack(secrets={"signing_secret": "plain", "bot_token": {"env": "Y"}})]},
            "must be an object",
        ),
        (
            {"installations": [_slack(), _slack()]},
            "installations[1]: channel 'slack' installation 'T024BE7LD' repeats",
        ),
        (
            {
                "installations": [
                    _slack(channel="chat", provider="slack"),
                    _wa(channel="chat", provider="whatsapp"),
                ]
            },
            "mixes providers",
        ),
    ],
)
def test_validation_names_the_entry_and_field(doc, message):
    with pytest.raises(ChannelsConfigError) as e:
        parse_installations(doc)
    assert message in str(e.value)


def test_agent_must_exist_when_agent_names_are_given():
    with pytest.raises(ChannelsConfigError, match="no agent 'ghost'"):
        parse_installations({"installations": [_slack(agent="ghost")]}, agent_names={"demo"})


def test_file_loading_from_channels_file(tmp_path, monkeypatch):
    path = tmp_path / "channels.json"
    path.write_text(json.dumps({"installations": [_slack()]}))
    monkeypatch.setenv("CHANNELS_FILE", str(path))
    assert load_installations().get("slack", "T024BE7LD") is not None
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(ChannelsConfigError, match="not JSON"):
        load_installations(bad)
    with pytest.raises(ChannelsConfigError, match="cannot read"):
        load_installations(tmp_path / "missing.json")


def test_env_and_inline_refs_resolve():
    inst = parse_installations({"installations": [_slack()]}).get("slack", "T024BE7LD")
    assert inst is not None
    secrets = SecretResolver(env={"SLACK_SIGNING_SECRET": "sig"}).secrets_for(inst)
    assert secrets.signing_secret == "sig" and secrets.bot_token == "xoxb-1"
    assert "sig" not in repr(secrets)
    only = SecretResolver(env={"SLACK_SIGNING_SECRET": "sig"}).secrets_for(inst, ("signing_secret",))
    assert only.bot_token is None
    with pytest.raises(SecretUnavailable, match="environment variable SLACK_SIGNING_SECRET is not set"):
        SecretResolver(env={}).secrets_for(inst)


def test_secrets_manager_refs_resolve_through_powertools(monkeypatch):
    from moto import mock_aws

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    inst = parse_installations({"installations": [_wa()]}).get("whatsapp", "106540352242922")
    assert inst is not None
    with mock_aws():
        import boto3

        sm = boto3.client("secretsmanager")
        sm.create_secret(
            Name="threads-aws/wa", SecretString=json.dumps({"app_secret": "as", "verify_token": "vt"})
        )
        sm.create_secret(Name="threads-aws/wa-token", SecretString="EAA-token")
        secrets = SecretResolver(max_age_s=0).secrets_for(inst)
        assert (secrets.app_secret, secrets.verify_token, secrets.access_token) == ("as", "vt", "EAA-token")

        missing = parse_installations(
            {"installations": [_wa(secrets={**_wa()["secrets"], "access_token": {"secret": "nope"}})]}
        ).get("whatsapp", "106540352242922")
        assert missing is not None
        with pytest.raises(SecretUnavailable, match="secret nope"):
            SecretResolver(max_age_s=0).secrets_for(missing)
        sm.create_secret(Name="threads-aws/not-json", SecretString="plain")
        bad_key = {"secret": "threads-aws/not-json", "key": "app_secret"}
        odd = parse_installations(
            {"installations": [_wa(secrets={**_wa()["secrets"], "app_secret": bad_key})]}
        ).get("whatsapp", "106540352242922")
        assert odd is not None
        with pytest.raises(SecretUnavailable, match="not a JSON secret"):
            SecretResolver(max_age_s=0).secrets_for(odd)


def test_secret_fetch_is_injectable():
    calls: list[str] = []

    def fetch(name: str, max_age: int) -> str:
        calls.append(name)
        return json.dumps({"app_secret": "a", "verify_token": "v"}) if name == "threads-aws/wa" else "tok"

    inst = parse_installations({"installations": [_wa()]}).get("whatsapp", "106540352242922")
    assert inst is not None
    s = SecretResolver(fetch=fetch).secrets_for(inst)
    assert (s.app_secret, s.verify_token, s.access_token) == ("a", "v", "tok")
    assert calls == ["threads-aws/wa", "threads-aws/wa", "threads-aws/wa-token"]
