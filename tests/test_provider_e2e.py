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
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import e2e
from helpers.e2e import TEMPLATE, Dev, types
from threads_aws.fakes.models import FakeServer

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeServer]:
    srv = FakeServer().start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def dev_on_fakes(tmp_path_factory: pytest.TempPathFactory, fake: FakeServer) -> Iterator[Dev]:
    tmp = tmp_path_factory.mktemp("e2e-providers")
    exe = Path(sys.executable).with_name("threads-aws")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "threads_aws"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "ANTHROPIC_", "OPENAI_"))}
    env.pop("AGENTS_FILE", None)
    env.update(fake.env(), SSE_WAIT_MS="1500", SSE_POLL_MS="50", SSE_RETRY_MS="100")
    log = open(tmp / "dev.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [*cmd, "dev", "--port", "0", "--dev-tokens", "--template", str(TEMPLATE)]
        + ["--state-dir", str(tmp / "state")],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        env=env,
        cwd=REPO,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline().strip()
        assert first.startswith("ready http://127.0.0.1:"), first + (tmp / "dev.log").read_text()[-3000:]
        lines = [proc.stdout.readline().strip() for _ in range(4)]
        store = next(line for line in lines if line.startswith("store: "))
        store_env = dict(w.split("=", 1) for w in store.split()[1:] if "=" in w)
        yield Dev(first.split(" ", 1)[1], store_env, tmp, proc)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
        if proc.stdout:
            proc.stdout.close()


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
    cli = [sys.executable, "-m", "threads_aws", "log"]
    subprocess.run(
        [*cli, "export", "--branch", run["branch_id"], "-o", str(out)], env=env, check=True, timeout=60
    )
    verified = subprocess.run([*cli, "verify", str(out)], capture_output=True, text=True, timeout=60)
    assert verified.returncode == 0 and verified.stdout.startswith("ok "), verified.stderr
