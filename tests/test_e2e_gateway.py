"""The host end to end, over real HTTP, through `threads-aws dev` (moto, the API Gateway
emulation with the authorizer in front, the run-step worker fed by the SQS poller): runs that park
on an approval (grant, deny), ask_user answered, an unknown effect resolved, a cancel landing
while the worker waits in a model call, settings and mode changes in the timeline, the exported
branch verifying with `threads-aws log verify`, and every /v1 route's tenant scope and auth.

One dev server for the module (a subprocess: its clients and caches never mix with other tests'
moto mocks). `--preload` installs two test hooks in it: the demo model holds a request containing
`[hold]` until the test releases it, and the note tool reports an unknown outcome for `[uncertain]`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import e2e
from helpers.e2e import DEADLINE_S, MALLORY, Dev, types

HOOKS = """\
import os, time
from pathlib import Path

from threads_aws.engine import demo_model, models, tools

HOOK_DIR = Path(os.environ["E2E_HOOK_DIR"])


class HoldingDemo(demo_model.DemoModel):
    # A request that contains [hold] (before any tool result) waits inside the model call until
    # the test writes <dir>/release-<word> (or 15 s pass); <dir>/held-<word> says it is waiting.
    def complete(self, request, *, settings, request_event_id, branch_id, **kw):
        text = request.decode()
        if "[hold]" in text and '"role":"tool"' not in text:
            held = HOOK_DIR / f"held-{branch_id}"
            held.write_text(request_event_id)
            release = HOOK_DIR / f"release-{branch_id}"
            deadline = time.monotonic() + 15
            while not release.exists() and time.monotonic() < deadline:
                time.sleep(0.02)
        return super().complete(
            request, settings=settings, request_event_id=request_event_id, branch_id=branch_id
        )


models.register_adapter("demo", HoldingDemo)
_note = tools.BUILTIN_EXECUTORS["note"]


def uncertain_note(args, tc):
    if "[uncertain]" in str(args.get("text", "")):
        raise tools.ToolUncertain("timeout")
    return _note(args, tc)


