"""API keys and the REQUEST authorizer: valid key, revoked, unknown, missing, dev mode."""

from __future__ import annotations

import pytest
from threads_aws.host.auth import Unauthorized, authenticate, authorize, bearer, dev_tokens_enabled
from threads_aws.host.keys import ApiKeys, key_id

ARN = "arn:aws:execute-api:us-east-1:123456789012:abc/dev/GET/v1/threads/x/timeline"


@pytest.fixture
def keys(aws):
    return ApiKeys(aws.stores().api_keys, clock=aws.clock)


def event(token: str | None) -> dict:
    headers = {} if token is None else {"authorization": f"Bearer {token}"}
    return {"type": "REQUEST", "methodArn": ARN, "headers": headers}


def test_valid_key_maps_to_principal(keys):
    minted = keys.create("acme", "alice")
    out = authorize(event(minted.token), keys, dev=False)
    assert out["context"] == {"issuer": "api", "tenant": "acme", "subject": "alice"}
    assert out["principalId"] == "api/acme/alice"
    stmt = out["policyDocument"]["Statement"][0]
    assert (
        stmt["Effect"] == "Allow"
        and stmt["Resource"] == "arn:aws:execute-api:us-east-1:123456789012:abc/dev/*"
    )


def test_key_is_stored_hashed(keys, aws):
    minted = keys.create("acme", "alice", issuer="ops")
    assert minted.key_id == key_id(minted.token)
    items = aws.ddb.scan(TableName=aws.resources.state_table)["Items"]
    assert all(minted.token not in str(i) for i in items)
    assert any(i["pk"]["S"] == f"APIKEY#{minted.key_id}" for i in items)
    assert keys.lookup(minted.token).issuer == "ops"


def test_revoked_unknown_missing_are_unauthorized(keys):
    minted = keys.create("acme", "alice")
    assert keys.revoke(minted.key_id) is True
    assert keys.revoke(minted.token) is False  # already revoked
    for token in (minted.token, "thr_unknown", None, ""):
        with pytest.raises(Unauthorized, match="^Unauthorized$"):
            authorize(event(token), keys, dev=False)
    with pytest.raises(Unauthorized):
        authorize({"methodArn": ARN, "headers": {"Authorization": "Basic abc"}}, keys, dev=False)


def test_dev_mode_is_off_by_default(keys, monkeypatch):
    monkeypatch.delenv("THREADS_DEV_TOKENS", raising=False)
    assert dev_tokens_enabled() is False
    with pytest.raises(Unauthorized):
        authorize(event("dev:api:acme:alice"), keys)
    monkeypatch.setenv("THREADS_DEV_TOKENS", "1")
    assert authorize(event("dev:api:acme:alice"), keys)["context"]["subject"] == "alice"
    with pytest.raises(Unauthorized):
        authenticate({"Authorization": "Bearer dev:api:acme"}, keys, dev=True)


def test_template_never_enables_dev_tokens():
    from pathlib import Path

    assert "THREADS_DEV_TOKENS" not in (Path(__file__).resolve().parents[1] / "template.yaml").read_text()


def test_bearer_parsing():
    assert bearer({"Authorization": "Bearer  abc "}) == "abc"
    assert bearer({"AUTHORIZATION": "bearer abc"}) == "abc"
    assert bearer({"Authorization": "Bearer"}) is None
    assert bearer(None) is None


def test_cli_keys_create_and_revoke(aws, monkeypatch, capsys):
    from threads_aws_dev.cli import main

    monkeypatch.setenv("STATE_TABLE", aws.resources.state_table)
    assert main(["keys", "create", "--tenant", "acme", "--subject", "alice"]) == 0
    token = capsys.readouterr().out.splitlines()[0]
    keys = ApiKeys(aws.stores().api_keys)
    assert keys.lookup(token).subject == "alice"
    assert main(["keys", "revoke", token]) == 0
    assert keys.lookup(token) is None
    assert main(["keys", "revoke", token]) == 1
