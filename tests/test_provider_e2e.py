"""A tool loop through `threads-aws dev` for an agent on each provider (the bundled example
agents `anthropic`, `openai`, `bedrock`), against the local HTTP fake of that provider's API
reached through the SDKs' base-URL variables: the model asks for `time`, gets the result, and
answers with text quoting it. The exported branch verifies with `threads-aws log verify`.

The fake runs in this process (a thread); the dev server is a subprocess, as in
test_e2e_gateway (helpers.e2e), with ANTHROPIC_BASE_URL / OPENAI_BASE_URL / AWS_ENDPOINT_URL_BEDROCK_RUNTIME
pointing at the fake (and dummy keys). Real adapters, real SDKs, real HTTP on loopback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import e2e
from helpers.e2e import Dev, types
from threads_aws_dev.fakes.models import FakeServer

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeServer]:
    srv = FakeServer().start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def dev_on_fakes(tmp_path_factory: pytest.TempPathFactory, fake: FakeServer) -> Iterator[Dev]:
    tmp = tmp_path_factory.mktemp("e2e-providers")
    # The real adapters, pointed at the fakes: no provider variable or agents file of this shell.
    with e2e.dev(tmp, fake.env(), drop_env=("AWS_", "ANTHROPIC_", "OPENAI_", "AGENTS_FILE")) as d:
        yield d


@pytest.mark.parametrize("agent", ["anthropic", "openai", "bedrock"])
def test_tool_loop_on_each_provider(
    dev_on_fakes: Dev, fake: FakeServer, agent: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The worker's first step on a provider imports its SDK (seconds on a loaded machine).
    monkeypatch.setattr(e2e, "DEADLINE_S", 120)
    dev = dev_on_fakes
    before = len(fake.state.requests)
    status, run, _ = dev.call(
        "POST",
        "/v1/runs",
        {"agent": agent, "input": "What time is it?"},
        headers={"Idempotency-Key": f"e2e-{agent}-{tmp_path.name}"},
    )
    assert status == 202, run
    events, _, result = dev.stream(run["thread_id"], run["run_id"])
    assert result["status"] == "completed", (result, (dev.hook_dir / "dev.log").read_text()[-3000:])
    timeline = dev.timeline(run["thread_id"])
    kinds = types(timeline)
    assert kinds.count("model_request") == 2 and kinds.count("model_response") == 2, kinds
    call = next(e for e in timeline if e["type"] == "tool_call")["data"]
    assert call["name"] == "time"
    result_ev = next(e for e in timeline if e["type"] == "tool_result")["data"]
    assert result_ev["call_id"] == call["call_id"] and not result_ev["is_error"]
    responses = [e["data"] for e in timeline if e["type"] == "model_response"]
    assert responses[0]["stop_reason"] == "tool_use" and responses[1]["stop_reason"] == "end_turn"
    final_text = responses[1]["content"][0]["text"]
    assert final_text == f"The tool said: {result_ev['preview']}"
    assert final_text in json.dumps(result["output"])
    # The provider's own call id went into the log and back to the provider with the result.
    sent = [r for r in fake.state.requests[before:] if r["provider"] == agent]
    assert len(sent) == 2
    assert call["call_id"] in json.dumps(sent[1]["body"])
    # Usage is what the fake reported: the declared prefix cached on the second request
    # (OpenAI reports cached tokens of its own prefix cache).
    usage = responses[1]["usage"]
    assert isinstance(usage["input_tokens"], int) and usage.get("cache_read_tokens", 0) > 0, usage
    # The stored branch verifies offline.
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("AWS_")}, **dev.env}
    out = tmp_path / "branch.jsonl"
    cli = [sys.executable, "-m", "threads_aws_dev", "log"]
    subprocess.run(
        [*cli, "export", "--branch", run["branch_id"], "-o", str(out)], env=env, check=True, timeout=60
    )
    verified = subprocess.run([*cli, "verify", str(out)], capture_output=True, text=True, timeout=60)
    assert verified.returncode == 0 and verified.stdout.startswith("ok "), verified.stderr


# ------------------------------------------------------------------ retries, fallback, switching


def _run(dev: Dev, agent: str, text: str, key: str, **extra: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    status, run, _ = dev.call(
        "POST", "/v1/runs", {"agent": agent, "input": text, **extra}, headers={"Idempotency-Key": key}
    )
    assert status == 202, run
    _, _, result = dev.stream(run["thread_id"], run["run_id"])
    return run, result


def _verify(dev: Dev, branch_id: str, tmp_path: Path) -> None:
    """The stored branch exports, verifies offline (rules and request bytes) and re-imports."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("AWS_")}, **dev.env}
    out = tmp_path / f"{branch_id}.jsonl"
    cli = [sys.executable, "-m", "threads_aws_dev", "log"]
    subprocess.run([*cli, "export", "--branch", branch_id, "-o", str(out)], env=env, check=True, timeout=60)
    verified = subprocess.run([*cli, "verify", str(out)], capture_output=True, text=True, timeout=60)
    assert verified.returncode == 0 and verified.stdout.startswith("ok "), verified.stderr
    from threads_aws.core.importer import import_log

    assert import_log(out.read_bytes()).fold.head_seq > 0


def _sent(fake: FakeServer, before: int) -> list[str]:
    return [r["provider"] for r in fake.state.requests[before:]]


