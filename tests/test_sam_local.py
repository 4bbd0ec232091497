"""`threads-aws dev --aws-only`: the emulated AWS for `sam local` and its `--env-vars` file.

No Docker here, so a SAM container is stood in for by what SAM gives one: a fresh process whose
environment is the function's entry of the file (SAM sets exactly the template's declared
variables from it) plus credentials and region."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from threads_aws_dev.local.sam import ENDPOINT_VAR, parse_template, sam_env_vars

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "template.yaml"


def test_env_vars_file_covers_every_function_with_its_declared_variables():
    tpl = parse_template(TEMPLATE)
    local, seen = "http://127.0.0.1:4566", "http://host.docker.internal:4566"
    physical = {
        "EventsTable": "t-events",
        "StateTable": "t-state",
        "ArtifactsBucket": "t-artifacts",
        "RunStepQueue": f"{local}/123456789012/t-run-step.fifo",
        "RunStepDLQ": f"{local}/123456789012/t-run-step-dlq.fifo",
        "ChannelInboxQueue": f"{local}/123456789012/t-inbox",
        "ChannelInboxDLQ": f"{local}/123456789012/t-inbox-dlq",
        "RunStepTimerQueue": f"{local}/123456789012/t-run-step-timer",
        "DeferredCallQueue": f"{local}/123456789012/t-deferred-call",
        "ToolExampleTable": "t-tool-example",
    }
    env, warnings = sam_env_vars(tpl, physical, "us-east-1", endpoint=seen, local_endpoint=local)
    assert warnings == []
    assert set(env) == set(tpl.functions) and len(env) >= 16
    for lid, fn in tpl.functions.items():
        e = env[lid]
        assert set(e) == set(fn.environment), lid  # exactly what SAM will set
        assert e[ENDPOINT_VAR] == seen
        assert (e["EVENTS_TABLE"], e["STATE_TABLE"], e["ARTIFACTS_BUCKET"]) == (
            "t-events",
            "t-state",
            "t-artifacts",
        )
        assert e["RUN_STEP_QUEUE_URL"] == f"{seen}/123456789012/t-run-step.fifo"
        assert e["CHANNEL_INBOX_QUEUE_URL"] == f"{seen}/123456789012/t-inbox"
        assert e["STAGE"] == tpl.parameters["Stage"]
        assert not any("Ref" in v or "${" in v for v in e.values()), e
    assert env["SubscribeRunFunction"]["SSE_WAIT_MS"] == "20000"


def test_dev_host_keeps_its_own_endpoint_over_the_templates_empty_one(aws):
    from threads_aws_dev.local.sam import function_env

    env, _ = function_env(parse_template(TEMPLATE), aws.resources.physical, "us-east-1")
    assert ENDPOINT_VAR not in env  # `dev` sets AWS_ENDPOINT_URL to its moto


def _start(tmp: Path) -> tuple[subprocess.Popen[str], list[str]]:
    env_file = tmp / "env.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")
    cmd = [
        sys.executable, "-m", "threads_aws_dev", "dev", "--aws-only", "--aws-port", "0",
        "--aws-endpoint-host", "127.0.0.1", "--env-vars", str(env_file), "--ephemeral",
    ]  # fmt: skip
    help_out = subprocess.run(
        [sys.executable, "-m", "threads_aws_dev", "dev", "--help"], capture_output=True, text=True
    )
    if "--ephemeral" not in help_out.stdout:
        cmd.remove("--ephemeral")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines: list[str] = []
    deadline = time.monotonic() + 120
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        if line.startswith("linux:"):  # the banner's last line
            return proc, lines
    proc.kill()
    raise AssertionError(f"--aws-only did not start: {lines} {(tmp / 'stderr.log').read_text()}")


def _as_container(fn_env: dict[str, str], name: str, event: dict[str, Any]) -> dict[str, Any]:
    """Invoke functions/<name>/app.py the way a SAM container would: only the file's variables."""
    env = {"PATH": os.environ.get("PATH", ""), **fn_env}
    env.update(AWS_ACCESS_KEY_ID="sam", AWS_SECRET_ACCESS_KEY="sam", AWS_DEFAULT_REGION="us-east-1")
    code = (
        "import json, sys, types; sys.path.insert(0, sys.argv[1]); import app; "
        "ctx = types.SimpleNamespace(function_name='f', memory_limit_in_mb=512, aws_request_id='r', "
        "invoked_function_arn='arn:aws:lambda:us-east-1:123456789012:function:f', "
        "get_remaining_time_in_millis=lambda: 25000); "
        "print(json.dumps(app.handler(json.loads(sys.stdin.read()), ctx)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(REPO / "functions" / name)],
        input=json.dumps(event), capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def test_aws_only_serves_sam_containers_and_runs_the_worker(tmp_path: Path):
    proc, banner = _start(tmp_path)
    try:
        ready = next(x for x in banner if x.startswith("ready "))
        endpoint = ready.split()[1]
        token = next(x for x in banner if x.startswith("token ")).split()[1]
        assert any(x.startswith("try: sam build && sam local start-api --env-vars") for x in banner)
        env = json.loads((tmp_path / "env.json").read_text())
        tpl = parse_template(TEMPLATE)
        assert set(env) == set(tpl.functions)
        port = endpoint.rsplit(":", 1)[1]
        assert all(e[ENDPOINT_VAR] == f"http://127.0.0.1:{port}" for e in env.values())

        # The authorizer's container accepts the printed key; start_run's starts a run.
        auth = json.loads((REPO / "events" / "authorizer.json").read_text())
        auth["headers"]["Authorization"] = f"Bearer {token}"
        allowed = _as_container(env["AuthorizerFunction"], "authorizer", auth)
        assert allowed["policyDocument"]["Statement"][0]["Effect"] == "Allow"
        start = json.loads((REPO / "events" / "start_run.json").read_text())
        start["requestContext"]["authorizer"] = {**allowed["context"], "principalId": allowed["principalId"]}
        accepted = _as_container(env["StartRunFunction"], "start_run", start)
        assert accepted["statusCode"] == 202, accepted
        ids = json.loads(accepted["body"])

        # The worker in the --aws-only process takes the step from the queue: the turn completes.
        timeline = json.loads((REPO / "events" / "get_timeline.json").read_text())
        timeline["pathParameters"] = {"thread_id": ids["thread_id"]}
        timeline["requestContext"]["authorizer"] = start["requestContext"]["authorizer"]
        types: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            got = _as_container(env["GetTimelineFunction"], "get_timeline", timeline)
            assert got["statusCode"] == 200, got
            types = [e["event"]["type"] for e in json.loads(got["body"])["entries"]]
            if types and types[-1] == "turn_completed":
                break
            time.sleep(0.5)
        assert types[-1:] == ["turn_completed"], types
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    assert proc.returncode == 0, (tmp_path / "stderr.log").read_text()
