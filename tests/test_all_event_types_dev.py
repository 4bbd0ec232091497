"""Issue 17's acceptance through one `threads-aws dev` (a subprocess with a state dir, over real
HTTP), driven the way a user would: the routes, the demo model's commands, the bundled agents,
the provider fakes (OpenAI, Anthropic), the Slack fake, the demo MCP server, the CLI. The union
of the event types in every log it wrote is the contract's 53, each in its real situation, and
every one of those logs (each branch of each thread, children, handoff targets, forks) exports,
re-imports, reduces, re-renders every request (`render.verify_requests`) and matches its
projections as the host serves them.

The recipes are those of the focused tests (test_e2e_gateway, test_client_gateway,
test_workspace_e2e, test_subagents_e2e, test_teams_e2e, test_context_edits_dev, test_mcp_e2e,
test_channel_e2e, test_provider_e2e, test_tools_e2e, test_recover_crash, test_log_repair, the
deferred, park-TTL and schedule tests), run side by side on the one server. Three situations
need a dead worker or a torn file, as they do in production: a `kill -9` (the OpenAI answer in
flight → `model_response_recovered`; a Lambda tool's effect begun → `effect_unknown` +
`effect_resolved`) with a restart on the same state dir, and a torn export imported back with
`threads-aws log import --repair` (`log_repaired`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from helpers.all_events import (
    READER,
    agents_file,
    call_ok,
    contract_event_types,
    kinds,
    round_trip,
    settle,
    start,
    wait_type,
)
from helpers.dev_process import ALICE, DevProcess, dev_process, wait_until
from helpers.shared import needs
from threads_aws_dev.fakes import slack as fs
from threads_aws_dev.fakes.models import FakeServer
from threads_aws_dev.fakes.slack import FakeSlack

LEASE_MS = 5000  # a dead worker's lease lapses in seconds (RUN_STEP_LEASE_TTL_MS)
SECRET, TEAM = "all-events-signing-secret", "T0ALL"
DROP = ("AWS_", "ANTHROPIC_", "OPENAI_", "AGENTS_FILE", "CHANNELS_FILE")
Threads = list[tuple[str, str]]  # (thread_id, token) of the threads a recipe started


# ------------------------------------------------------------------ the recipes (side by side)


def plain_then_mode_and_settings(dev: DevProcess) -> Threads:
    run = start(dev, "hello there")
    settle(dev, run)
    t = run["thread_id"]
    call_ok(dev, "POST", f"/v1/threads/{t}/mode", {"mode": "plan"})
    call_ok(dev, "POST", f"/v1/threads/{t}/settings", {"model": {"provider": "demo", "name": "demo-2"}})
    dev.seen["plain"] = run
    return [(t, ALICE)]


def approvals_granted_with_a_rule_and_denied(dev: DevProcess) -> Threads:
    out = []
    for text, decision in (("note: buy milk", "grant"), ("note: sell the car", "deny")):
        run = start(dev, text)
        assert settle(dev, run, "parked")["reason"] == "awaiting_approval"
        t = run["thread_id"]
        (pending,) = call_ok(dev, "GET", f"/v1/threads/{t}/approvals")
        body: dict[str, Any] = {"decision": decision}
        if decision == "grant":
            body["remember_rule"] = pending["suggested_rules"][0]
        call_ok(dev, "POST", f"/v1/threads/{t}/approvals/{pending['challenge_id']}", body)
        settle(dev, run)
        out.append((t, ALICE))
    return out


def todos_hook_and_cancel(dev: DevProcess) -> Threads:
    todo = start(dev, "todo: a; b")
    hook = start(dev, "exec: rm -rf notes")  # the demo agent's before_tool hook denies it
    settle(dev, todo)
    settle(dev, hook)
    parked = start(dev, "note: order pizza")
    settle(dev, parked, "parked")
    t = parked["thread_id"]
    call_ok(dev, "POST", f"/v1/threads/{t}/cancel")
    wait_until(lambda: kinds(dev.timeline(t))[-2:] == ["cancelled", "turn_completed"], 60, "the cancel")
    return [(r["thread_id"], ALICE) for r in (todo, hook, parked)]


def question_steered_and_stopped(dev: DevProcess) -> Threads:
    run = start(dev, "ask: tea or coffee?")
    settle(dev, run, "parked")
    t = run["thread_id"]
    call_ok(dev, "POST", f"/v1/threads/{t}/steer", {"text": "make it green tea"})
    call_ok(dev, "POST", f"/v1/threads/{t}/stop", {"reason": "enough for today"})
    call = next(e for e in dev.timeline(t) if e["type"] == "tool_call")
    call_ok(dev, "POST", f"/v1/threads/{t}/questions/{call['data']['call_id']}/answer", {"answer": "tea"})
    assert settle(dev, run, "failed")["error"]["message"] == "turn ended: interrupted"  # the stop
    return [(t, ALICE)]


def workspace_snapshot_and_fork(dev: DevProcess) -> Threads:
    run = start(dev, "write notes.txt: the original")
    settle(dev, run)
    t = run["thread_id"]
    (point,) = call_ok(dev, "GET", f"/v1/threads/{t}/fork-points")
    child = call_ok(dev, "POST", f"/v1/threads/{t}/forks", {"event_id": point["event_id"]})["branch_id"]
    settle(dev, start(dev, "read notes.txt", thread_id=t, branch_id=child))
    return [(t, ALICE)]


def deferred_call_with_a_heartbeat(dev: DevProcess) -> Threads:
    # The default heartbeat_ms (20 s) passes while it runs, with a margin for the queue latency
    # of a loaded host (the recipes run side by side): the schedules take as long anyway.
    run = start(dev, "later 50000: slow")
    settle(dev, run)
    return [(run["thread_id"], ALICE)]


def park_escalated_then_expired(dev: DevProcess) -> Threads:
    run = start(dev, "note: call dad", agent="demo-ttl")  # its approvals expire after 20 s
    settle(dev, run, "parked")
    t = run["thread_id"]
    (pending,) = call_ok(dev, "GET", f"/v1/threads/{t}/approvals")
    wait_type(dev, t, "park_escalated", timeout=270)
    path = f"/v1/threads/{t}/approvals/{pending['challenge_id']}"
    status, body, _ = dev.call("POST", path, {"decision": "grant"})
    assert status == 409 and body["error"]["code"] == "approval_expired", (status, body)
    wait_until(lambda: dev.timeline(t)[-1]["type"] == "turn_completed", 180, "the denied run")
    return [(t, ALICE)]


def subagents_and_handoff(dev: DevProcess) -> Threads:
    bg = start(dev, "bg: demo: time")
    handoff = start(dev, "handoff: demo")
    settle(dev, bg)
    settle(dev, handoff, "handed_off")
    return [(bg["thread_id"], ALICE), (handoff["thread_id"], ALICE)]


def team(dev: DevProcess) -> Threads:
    run = start(dev, "team: demo-team: write the spec; build it", agent="demo-team")
    settle(dev, run)
    return [(run["thread_id"], ALICE)]


def context_edit_structured_output_and_mcp(dev: DevProcess) -> Threads:
    tidy = start(dev, "time", agent="demo-tidy")
    settle(dev, tidy)
    settle(dev, start(dev, "time", agent="demo-tidy", thread_id=tidy["thread_id"]))
    city = start(dev, "describe Lisbon", agent="demo-structured")
    mcp = start(dev, 'mcp: mcp__demo__lookup_rate {"currency": "GBP"}', agent="demo-tools")
    settle(dev, city)
    settle(dev, mcp)
    return [(r["thread_id"], ALICE) for r in (tidy, city, mcp)]


def limits(dev: DevProcess) -> Threads:
    budget = start(dev, "todo: a; b", agent="demo-limits", budget={"max_model_requests": 1})
    blocked = start(dev, "word " * 2500, agent="demo-limits")  # more than the 2,000-token window
    settle(dev, budget, None)
    settle(dev, blocked, None)
    first = start(dev, "lorem ipsum dolor sit amet " * 8, agent="demo-limits")
    settle(dev, first)
    t = first["thread_id"]
    for _ in range(15):  # a long conversation: compacted at 90 % of the window
        settle(dev, start(dev, "lorem ipsum dolor sit amet " * 8, agent="demo-limits", thread_id=t))
        if "compacted" in kinds(dev.timeline(t)):
            break
    return [(r["thread_id"], ALICE) for r in (budget, blocked, first)]


def anthropic_retry_and_failed_compaction(dev: DevProcess) -> Threads:
    fake: FakeServer = dev.seen["fake"]
    fake.fail("anthropic", "rate_limited", retry_after_s=1)
    retried = start(dev, "hello", agent="anthropic")
    settle(dev, retried)
    # A first turn big enough to be compacted, then the provider refuses twice as too long: the
    # turn's request and the compaction's (in whichever order the window makes them).
    first = start(dev, "lorem ipsum dolor sit amet " * 110, agent="anthropic-limits")
    settle(dev, first)
    fake.fail("anthropic", "prompt_too_long", times=2)
    settle(dev, start(dev, "and now?", agent="anthropic-limits", thread_id=first["thread_id"]))
    return [(retried["thread_id"], ALICE), (first["thread_id"], ALICE)]


def schedules_fired_and_skipped(dev: DevProcess) -> Threads:
    idle = start(dev, "hello")
    busy = start(dev, "ask: which day?")  # its turn stays open: an occurrence then is an overlap
    settle(dev, idle)
    settle(dev, busy, "parked")
    ids = {}
    for run in (idle, busy):
        t = run["thread_id"]
        body = {"cron": "* * * * *", "input": "the scheduled check"}
        ids[t] = call_ok(dev, "POST", f"/v1/threads/{t}/schedules", body)["schedule_id"]
    wait_type(dev, idle["thread_id"], "schedule_fired", timeout=270)
    wait_type(dev, busy["thread_id"], "schedule_skipped", timeout=270)
    for t, sid in ids.items():
        call_ok(dev, "DELETE", f"/v1/threads/{t}/schedules/{sid}")
    call = next(e for e in dev.timeline(busy["thread_id"]) if e["type"] == "tool_call")
    t = busy["thread_id"]
    call_ok(dev, "POST", f"/v1/threads/{t}/questions/{call['data']['call_id']}/answer", {"answer": "Monday"})
    wait_until(lambda: dev.timeline(t)[-1]["type"] == "turn_completed", 180, "the answered turn")
    wait_until(lambda: dev.timeline(idle["thread_id"])[-1]["type"] == "turn_completed", 180, "the fired run")
    return [(idle["thread_id"], ALICE), (t, ALICE)]


def slack_message(dev: DevProcess) -> Threads:
    slack: FakeSlack = dev.seen["slack"]
    ts, now = "1790000100.000100", int(time.time())
    ev = fs.message_event("C1", "U1", "hello from slack", ts)
    signed = fs.signed_json(
        SECRET, fs.event_callback(ev, team_id=TEAM, event_id="EvAll1", event_time=now), timestamp=now
    )
    req = urllib.request.Request(
        dev.url + "/channels/slack/events", data=signed.body, headers=dict(signed.headers)
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.status == 200
    row = wait_until(
        lambda: next((r for r in dev.inbox_rows() if r.item_key == f"C1:{ts}"), None), 60, "the row"
    )
    wait_until(lambda: [m for m in slack.bot_messages("C1") if m.get("thread_ts") == ts], 180, "the reply")
    wait_until(
        lambda: dev.timeline(row.thread_id, READER)[-1]["type"] == "tool_result", 180, "the send settled"
    )
    return [(row.thread_id, READER)]


RECIPES: list[Callable[[DevProcess], Threads]] = [
    schedules_fired_and_skipped,  # the longest (a minute boundary): first
    deferred_call_with_a_heartbeat,
    park_escalated_then_expired,
    limits,
    anthropic_retry_and_failed_compaction,
    plain_then_mode_and_settings,
    approvals_granted_with_a_rule_and_denied,
    todos_hook_and_cancel,
    question_steered_and_stopped,
    workspace_snapshot_and_fork,
    subagents_and_handoff,
    team,
    context_edit_structured_output_and_mcp,
    slack_message,
]


# ------------------------------------------------------------------ kill -9, then a torn import


def in_flight_at_a_kill(dev: DevProcess, fake: FakeServer) -> tuple[Threads, dict[str, str]]:
    """An OpenAI answer in flight (its provider id recorded) and a Lambda tool's effect begun
    (its ledger row written), then the process dies."""
    fake.state.hang_s = 120.0
    fake.fail("openai", "hang")
    recover = start(dev, "hello there", agent="openai-recover")
    ddb = dev.client("dynamodb")
    billed = lambda: [r for r in fake.state.requests if r["path"] == "/v1/responses"]  # noqa: E731
    wait_until(billed, 180, "the request to reach OpenAI")
    bid, rid = billed()[0]["body"]["metadata"]["client_request_id"].split(":")
    key = {"pk": {"S": f"PROVREQ#{bid}"}, "sk": {"S": rid}}
    table_name = dev.env["STATE_TABLE"]
    wait_until(lambda: ddb.get_item(TableName=table_name, Key=key).get("Item"), 90, "the provider id")
    args = {"amount_cents": 1250, "memo": "lunch", "delay_ms": 3000}
    tool = start(dev, "lambda: add_expense " + json.dumps(args))
    settle(dev, tool, "parked")
    (pending,) = call_ok(dev, "GET", f"/v1/threads/{tool['thread_id']}/approvals")
    call_ok(
        dev,
        "POST",
        f"/v1/threads/{tool['thread_id']}/approvals/{pending['challenge_id']}",
        {"decision": "grant"},
    )
    (table,) = [t for t in ddb.list_tables()["TableNames"] if t.endswith("-tool-example-table")]
    wait_until(lambda: ddb.scan(TableName=table)["Items"], 90, "the tool's ledger row")
    # at once: the tool sleeps 3 s before it answers
    dev.proc.send_signal(signal.SIGKILL)
    assert dev.proc.wait(timeout=30) == -signal.SIGKILL
    return [(recover["thread_id"], ALICE), (tool["thread_id"], ALICE)], {"recover": recover["run_id"]}


def torn_export(dev: DevProcess, tmp: Path) -> tuple[Threads, Path]:
    """A user's export whose last line was cut (no head checkpoint, no final newline), of a
    thread deleted since."""
    run = start(dev, "keep this one")
    settle(dev, run)
    out = tmp / "torn.jsonl"
    subprocess.run(
        [*CLI, "export", "--branch", run["branch_id"], "-o", str(out)],
        env=cli_env(dev),
        check=True,
        timeout=60,
    )
    lines = out.read_bytes().rstrip(b"\n").split(b"\n")[:-1]  # without the head checkpoint
    out.write_bytes(b"\n".join(lines))  # and the last event's newline cut off
    status, body, _ = dev.call("DELETE", f"/v1/threads/{run['thread_id']}")
    assert status == 204, body
    return [(run["thread_id"], ALICE)], out


def torn_import(dev: DevProcess, path: Path) -> None:
    """The torn export imported back with the CLI: the tail is dropped, kept, and repaired.
    (After the restart: a host that served the deleted branch keeps its view cached by branch
    and seq, and the repaired log has the same ids and head seq as the one deleted.)"""
    args = [*CLI, "import", str(path), "--tenant", "local", "--repair"]
    done = subprocess.run(args, env=cli_env(dev), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "log_repaired" in done.stdout, done.stdout + done.stderr


CLI = [sys.executable, "-m", "threads_aws_dev", "log"]


def cli_env(dev: DevProcess) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("AWS_")}, **dev.env}


# ------------------------------------------------------------------ the test


def every_log(dev: DevProcess, roots: Threads) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Each branch of each thread (roots, their subagents and team members, handoff targets),
    round-tripped: (thread_id, branch_id) -> its re-imported events."""
    logs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    todo = list(roots)
    while todo:
        t, token = todo.pop()
        for branch in call_ok(dev, "GET", f"/v1/threads/{t}/branches", token=token):
            b = branch["branch_id"]
            if (t, b) in logs:
                continue
            events = logs[(t, b)] = round_trip(dev, t, b, token)
            for e in events:
                child = e["data"].get("child_thread_id") if e["type"] == "agent_spawned" else None
                target = e["data"].get("to_thread_id") if e["type"] == "handoff" else None
                todo += [(c, token) for c in (child, target) if c and all(c != x for x, _ in logs)]
    return logs


