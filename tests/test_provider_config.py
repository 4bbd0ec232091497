"""Agents file validation, the keys path (env locally, Secrets Manager through Powertools
Parameters deployed, on moto), call-id/retry-after helpers and the abandoned-attempt data."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from moto import mock_aws
from threads_aws.agents import load_agents, parse_agents
from threads_aws.config.agents_file import AgentsFileError
from threads_aws.engine.models import ModelError, adapter_for
from threads_aws.engine.providers import common, keys


def test_bundled_agents_validate_and_name_each_provider() -> None:
    agents = load_agents()
    assert {"demo", "anthropic", "openai", "bedrock"} <= set(agents)
    for name in ("anthropic", "openai", "bedrock"):
        a = agents[name]
        assert a.model["provider"] == a.adapter["name"] == name and a.adapter["version"] == "1"
        fb = a.fallback_settings()
        assert fb and fb[0]["model"]["provider"] != name and fb[0]["reasoning_carryover"] == "omit_prior"
        assert fb[0]["adapter"] == {"name": fb[0]["model"]["provider"], "settings": {}, "version": "1"}


def test_validation_names_every_problem() -> None:
    bad = {
        "a": {
            "model": {"provider": "nope", "name": "m"},
            "adapter": {"name": "nope", "version": "1"},
            "instructions": "i",
        },
        "b": {
            "model": {"provider": "anthropic", "name": "c"},
            "adapter": {"name": "openai", "version": "1"},
            "instructions": "i",
            "model_params": {"max_tokens": 5},
        },
        "c": {
            "model": {"provider": "openai", "name": "g"},
            "adapter": {"name": "openai", "version": "2"},
            "instructions": "i",
            "tools": ["time", "shell"],
        },
        "d": {
            "model": {"provider": "bedrock", "name": "x"},
            "adapter": {"name": "bedrock", "version": "1"},
            "instructions": "i",
            "model_params": {"top_k": 1},
            "extra": 1,
        },
        "e": {"model": {"provider": "demo", "name": "d"}},
        "f": {
            "model": {"provider": "anthropic", "name": "c"},
            "adapter": {"name": "anthropic", "version": "1"},
            "instructions": "i",
            "model_params": {"max_tokens": 5},
            "fallback_models": [{"provider": "mystery", "name": "z"}],
        },
    }
    with pytest.raises(AgentsFileError) as ei:
        parse_agents(json.dumps(bad), "agents.json")
    msg = str(ei.value)
    for needle in (
        "agent 'a': unknown provider 'nope'",
        "agent 'b': adapter 'openai' must match model.provider 'anthropic'",
        "agent 'c': adapter openai has no version '2'",
        "agent 'c': unknown tool 'shell'",
        "agent 'd': unknown key 'extra'",
        "agent 'd': model_params not mapped by any adapter: top_k",
        "agent 'd': bedrock needs model_params.max_tokens",
        "agent 'e': missing key 'adapter'",
        "agent 'e': missing key 'instructions'",
        "agent 'f': fallback_models[0]: unknown provider 'mystery'",
    ):
        assert needle in msg, (needle, msg)
    with pytest.raises(AgentsFileError, match="not JSON"):
        parse_agents("{", "x.json")


@mock_aws
def test_agents_from_an_s3_object(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="cfg")
    spec = {
        "mine": {
            "model": {"provider": "demo", "name": "demo-1"},
            "adapter": {"name": "demo", "version": "1"},
            "instructions": "hi",
            "tools": ["time"],
        }
    }
    s3.put_object(Bucket="cfg", Key="agents/prod.json", Body=json.dumps(spec).encode())
    monkeypatch.delenv("AGENTS_FILE", raising=False)
    monkeypatch.setenv("AGENTS_S3_URI", "s3://cfg/agents/prod.json")
    assert list(load_agents()) == ["mine"]


@mock_aws
def test_keys_env_first_then_secrets_manager(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    sm = boto3.client("secretsmanager", region_name="us-east-1")
    sm.create_secret(Name="threads/anthropic", SecretString="sk-ant-from-secret")
    sm.create_secret(Name="threads/openai", SecretString=json.dumps({"api_key": "sk-from-json"}))
    env: dict[str, Any] = {"ANTHROPIC_API_KEY": "sk-local", "ANTHROPIC_API_KEY_SECRET": "threads/anthropic"}
    assert keys.api_key("anthropic", env) == "sk-local"
    assert (
        keys.api_key("anthropic", {"ANTHROPIC_API_KEY": "", "ANTHROPIC_API_KEY_SECRET": "threads/anthropic"})
        == "sk-ant-from-secret"
    )
    assert keys.api_key("openai", {"OPENAI_API_KEY_SECRET": "threads/openai"}) == "sk-from-json"
    with pytest.raises(ModelError) as ei:
        keys.api_key("openai", {})
    assert ei.value.outcome == "not_sent" and not ei.value.retryable
    with pytest.raises(ModelError) as ei:
        keys.api_key("openai", {"OPENAI_API_KEY_SECRET": "threads/missing"})
    assert ei.value.outcome == "not_sent"


def test_registry_checks_versions_and_imports_lazily() -> None:
    with pytest.raises(LookupError):
        adapter_for({"provider": "anthropic", "name": "c"}, {"name": "anthropic", "version": "9"})
    assert (
        type(adapter_for({"provider": "bedrock", "name": "x"}, {"name": "bedrock", "version": "1"})).__name__
        == "BedrockAdapter"
    )


def test_call_ids_names_and_retry_after() -> None:
    assert common.inbound_call_id("toolu_01A", b"r", 0) == "toolu_01A"
    mapped = common.inbound_call_id("call:0/x", b"r", 0)
    assert common.CALL_ID_RE.match(mapped) and mapped == common.inbound_call_id("call:0/x", b"other", 3)
    assert common.CALL_ID_RE.match(common.inbound_call_id(None, b"r", 2))
    out = common.outbound_call_id("a.b", common.re.compile(r"^[a-zA-Z0-9_-]+$"), 64)
    assert "." not in out and out == common.outbound_call_id(
        "a.b", common.re.compile(r"^[a-zA-Z0-9_-]+$"), 64
    )
    assert common.NAME_RE.match(common.tool_name("Web-Search$"))
    assert common.retry_after_ms({"retry-after": "3"}) == 3000
    assert common.retry_after_ms({"retry-after-ms": "250.5", "retry-after": "9"}) == 250
    assert (
        common.retry_after_ms({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"}, now=lambda: 1445412480.0)
        == 10000
    )
    assert common.retry_after_ms({"retry-after": "soon"}) is None and common.retry_after_ms({}) is None


def test_abandoned_data_follows_the_contract() -> None:
    reasons = frozenset({"rate_limited", "stream_broken"})
    e = ModelError("rate_limited", 429, 1500)
    assert e.retryable and e.abandoned("r", reasons) == {
        "http_status": 429,
        "provider_outcome": "failed",
        "reason": "rate_limited",
        "request_event_id": "r",
        "retry_after_ms": 1500,
    }
    e = ModelError("stream_broken", outcome="unknown")
    assert e.abandoned("r", reasons) == {
        "billing": "unknown",
        "provider_outcome": "unknown",
        "reason": "stream_broken",
        "request_event_id": "r",
    }
    e = ModelError("provider_error", outcome="not_sent", retryable=False, code="content_unsupported")
    assert e.abandoned("r", reasons)["billing"] == "not_billed" and e.code == "content_unsupported"
    assert ModelError("weird").abandoned("r", reasons)["reason"] == "provider_error"


def test_worker_records_the_classified_outcome(aws: Any) -> None:
    """The step writes what the adapter classified: a lost answer is `unknown` (may be billed),
    a rejection `failed` with its status and retry-after."""
    from helpers.engine import make_ctx, new_thread, of_type, run, say, scripted, verify_export
    from threads_aws.engine.models import ScriptedModel

    ctx = make_ctx(aws)
    b = new_thread(ctx, "scripted")
    lost = {"error": {"outcome": "unknown", "reason": "stream_broken"}}
    limited = {"error": {"http_status": 429, "reason": "rate_limited", "retry_after_ms": 1000}}
    ctx.models = scripted(
        ScriptedModel(
            [lost, limited, {"content": [{"text": "ok", "type": "text"}], "stop_reason": "end_turn"}]
        )
    )
    say(ctx, b, "hi")
    while (out := run(ctx, b)).state == "wait":  # each retry waits (engine.retry): move the clock
        assert out.not_before is not None
        aws.clock.advance(out.not_before - aws.clock())
    assert out.state == "idle"
    waits = [e["data"] for e in of_type(ctx, b, "retry_scheduled")]
    assert [w["basis"] for w in waits] == ["backoff", "retry_after"] and waits[1]["delay_ms"] == 1000
    first, second = (e["data"] for e in of_type(ctx, b, "model_attempt_abandoned"))
    assert (first["provider_outcome"], first["reason"], first["billing"]) == (
        "unknown",
        "stream_broken",
        "unknown",
    )
    assert (second["provider_outcome"], second["http_status"], second["retry_after_ms"]) == (
        "failed",
        429,
        1000,
    )
    assert "billing" not in second
    verify_export(ctx, b)
