"""A tool body longer than the lease TTL keeps the branch leased (the same heartbeat as a long
model answer, policy.retry.heartbeat_ms): a serial read-only call, an effectful call between its
effect_begin and its commit, and a parallel read-only group. Without it a concurrent step takes
the branch over mid-call: it re-runs the read-only calls, and finds the effect begun with a dead
lease (recovered as a crash while the body still runs)."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from helpers.engine import make_ctx, run, say, scripted, verify_export
from threads_aws.agents import parse_agents
from threads_aws.config.retry_defaults import DEFAULTS
from threads_aws.core.canonical import new_uuid7
from threads_aws.core.lines import StoredLine, header_line
from threads_aws.engine.models import ScriptedModel
from threads_aws.engine.tools import BUILTIN_EXECUTORS, ToolContext, ToolOutput
from threads_aws.store import NewBranch
from threads_aws.writer import Draft

LEASE_TTL_MS = 60_000

AGENT = {
    "model": {"provider": "scripted", "name": "scripted-1"},
    "adapter": {"name": "scripted", "version": "1"},
    "instructions": "Look things up and save them.",
    "tools": [
        {
            "name": "lookup",
            "description": "Look a key up (read-only).",
            "effect_class": "read_only",
            "input_schema": {"type": "object", "properties": {"key": {"type": "string"}}},
        },
        {
            "name": "save",
            "description": "Save a key (an effect).",
            "effect_class": "unguarded",
            "input_schema": {"type": "object", "properties": {"key": {"type": "string"}}},
        },
    ],
    "permissions": {"allow": ["lookup", "save"]},
}


class Slow:
    """A tool whose body outlives the lease: the clock moves past the lease the step held when
    the body started, then another worker tries to take the branch over."""

    def __init__(self, aws: Any, *, concurrent: bool) -> None:
        self.aws = aws
        self.concurrent = concurrent
        self.ctx: Any = None
        self.seen: list[str] = []
        self.one_at_a_time = threading.Lock()  # a group's bodies move the shared clock in turn

    def __call__(self, args: dict[str, Any], tc: ToolContext) -> ToolOutput:
        with self.one_at_a_time:
            self.aws.clock.advance(LEASE_TTL_MS - 10_000)
            time.sleep(0.3)  # heartbeats (every 50 ms) renew the lease from the moved clock
            self.aws.clock.advance(LEASE_TTL_MS - 10_000)  # past the lease taken before the body
            try:
                self.ctx.store.acquire_lease(
                    tc.branch_id, f"other-{tc.call_id}", ttl_ms=LEASE_TTL_MS, now_ms=self.aws.clock()
                )
                self.seen.append("taken")
            except Exception as exc:  # noqa: BLE001
                self.seen.append(getattr(exc, "code", repr(exc)))
        return ToolOutput(f"done {args['key']}")


def setup(aws: Any, uses: list[dict[str, Any]], lookup: Slow, save: Slow) -> tuple[Any, str]:
    model = ScriptedModel(
        [
            {"content": uses, "stop_reason": "tool_use"},
            {"content": [{"type": "text", "text": "Done."}], "stop_reason": "end_turn"},
        ]
    )
    tools = {**BUILTIN_EXECUTORS, "lookup": lookup, "save": save}
    ctx = make_ctx(aws, models=scripted(model), tools=tools, lease_ttl_ms=LEASE_TTL_MS)
    started = parse_agents(json.dumps({"slow": AGENT}))["slow"].thread_started()
    started["policy"]["retry"] = {**DEFAULTS, "heartbeat_ms": 50}
    thread_id, branch_id = new_uuid7(), new_uuid7()
    header = StoredLine.of_header(header_line(thread_id, branch_id, ctx.clock()))
    ctx.store.create_branch(
        NewBranch(thread_id=thread_id, tenant="acme", branch_id=branch_id, header=header, create_thread=True)
    )
    ctx.writer.append(branch_id, [Draft("thread_started", started, {"kind": "host"})])
    say(ctx, branch_id, "go")
    lookup.ctx = save.ctx = ctx
    return ctx, branch_id


def use(name: str, key: str) -> dict[str, Any]:
    return {"type": "tool_use", "call_id": f"call_{name}_{key}", "name": name, "input": {"key": key}}


def results(ctx: Any, b: str) -> dict[str, str]:
    evs = ctx.writer.load(b).fold.events
    return {e["data"]["call_id"]: e["data"]["origin"] for e in evs if e["type"] == "tool_result"}


def test_a_long_serial_read_only_call_keeps_the_lease(aws):
    lookup, save = Slow(aws, concurrent=False), Slow(aws, concurrent=False)
    ctx, b = setup(aws, [use("lookup", "a")], lookup, save)
    assert run(ctx, b).state == "idle"
    assert lookup.seen == ["branch_busy"]
    assert results(ctx, b) == {"call_lookup_a": "executed"}
    verify_export(ctx, b)


def test_a_long_effect_keeps_the_lease_between_its_begin_and_its_commit(aws):
    lookup, save = Slow(aws, concurrent=False), Slow(aws, concurrent=False)
    ctx, b = setup(aws, [use("save", "a")], lookup, save)
    assert run(ctx, b).state == "idle"
    assert save.seen == ["branch_busy"]
    types = [e["type"] for e in ctx.writer.load(b).fold.events]
    assert "effect_commit" in types and "effect_unknown" not in types
    assert results(ctx, b) == {"call_save_a": "executed"}
    verify_export(ctx, b)


def test_a_long_parallel_group_keeps_the_lease(aws):
    lookup, save = Slow(aws, concurrent=True), Slow(aws, concurrent=False)
    ctx, b = setup(aws, [use("lookup", "a"), use("lookup", "b")], lookup, save)
    assert run(ctx, b).state == "idle"
    assert lookup.seen == ["branch_busy", "branch_busy"]
    assert results(ctx, b) == {"call_lookup_a": "executed", "call_lookup_b": "executed"}
    verify_export(ctx, b)
