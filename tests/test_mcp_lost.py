"""An MCP call whose answer is lost: the server process killed mid-call, or the call timing out.
After `effect_begin` the outcome is unknown (`effect_unknown`), never an error result; the effect
class settles it (unguarded parks for a human; idempotent re-sends inside its dedup window)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
from helpers.engine import grant, make_ctx, of_type, run, say, types, verify_export
from test_compose_lambda import Crash, CrashingWriter
from test_mcp_tools import thread
from threads_aws.agents import parse_agents
from threads_aws_dev.local.demo_mcp import DemoMcp, free_port


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the demo MCP server exited"
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError("the demo MCP server did not listen")


@pytest.fixture
def server_process(monkeypatch):
    port = free_port()
    cmd = [sys.executable, "-m", "threads_aws_dev.local.demo_mcp", "--port", str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port, proc)
        monkeypatch.setenv("THREADS_DEMO_MCP_URL", f"http://127.0.0.1:{port}/mcp")
        yield proc
    finally:
        proc.kill()
        proc.wait(10)


def kill_when_dispatched(ctx, b: str, proc: subprocess.Popen[bytes]) -> threading.Thread:
    """Kill the server once the call's effect_begin is durable (the request is then in flight:
    the tool sleeps for seconds)."""

    def watch() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if any(e["type"] == "effect_begin" for e in ctx.writer.load(b).fold.events):
                time.sleep(0.5)
                proc.kill()
                return
            time.sleep(0.05)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def call(ctx, b: str, tool: str, **args: Any) -> None:
    say(ctx, b, f"mcp: mcp__demo__{tool} {json.dumps(args)}")


def test_server_killed_mid_call_is_unknown_and_an_unguarded_effect_parks(aws, server_process):
    ctx = make_ctx(aws)
    b = thread(ctx, allow=["mcp__demo__*"])
    call(ctx, b, "delete_record", key="r", delay_ms=20_000)
    watcher = kill_when_dispatched(ctx, b, server_process)
    t0 = time.monotonic()
    assert run(ctx, b).state == "parked"
    watcher.join(5)
    assert time.monotonic() - t0 < 15  # the lost connection is noticed, not waited out
    (unknown,) = of_type(ctx, b, "effect_unknown")
    assert unknown["data"]["reason"] == "transport_error"
    (park,) = of_type(ctx, b, "parked")
    assert park["data"]["address"]["kind"] == "effect" and park["data"]["reason"] == "effect_unknown"
    assert "tool_result" not in types(ctx, b) and "effect_commit" not in types(ctx, b)
    verify_export(ctx, b)


def test_server_killed_mid_call_idempotent_is_resent_inside_its_window(aws, server_process):
    ctx = make_ctx(aws)
    b = thread(ctx, allow=["mcp__demo__*"])
    call(ctx, b, "save_record", key="k", value="v", delay_ms=20_000)
    watcher = kill_when_dispatched(ctx, b, server_process)
    run(ctx, b)
    watcher.join(5)
    t = types(ctx, b)
    assert t.index("effect_begin") < t.index("effect_unknown") < t.index("effect_resolved")
    first = of_type(ctx, b, "effect_resolved")[0]["data"]
    assert (first["outcome"], first["by"]) == ("safe_to_retry", "provider_dedup")  # no park
    assert [e["data"]["attempt"] for e in of_type(ctx, b, "effect_begin")][:2] == [1, 2]
    assert "parked" not in t
    # The server is gone: the re-sends never reach it (not_sent), then the call closes.
    (res,) = of_type(ctx, b, "tool_result")
    assert res["data"]["origin"] == "not_executed" and res["data"]["is_error"]
    verify_export(ctx, b)


def test_a_call_past_its_timeout_is_unknown(aws):
    server = DemoMcp().start()
    try:
        agent_json = {
            "model": {"provider": "demo", "name": "demo-1"},
            "adapter": {"name": "demo", "version": "1"},
            "instructions": "",
            "permissions": {"allow": ["mcp__demo__*"]},
            "mcp_servers": {"demo": {"url": server.url, "timeout_ms": 1000}},
        }
        agent = parse_agents(json.dumps({"slow-tools": agent_json}))["slow-tools"]
        ctx = make_ctx(aws)  # a fresh context: its agents are its own
        ctx.agents = {**(ctx.agents or {}), "slow-tools": agent}
        b = thread(ctx, agent=agent)
        server.records["r"] = "v"
        call(ctx, b, "delete_record", key="r", delay_ms=4000)
        assert run(ctx, b).state == "parked"
        (unknown,) = of_type(ctx, b, "effect_unknown")
        assert unknown["data"]["reason"] == "timeout"
        verify_export(ctx, b)
    finally:
        server.stop()


def test_a_worker_crash_after_the_call_ran_commits_once(aws, monkeypatch):
    """The worker dies after the server applied save_record, before effect_commit: recovery
    finds the effect in doubt, re-sends inside the dedup window under the same effect key, and
    the server answers from its first application (the key rides in `_meta`)."""
    server = DemoMcp().start()
    try:
        monkeypatch.setenv("THREADS_DEMO_MCP_URL", server.url)
        ctx = make_ctx(aws)
        b = thread(ctx)
        call(ctx, b, "save_record", key="k", value="v")
        assert run(ctx, b).state == "parked"  # idempotent: asks under the default mode
        grant(ctx, b)
        crashing = make_ctx(aws, lease_ttl_ms=1000)
        crashing.writer = CrashingWriter(crashing.writer, 2, "before")  # 1 = effect_begin, 2 = commit
        with pytest.raises(Crash):
            run(crashing, b, holder="doomed")
        assert server.calls == [("save_record", {"key": "k", "value": "v"})]  # it ran
        aws.clock.advance(2000)  # the dead worker's lease lapses
        assert run(ctx, b, holder="recovery").state == "idle"
        t = types(ctx, b)
        assert t.count("effect_commit") == 1 and t.count("tool_result") == 1
        (unknown,) = of_type(ctx, b, "effect_unknown")
        assert unknown["data"]["reason"] == "crash_after_begin"
        (resolved,) = of_type(ctx, b, "effect_resolved")
        assert (resolved["data"]["outcome"], resolved["data"]["by"]) == ("safe_to_retry", "provider_dedup")
        assert [e["data"]["attempt"] for e in of_type(ctx, b, "effect_begin")] == [1, 2]
        (res,) = of_type(ctx, b, "tool_result")
        assert res["data"]["preview"] == "saved k" and res["data"]["origin"] == "executed"
        assert len(server.calls) == 1 and list(server.saved) == [f"{b}:{res['data']['call_id']}"]
        verify_export(ctx, b)
    finally:
        server.stop()