@needs
def test_every_event_type_of_the_contract_is_produced_live_through_dev(tmp_path: Path) -> None:
    fake = FakeServer().start()
    slack = FakeSlack(tokens=["xoxb-all"]).start()
    channels = {
        "installations": [
            {
                "channel": "slack",
                "installation_id": TEAM,
                "tenant": "acme",
                "agent": "demo",
                "secrets": {"signing_secret": {"value": SECRET}, "bot_token": {"value": "xoxb-all"}},
            }
        ]
    }
    (tmp_path / "channels.json").write_text(json.dumps(channels))
    env = {
        "AGENTS_FILE": str(agents_file(tmp_path)),
        "CHANNELS_FILE": str(tmp_path / "channels.json"),
        "SLACK_API_URL": slack.url,
        "OPENAI_API_KEY": "sk-fake",
        "OPENAI_BASE_URL": fake.url + "/v1",
        "ANTHROPIC_API_KEY": "sk-ant-fake",
        "ANTHROPIC_BASE_URL": fake.url,
        "RUN_STEP_LEASE_TTL_MS": str(LEASE_MS),
    }
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    try:
        with dev_process(tmp_path, env, drop_env=DROP) as dev:
            dev.seen.update(fake=fake, slack=slack)
            with ThreadPoolExecutor(max_workers=len(RECIPES)) as pool:
                futures = {r.__name__: pool.submit(r, dev) for r in RECIPES}
                failed = {n: repr(f.exception()) for n, f in futures.items() if f.exception()}
                assert not failed, failed
                roots = [pair for f in futures.values() for pair in f.result()]
            timings["recipes"] = time.monotonic() - t0
            torn, torn_path = torn_export(dev, tmp_path)
            killed, runs = in_flight_at_a_kill(dev, fake)
        with dev_process(tmp_path, env, drop_env=DROP) as dev:  # the same state dir
            recover_tid, tool_tid = killed[0][0], killed[1][0]
            settle(dev, {"thread_id": recover_tid, "run_id": runs["recover"]})
            recovered = kinds(dev.timeline(recover_tid))
            assert recovered[-2:] == ["model_response_recovered", "turn_completed"], recovered
            assert len([r for r in fake.state.requests if r["path"] == "/v1/responses"]) == 1  # not re-sent
            wait_type(dev, tool_tid, "effect_resolved", timeout=360)
            wait_until(lambda: dev.timeline(tool_tid)[-1]["type"] == "turn_completed", 360, "the tool's turn")
            timings["kill_9"] = time.monotonic() - t0 - timings["recipes"]
            torn_import(dev, torn_path)
            roots += killed + torn
            logs = every_log(dev, roots)
            timings["round_trips"] = time.monotonic() - t0 - timings["recipes"] - timings["kill_9"]
    finally:
        fake.stop()
        slack.stop()
    seen = {e["type"] for events in logs.values() for e in events}
    expected = contract_event_types()
    assert len(expected) == 53
    assert seen == expected, f"missing {sorted(expected - seen)}, unknown {sorted(seen - expected)}"
    print(f"\n{len(logs)} logs, {sum(map(len, logs.values()))} events; seconds: {timings}")