tools.BUILTIN_EXECUTORS["note"] = uncertain_note
"""


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dev]:
    tmp = tmp_path_factory.mktemp("e2e")
    hooks = tmp / "hooks.py"
    hooks.write_text(HOOKS)
    # With a state dir (the command's default mode): every flow here runs through the journal.
    with e2e.dev(tmp, {"E2E_HOOK_DIR": str(tmp)}, ["--preload", str(hooks)]) as d:
        yield d


def parked_run(
    dev: Dev, text: str
) -> tuple[dict[str, str], list[dict[str, Any]], int | None, dict[str, Any]]:
    run = dev.start(text)
    events, last, result = dev.stream(run["thread_id"], run["run_id"])
    return run, events, last, result


# ---------------------------------------------------------------- the flows


def test_approval_granted_then_resubscribe(dev: Dev) -> None:
    run, events, last, result = parked_run(dev, "note: buy milk")
    assert events[0]["type"] == "user_input" and events[0]["event_id"] == run["run_id"]
    assert result["status"] == "parked", result
    assert "approval_requested" in types(events)
    status, pending, _ = dev.call("GET", f"/v1/threads/{run['thread_id']}/approvals")
    assert status == 200 and len(pending) == 1
    (challenge,) = pending
    assert challenge["tool"] == "note" and challenge["input"] == {"text": "buy milk"}
    status, body, _ = dev.call(
        "POST", f"/v1/threads/{run['thread_id']}/approvals/{challenge['challenge_id']}", {"decision": "grant"}
    )
    assert status == 200 and body["event_id"], body
    more, _, result = dev.stream(run["thread_id"], run["run_id"], last_id=last)
    assert result["status"] == "completed", result
    assert more and more[0]["seq"] == last + 1  # type: ignore[operator]  # no gap, no duplicate
    assert "stored note" in json.dumps(result["output"])
    timeline = dev.timeline(run["thread_id"])
    assert types(timeline).count("effect_begin") == 1 and types(timeline).count("effect_commit") == 1
    status, pending, _ = dev.call("GET", f"/v1/threads/{run['thread_id']}/approvals")
    assert (status, pending) == (200, [])


def test_approval_denied(dev: Dev) -> None:
    run, events, _, result = parked_run(dev, "note: sell the car")
    assert result["status"] == "parked"
    (challenge,) = dev.call("GET", f"/v1/threads/{run['thread_id']}/approvals")[1]
    status, _, _ = dev.call(
        "POST",
        f"/v1/threads/{run['thread_id']}/approvals/{challenge['challenge_id']}",
        {"decision": "deny", "reason": "no"},
    )
    assert status == 200
    _, _, result = dev.stream(run["thread_id"], run["run_id"])
    assert result["status"] == "completed", result
    timeline = types(dev.timeline(run["thread_id"]))
    assert "approval_denied" in timeline and "effect_begin" not in timeline


def test_ask_user_answered(dev: Dev) -> None:
    run, events, _, result = parked_run(dev, "ask: which colour?")
    assert result["status"] == "parked", result
    call = next(e for e in events if e["type"] == "tool_call")
    assert call["data"]["name"] == "ask_user"
    status, body, _ = dev.call(
        "POST",
        f"/v1/threads/{run['thread_id']}/questions/{call['data']['call_id']}/answer",
        {"answer": "blue"},
    )
    assert status == 200, body
    _, _, result = dev.stream(run["thread_id"], run["run_id"])
    assert result["status"] == "completed" and "blue" in json.dumps(result["output"]), result


def test_unknown_effect_resolved(dev: Dev) -> None:
    run, _, last, result = parked_run(dev, "note: [uncertain] call the bank")
    (challenge,) = dev.call("GET", f"/v1/threads/{run['thread_id']}/approvals")[1]
    dev.call(
        "POST", f"/v1/threads/{run['thread_id']}/approvals/{challenge['challenge_id']}", {"decision": "grant"}
    )
    events, _, result = dev.stream(run["thread_id"], run["run_id"], last_id=last)
    assert result["status"] == "parked", result
    assert "effect_unknown" in types(events)
    parked = next(e for e in events if e["type"] == "parked")
    key = parked["data"]["address"]["id"]
    assert parked["data"]["address"]["kind"] == "effect"
    status, body, _ = dev.call(
        "POST", f"/v1/threads/{run['thread_id']}/parked/{key}/resolve", {"resolution": "assume_done"}
    )
    assert status == 200, body
    _, _, result = dev.stream(run["thread_id"], run["run_id"])
    assert result["status"] == "completed", result
    assert "effect_resolved" in types(dev.timeline(run["thread_id"]))


def test_cancel_while_the_worker_waits_on_the_model(dev: Dev) -> None:
    run = dev.start("note: [hold] order pizza")
    held = dev.hook_dir / f"held-{run['branch_id']}"
    deadline = time.monotonic() + DEADLINE_S
    while not held.exists():
        assert time.monotonic() < deadline, "the worker never reached the model call"
        time.sleep(0.02)
    status, body, _ = dev.call("POST", f"/v1/threads/{run['thread_id']}/cancel")  # not branch_busy
    assert status == 200, body
    (dev.hook_dir / f"release-{run['branch_id']}").write_text("go")
    events, _, result = dev.stream(run["thread_id"], run["run_id"])
    assert result["status"] == "cancelled", result
    kinds = types(dev.timeline(run["thread_id"]))
    after = kinds[kinds.index("cancel_requested") :]
    assert not {"effect_begin", "approval_requested"} & set(after), (
        after
    )  # nothing goes out after the barrier
    assert "effect_begin" not in kinds


def test_settings_and_mode_in_timeline_and_export_verifies(dev: Dev, tmp_path: Path) -> None:
    run, _, _, result = parked_run(dev, "hello there")
    assert result["status"] == "completed" and "hello there" in json.dumps(result["output"])
    tid = run["thread_id"]
    status, body, _ = dev.call("POST", f"/v1/threads/{tid}/mode", {"mode": "plan"})
    assert status == 200, body
    status, body, _ = dev.call(
        "POST", f"/v1/threads/{tid}/settings", {"model": {"provider": "demo", "name": "demo-2"}}
    )
    assert status == 200, body
    timeline = dev.timeline(tid)
    kinds = types(timeline)
    assert "mode_changed" in kinds and "settings_changed" in kinds
    assert next(e for e in timeline if e["type"] == "mode_changed")["data"]["to"] == "plan"
    # The branch as stored verifies with the offline CLI.
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("AWS_")}, **dev.env}
    out = tmp_path / "branch.jsonl"
    cli = [sys.executable, "-m", "threads_aws_dev", "log"]
    subprocess.run(
        [*cli, "export", "--branch", run["branch_id"], "-o", str(out)], env=env, check=True, timeout=60
    )
    verified = subprocess.run([*cli, "verify", str(out)], capture_output=True, text=True, timeout=60)
    assert verified.returncode == 0 and verified.stdout.startswith("ok "), verified.stderr


# ---------------------------------------------------------------- tenancy and auth

V1_ROUTES = [
    ("GET", "/v1/threads/{t}/runs/{r}/events", None),
    ("GET", "/v1/threads/{t}/timeline", None),
    ("GET", "/v1/threads/{t}/branches", None),
    ("GET", "/v1/threads/{t}/fork-points", None),
    ("POST", "/v1/threads/{t}/forks", {"event_id": "{r}"}),
    ("GET", "/v1/threads/{t}/approvals", None),
    ("POST", "/v1/threads/{t}/approvals/{u}", {"decision": "grant"}),
    ("POST", "/v1/threads/{t}/questions/call_x/answer", {"answer": "x"}),
    ("POST", "/v1/threads/{t}/parked/k1/resolve", {"resolution": "assume_done"}),
    ("POST", "/v1/threads/{t}/cancel", None),
    ("POST", "/v1/threads/{t}/settings", {"model": {"provider": "demo", "name": "demo-2"}}),
    ("POST", "/v1/threads/{t}/mode", {"mode": "plan"}),
    ("DELETE", "/v1/threads/{t}", None),
]


def test_every_route_is_tenant_scoped_and_authenticated(dev: Dev) -> None:
    run, _, _, _ = parked_run(dev, "note: keep out")  # parked: approvals etc. really exist
    t, r = run["thread_id"], run["run_id"]
    for method, template, body in V1_ROUTES:
        path = template.format(t=t, r=r, u=uuid.uuid4())
        if body is not None:
            body = json.loads(json.dumps(body).replace("{r}", r))
        status, got, _ = dev.call(method, path, body, token=MALLORY)
        assert status == 404 and got["error"]["code"] == "not_found", (method, path, status, got)
        for token in (None, "not-a-key", "dev:"):
            status, got, _ = dev.call(method, path, body, token=token)
            assert status == 401 and got["error"]["code"] == "unauthenticated", (
                method,
                path,
                token,
                status,
                got,
            )
    # POST /v1/runs continuing another tenant's thread: not_found; without a token: 401.
    key = {"Idempotency-Key": str(uuid.uuid4())}
    status, got, _ = dev.call(
        "POST", "/v1/runs", {"agent": "demo", "input": "x", "thread_id": t}, token=MALLORY, headers=key
    )
    assert status == 404 and got["error"]["code"] == "not_found", got
    status, got, _ = dev.call("POST", "/v1/runs", {"agent": "demo", "input": "x"}, token=None, headers=key)
    assert status == 401 and got["error"]["code"] == "unauthenticated"
