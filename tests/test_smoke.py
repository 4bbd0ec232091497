"""`threads-aws smoke`: the whole walkthrough against an ephemeral `threads-aws dev` (`--dev`, what
CI runs) passes every check and stops its server, and a key the host refuses fails with the
helpful line and a non-zero exit (against the same server, while the first runs: one dev start
per module). Each check has the smoke's own generous ceiling; nothing here asserts time. The
runner's pure parts (the ceiling and its stage, a failed run's hint, an unknown webhook URL,
the stack's outputs on moto) are checked in process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from threads_aws_dev import smoke, smoke_checks

REPO = Path(__file__).resolve().parents[1]
CHECK_NAMES = [name for name, _, _ in smoke_checks.CHECKS]
LINE = re.compile(r"^(PASS|FAIL|SKIP) ([a-z-]+): (.+) \((\d+\.\d) s\)$")
SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed, (\d+) skipped in \d+\.\d s$")


def _smoke(*args: str) -> subprocess.Popen[str]:
    # Never a real account's credentials: the smoke's dev server is moto only.
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return subprocess.Popen(
        [sys.executable, "-m", "threads_aws_dev", "smoke", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )


@pytest.fixture(scope="module")
def runs() -> dict[str, tuple[int, str, str]]:
    """One ephemeral dev for both: `smoke --dev` starts it, and while its checks run, a smoke
    with a refused key runs against the same server (it creates nothing: every check behind
    the key skips; the forged webhooks touch no state)."""
    ok = _smoke("--dev")
    assert ok.stdout is not None
    first = ok.stdout.readline()
    m = re.match(r"dev: an ephemeral threads-aws dev at (http://127\.0\.0\.1:\d+) ", first)
    if m is None:
        ok.kill()
        pytest.fail(first + ok.communicate()[1])
    bad = _smoke("--url", m.group(1), "--key", "not-a-key")
    done: dict[str, tuple[int, str, str]] = {}
    out, err = bad.communicate(timeout=300)
    done["bad_key"] = (bad.returncode, out, err)
    out, err = ok.communicate(timeout=600)
    done["ok"] = (ok.returncode, first + out, err)
    return done


def _checks(out: str) -> dict[str, tuple[str, str]]:
    found = {}
    for line in out.splitlines():
        m = LINE.match(line)
        if m:
            found[m.group(2)] = (m.group(1), m.group(3))
    return found


def _pid_gone(out: str) -> bool:
    m = re.search(r"^dev: an ephemeral threads-aws dev at http://127\.0\.0\.1:\d+ \(pid (\d+)\)$", out, re.M)
    assert m, out
    try:
        os.kill(int(m.group(1)), 0)
    except ProcessLookupError:
        return True
    return False


def test_every_check_passes_against_dev(runs: dict[str, tuple[int, str, str]]) -> None:
    code, out, err = runs["ok"]
    checks = _checks(out)
    assert list(checks) == CHECK_NAMES, out + err
    failed = {name: v for name, v in checks.items() if v[0] != "PASS"}
    assert not failed, out + err
    assert checks["webhook-slack"][1] == "a bad signature is refused: 401 unverified"
    assert "Link rel=next" in checks["timeline"][1]
    last = out.splitlines()[-1]
    assert SUMMARY.match(last) and last.startswith(f"{len(CHECK_NAMES)} passed, 0 failed, 0 skipped"), out
    assert code == 0, out + err
    assert _pid_gone(out), "the ephemeral dev server outlived the smoke"


def test_a_refused_key_fails_with_the_way_out(runs: dict[str, tuple[int, str, str]]) -> None:
    code, out, err = runs["bad_key"]
    checks = _checks(out)
    assert checks["openapi"][0] == "PASS", out + err  # public: the URL itself is right
    status, detail = checks["auth"]
    assert status == "FAIL" and "401 unauthenticated" in detail, out
    assert "the key is not valid for this stack: create one with" in detail
    assert "threads-aws keys create" in detail
    # Everything behind the key says which check to look at first, not a chain of skips.
    for name in ("start", "stream", "approval", "threads", "fork", "cancel"):
        assert checks[name] == ("SKIP", "needs auth (fail)"), out
    # The function URLs need no key: still checked.
    assert checks["webhook-whatsapp"][0] == "PASS", out
    m = SUMMARY.match(out.splitlines()[-1])
    assert m and m.group(2) == "1", out
    assert code == 1


def _ctx(url: str = "https://abc.execute-api.us-east-1.amazonaws.com/dev") -> smoke.Ctx:
    return smoke.Ctx(smoke.Target(url, "k"), client=None)


def test_a_check_past_its_ceiling_fails_naming_its_stage() -> None:
    release = threading.Event()

    def stuck(ctx: smoke.Ctx) -> str:
        ctx.at("waiting on the run's event stream: last event user_input (seq 2)")
        release.wait(30)
        return "late"

    try:
        res = smoke.run_check(_ctx(), "stream", stuck, ceiling=0.2)
    finally:
        release.set()
    assert res.status == "FAIL"
    stage = "waiting on the run's event stream: last event user_input (seq 2)"
    assert res.detail == f"timed out after 0.2 s {stage}"


def test_a_failed_run_names_its_error_and_what_to_check() -> None:
    outcome: dict[str, Any] = {
        "status": "failed",
        "thread_id": "t",
        "branch_id": "b",
        "error": {"code": "model_unavailable", "message": "no answer from the provider"},
    }
    with pytest.raises(smoke.Failure) as exc:
        smoke_checks.expect(outcome, "completed")
    assert str(exc.value).startswith("the run failed: model_unavailable: no answer from the provider")
    assert "AnthropicApiKeySecret" in str(exc.value) and "Use a real model" in str(exc.value)


def test_unknown_webhook_urls_skip_with_where_to_find_them() -> None:
    import argparse

    args = argparse.Namespace(slack_url=None, whatsapp_url=None, stack=None, region=None, agent="demo")
    target = smoke.target_of(args, "https://abc.execute-api.us-east-1.amazonaws.com/dev/", "k")
    assert target.url.endswith("/dev") and target.slack_url is None
    ctx = smoke.Ctx(target, client=None)
    res = smoke.run_check(ctx, "webhook-slack", smoke_checks.check_slack, ceiling=5)
    assert res.status == "SKIP"
    assert "pass --slack-url or --stack NAME (output SlackWebhookUrl)" in res.detail
    # Against a local dev the function URLs are on the gateway's own origin.
    local = smoke.target_of(args, "http://127.0.0.1:8787/", "k")
    assert local.whatsapp_url == "http://127.0.0.1:8787/channels/whatsapp/events"


def test_stack_outputs_give_the_urls(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--stack NAME`: HostApiUrl and the webhook URLs from the stack's outputs (CloudFormation
    on moto); a stack that does not exist is a one-line usage error."""
    import argparse
    import json

    import boto3
    from moto import mock_aws
    from threads_aws_dev.cli import CliError

    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(var, "testing")
    outputs = {
        "HostApiUrl": "https://abc.execute-api.eu-west-1.amazonaws.com/dev",
        "SlackWebhookUrl": "https://s.lambda-url.eu-west-1.on.aws/channels/slack/events",
        "WhatsAppWebhookUrl": "https://w.lambda-url.eu-west-1.on.aws/channels/whatsapp/events",
    }
    template = {
        "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {k: {"Value": v} for k, v in outputs.items()},
    }
    args = argparse.Namespace(
        slack_url=None, whatsapp_url=None, stack="threads-aws", region="eu-west-1", agent="demo"
    )
    with mock_aws():
        cfn = boto3.client("cloudformation", region_name="eu-west-1")
        cfn.create_stack(StackName="threads-aws", TemplateBody=json.dumps(template))
        target = smoke.target_of(args, None, "k")
        assert (target.url, target.slack_url, target.whatsapp_url) == tuple(outputs.values())
        args.stack = "not-deployed"
        with pytest.raises(CliError, match="smoke --stack not-deployed: .*does not exist"):
            smoke.target_of(args, None, "k")


def test_usage_errors_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from threads_aws_dev.cli import main

    monkeypatch.delenv("THREADS_URL", raising=False)
    monkeypatch.delenv("THREADS_TOKEN", raising=False)
    assert main(["smoke"]) == 2
    assert "give --url and --key" in capsys.readouterr().err
    assert main(["smoke", "--dev", "--stack", "threads-aws"]) == 2  # starts nothing
    assert "--dev checks a local host" in capsys.readouterr().err