def test_rate_limit_with_retry_after_waits_then_succeeds(
    dev_on_fakes: Dev, fake: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 429 with retry-after: 1 → retry_scheduled{basis: retry_after}; the step ends, the timer
    queue re-delivers the branch after not_before, and the re-send (attempt 2) succeeds."""
    monkeypatch.setattr(e2e, "DEADLINE_S", 120)
    before = len(fake.state.requests)
    fake.fail("anthropic", "rate_limited", retry_after_s=1)
    run, result = _run(dev_on_fakes, "anthropic", "Say hi", f"e2e-429-{tmp_path.name}")
    assert result["status"] == "completed", result
    timeline = dev_on_fakes.timeline(run["thread_id"])
    assert types(timeline)[2:7] == [
        "model_request",
        "model_attempt_abandoned",
        "retry_scheduled",
        "model_request",
        "model_response",
    ]
    abandoned = next(e for e in timeline if e["type"] == "model_attempt_abandoned")["data"]
    assert (abandoned["reason"], abandoned["http_status"], abandoned["retry_after_ms"]) == (
        "rate_limited",
        429,
        1000,
    )
    wait = next(e for e in timeline if e["type"] == "retry_scheduled")
    assert (wait["data"]["basis"], wait["data"]["delay_ms"]) == ("retry_after", 1000)
    # not_before is the failure's time + the delay (the event is stamped a moment later)
    assert 0 <= wait["time"] - (wait["data"]["not_before"] - 1000) < 5000
    resend = [e for e in timeline if e["type"] == "model_request"][1]
    assert resend["data"]["attempt"] == 2 and resend["time"] >= wait["data"]["not_before"]
    assert _sent(fake, before) == ["anthropic", "anthropic"]
    _verify(dev_on_fakes, run["branch_id"], tmp_path)


def test_a_provider_that_keeps_failing_falls_back_then_reverts(
    dev_on_fakes: Dev, fake: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Anthropic answers 529 twice (fallback_after 2): settings_changed{fallback} moves the
    thread to its Bedrock fallback, which runs the tool loop; the turn-scoped fallback reverts
    when the turn ends, and the next run is on Anthropic again."""
    monkeypatch.setattr(e2e, "DEADLINE_S", 120)
    before = len(fake.state.requests)
    fake.fail("anthropic", "overloaded", times=2)
    run, result = _run(dev_on_fakes, "anthropic", "What time is it?", f"e2e-fb-{tmp_path.name}")
    assert result["status"] == "completed", result
    # The revert is the worker's next append after turn_completed (which completed the run).
    deadline = time.monotonic() + 20
    while (kinds := types(timeline := dev_on_fakes.timeline(run["thread_id"])))[-1] != "settings_changed":
        assert time.monotonic() < deadline, kinds
        time.sleep(0.2)
    assert kinds[2:] == [
        "model_request",
        "model_attempt_abandoned",
        "retry_scheduled",
        "model_request",
        "model_attempt_abandoned",
        "settings_changed",
        "model_request",
        "model_response",
        "tool_call",
        "permission_decision",
        "tool_result",
        "model_request",
        "model_response",
        "turn_completed",
        "settings_changed",
    ], kinds
    fb, revert = (e for e in timeline if e["type"] == "settings_changed")
    assert fb["actor"] == {"kind": "host"} and fb["data"]["reason"] == "fallback"
    assert fb["data"]["settings"]["model"]["provider"] == "bedrock"
    assert fb["data"]["settings"]["reasoning_carryover"] == "omit_prior"
    assert (
        revert["data"]["reason"] == "revert"
        and revert["data"]["settings"]["model"]["provider"] == "anthropic"
    )
    assert revert["data"]["cause_event_id"] == fb["event_id"]
    assert _sent(fake, before) == ["anthropic", "anthropic", "bedrock", "bedrock"]
    # The next turn is on the primary again.
    before = len(fake.state.requests)
    again, result = _run(
        dev_on_fakes, "anthropic", "Say hi", f"e2e-fb2-{tmp_path.name}", thread_id=run["thread_id"]
    )
    assert result["status"] == "completed", result
    assert _sent(fake, before) == ["anthropic"]
    _verify(dev_on_fakes, run["branch_id"], tmp_path)


def test_post_settings_switches_the_thread_to_another_provider(
    dev_on_fakes: Dev, fake: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An OpenAI thread switched by POST …/settings to its Anthropic fallback model: the host
    takes the adapter from that model's factory, and the next request renders for Anthropic
    (its history — OpenAI's call ids and results — goes to the Messages API)."""
    monkeypatch.setattr(e2e, "DEADLINE_S", 120)
    dev = dev_on_fakes
    run, result = _run(dev, "openai", "What time is it?", f"e2e-sw-{tmp_path.name}")
    assert result["status"] == "completed", result
    tid = run["thread_id"]
    status, body, _ = dev.call(
        "POST",
        f"/v1/threads/{tid}/settings",
        {"model": {"provider": "anthropic", "name": "claude-sonnet-4-5"}},
    )
    assert status == 200, body
    before = len(fake.state.requests)
    again, result = _run(dev, "openai", "What time is it now?", f"e2e-sw2-{tmp_path.name}", thread_id=tid)
    assert result["status"] == "completed", result
    sent = fake.state.requests[before:]
    assert [r["provider"] for r in sent] == ["anthropic", "anthropic"]
    assert sent[0]["body"]["model"] == "claude-sonnet-4-5"
    # the first turn's OpenAI tool call went along, paired with its result
    first_call = next(e for e in dev.timeline(tid) if e["type"] == "tool_call")["data"]["call_id"]
    assert first_call in json.dumps(sent[0]["body"]["messages"])
    changed = next(e for e in dev.timeline(tid) if e["type"] == "settings_changed")["data"]
    assert changed["reason"] == "user"
    assert changed["settings"]["adapter"] == {"name": "anthropic", "settings": {}, "version": "1"}
    _verify(dev, run["branch_id"], tmp_path)
