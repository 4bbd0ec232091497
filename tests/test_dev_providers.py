"""`threads-aws dev` and the real providers: `--real-bedrock` signs Bedrock Runtime requests alone
with the ordinary credential chain (here AWS_PROFILE from a credentials file of the test, distinct
from dev's dummy `testing` keys) while DynamoDB/S3/SQS stay on moto; the local Bedrock fake
stands for the real endpoint (AWS_ENDPOINT_URL_BEDROCK_RUNTIME) and records each request's
signature. A run whose agent can reach none of its models is refused at POST /v1/runs with
`invalid_request` naming the variable / stack parameter; a Bedrock fallback with no Bedrock
endpoint under dev (moto answers Converse with a 500) fails once, not sent, never retried."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from helpers import e2e
from helpers.e2e import Dev, types
from threads_aws import agents
from threads_aws_dev.fakes.models import FakeServer

REAL_KEY = "AKIAREALCHAIN0000001"
DROP = ("AWS_", "ANTHROPIC_", "OPENAI_", "AGENTS_FILE", "THREADS_BEDROCK")


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeServer]:
    srv = FakeServer().start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def real_bedrock(tmp_path_factory: pytest.TempPathFactory, fake: FakeServer) -> Iterator[Dev]:
    tmp = tmp_path_factory.mktemp("real-bedrock")
    (tmp / "credentials").write_text(
        f"[real]\naws_access_key_id = {REAL_KEY}\naws_secret_access_key = not-the-dummy-secret\n"
    )
    (tmp / "config").write_text("[profile real]\nregion = eu-west-1\n")
    env = {
        "AWS_PROFILE": "real",
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp / "credentials"),
        "AWS_CONFIG_FILE": str(tmp / "config"),
        "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": fake.url,  # standing for bedrock-runtime.eu-west-1
    }
    with e2e.dev(tmp, env, ["--real-bedrock"], drop_env=DROP) as d:
        yield d


@pytest.fixture(scope="module")
def no_bedrock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Dev, FakeServer]]:
    tmp = tmp_path_factory.mktemp("no-bedrock")
    # the bundled agents plus one on Bedrock alone (the bundled `bedrock` falls back to anthropic)
    bundled = json.loads(agents.DEFAULT_FILE.read_text())
    only = {**bundled["bedrock"], "fallback_models": []}
    (tmp / "agents.json").write_text(json.dumps({**bundled, "bedrock-only": only}))
    srv = FakeServer().start()
    env = {
        "ANTHROPIC_API_KEY": "sk-ant-fake",
        "ANTHROPIC_BASE_URL": srv.url,
        "AGENTS_FILE": str(tmp / "agents.json"),
    }
    try:
        with e2e.dev(tmp, env, drop_env=DROP) as d:
            yield d, srv
    finally:
        srv.stop()


def _post(dev: Dev, agent: str, key: str) -> tuple[int, dict]:
    status, body, _ = dev.call(
        "POST", "/v1/runs", {"agent": agent, "input": "What time is it?"}, headers={"Idempotency-Key": key}
    )
    return status, body


def test_real_bedrock_signs_with_the_ordinary_chain_and_the_rest_stays_on_moto(
    real_bedrock: Dev, fake: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(e2e, "DEADLINE_S", 120)  # the first step imports boto3's bedrock model
    before = len(fake.state.requests)
    status, run = _post(real_bedrock, "bedrock", "real-bedrock-1")
    assert status == 202, run
    _, _, result = real_bedrock.stream(run["thread_id"], run["run_id"])
    assert result["status"] == "completed", (result, real_bedrock.log.read_text()[-3000:])
    sent = [r for r in fake.state.requests[before:] if r["provider"] == "bedrock"]
    assert len(sent) == 2
    for r in sent:  # SigV4: Credential=<key id>/<date>/<region>/bedrock/aws4_request
        assert f"Credential={REAL_KEY}/" in r["authorization"], r["authorization"]
        assert "/eu-west-1/bedrock/aws4_request" in r["authorization"]
    # the thread itself lives in dev's moto (its store environment: dummy keys, moto endpoint)
    assert real_bedrock.env["AWS_ACCESS_KEY_ID"] == "testing"
    assert "model_response" in types(real_bedrock.timeline(run["thread_id"]))


def test_an_agent_without_its_providers_key_is_refused_at_start(real_bedrock: Dev) -> None:
    status, body = _post(real_bedrock, "openai", "no-openai-key")
    assert status == 400, body
    assert body["error"]["code"] == "invalid_request"
    msg = body["error"]["message"]
    assert "OPENAI_API_KEY" in msg and "OpenAIApiKeySecret" in msg, msg


def test_without_a_bedrock_endpoint_bedrock_is_named_at_start(no_bedrock: tuple[Dev, FakeServer]) -> None:
    dev, _ = no_bedrock
    status, body = _post(dev, "bedrock-only", "no-bedrock-1")
    assert status == 400 and body["error"]["code"] == "invalid_request", body
    msg = body["error"]["message"]
    assert "AWS_ENDPOINT_URL_BEDROCK_RUNTIME" in msg and "--real-bedrock" in msg, msg


def test_bedrock_without_an_endpoint_fails_once_unsent_then_the_fallback_answers(
    no_bedrock: tuple[Dev, FakeServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`bedrock` (falls back to anthropic, whose key is set) is accepted; its Bedrock attempt
    fails before anything is sent (moto would answer Converse with a 500, retried), once."""
    monkeypatch.setattr(e2e, "DEADLINE_S", 120)
    dev, srv = no_bedrock
    status, run = _post(dev, "bedrock", "fallback-from-bedrock")
    assert status == 202, run
    _, _, result = dev.stream(run["thread_id"], run["run_id"])
    assert result["status"] == "completed", (result, dev.log.read_text()[-3000:])
    timeline = dev.timeline(run["thread_id"])
    abandoned = [e["data"] for e in timeline if e["type"] == "model_attempt_abandoned"]
    assert len(abandoned) == 1, abandoned
    assert abandoned[0]["provider_outcome"] == "not_sent" and abandoned[0]["billing"] == "not_billed"
    assert [r["provider"] for r in srv.state.requests] == ["anthropic", "anthropic"]
    log = dev.log.read_text()
    assert "Traceback" not in log and "NotImplementedError" not in log, log[-3000:]


def test_only_a_declared_empty_key_variable_is_judged_missing() -> None:
    from threads_aws.config.provider_access import missing, unreachable

    assert missing("anthropic", {}) is None  # not declared: unknown here, the run decides
    assert missing("anthropic", {"ANTHROPIC_API_KEY_SECRET": "threads/anthropic"}) is None
    assert missing("anthropic", {"ANTHROPIC_API_KEY_SECRET": "", "ANTHROPIC_API_KEY": "sk"}) is None
    need = missing("anthropic", {"ANTHROPIC_API_KEY_SECRET": ""})
    assert need is not None and "AnthropicApiKeySecret" in need and "ANTHROPIC_API_KEY" in need
    env = {"OPENAI_API_KEY_SECRET": "", "THREADS_BEDROCK_UNAVAILABLE": "no bedrock here"}
    models = [{"provider": "openai", "name": "m"}, {"provider": "bedrock", "name": "b"}]
    assert "openai/m needs OPENAI_API_KEY" in (unreachable(models, env) or "")
    assert unreachable(models, {**env, "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": "http://x"}) is None
    assert unreachable([{"provider": "demo", "name": "demo"}], env) is None
