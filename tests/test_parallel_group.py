"""The parallel read-only group (semantics.md §4): consecutive pending calls of one model
response that are concurrent, pinned read_only and decided allow run at once in threads, at most
8 started and unrecorded, results appended in call order; a call that isn't concurrent runs
alone; a crash mid-group recovers from the log (recorded calls never run again)."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest
from helpers.engine import Crash, CrashAfter, make_ctx, run, say, scripted, verify_export
from threads_aws.agents import parse_agents
from threads_aws.core.canonical import new_uuid7
from threads_aws.core.lines import StoredLine, header_line
from threads_aws.engine.context import EngineContext
from threads_aws.engine.models import ScriptedModel
from threads_aws.engine.parallel import MAX_IN_FLIGHT
from threads_aws.engine.tools import BUILTIN_EXECUTORS, ToolContext, ToolOutput
from threads_aws.store import NewBranch
from threads_aws.writer import Draft, Writer

AGENT = {
    "model": {"provider": "scripted", "name": "scripted-1"},
    "adapter": {"name": "scripted", "version": "1"},
    "instructions": "Look things up.",
    "tools": [
        "todo_write",
        {
            "name": "lookup",
            "description": "Look a key up (read-only).",
            "effect_class": "read_only",
            "input_schema": {"type": "object", "properties": {"key": {"type": "string"}}},
        },
    ],
    "permissions": {"allow": ["lookup", "todo_write"]},
}


class Lookup:
    """A concurrent read-only executor that counts how many of its calls run at once and
    checks, when a call starts, how many started calls are still unrecorded in the log."""

    concurrent = True

    def __init__(self, delays: dict[str, float]) -> None:
        self.delays = delays
        self.lock = threading.Lock()
        self.running = 0
        self.most = 0
        self.runs: Counter[str] = Counter()
        self.started: list[str] = []
        self.ctx: EngineContext | None = None
        self.unrecorded_at_start: list[int] = []

    def __call__(self, args: dict[str, Any], tc: ToolContext) -> ToolOutput:
        key = str(args["key"])
        with self.lock:
            self.started.append(tc.call_id)
            self.runs[key] += 1
            self.running += 1
            self.most = max(self.most, self.running)
            if self.ctx is not None:
                pending = self.ctx.writer.load(tc.branch_id).fold.pending
                self.unrecorded_at_start.append(sum(c in pending for c in self.started))
        try:
            time.sleep(self.delays.get(key, 0.05))
            return ToolOutput(f"value of {key}")
        finally:
            with self.lock:
                self.running -= 1


def lookups(keys: Sequence[str], extra: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    uses = [{"type": "tool_use", "call_id": f"call_{k}", "name": "lookup", "input": {"key": k}} for k in keys]
    return [*uses, *extra]


def setup(aws: Any, content: list[dict[str, Any]], tool: Lookup, **kw: Any) -> tuple[EngineContext, str]:
    model = ScriptedModel(
        [
            {"content": content, "stop_reason": "tool_use"},
            {"content": [{"type": "text", "text": "Found."}], "stop_reason": "end_turn"},
        ]
    )
    ctx = make_ctx(aws, models=scripted(model), tools={**BUILTIN_EXECUTORS, "lookup": tool}, **kw)
    tool.ctx = ctx
    agent = parse_agents(json.dumps({"lookups": AGENT}))["lookups"]
    thread_id, branch_id = new_uuid7(), new_uuid7()
    header = StoredLine.of_header(header_line(thread_id, branch_id, ctx.clock()))
    ctx.store.create_branch(
        NewBranch(thread_id=thread_id, tenant="acme", branch_id=branch_id, header=header, create_thread=True)
    )
    ctx.writer.append(branch_id, [Draft("thread_started", agent.thread_started(), {"kind": "host"})])
    say(ctx, branch_id, "look up everything")
    return ctx, branch_id


def calls_and_results(ctx: EngineContext, b: str) -> tuple[list[str], list[str]]:
    evs = ctx.writer.load(b).fold.events
    return (
        [e["data"]["call_id"] for e in evs if e["type"] == "tool_call"],
        [e["data"]["call_id"] for e in evs if e["type"] == "tool_result"],
    )


def test_a_group_runs_at_most_8_at_once_and_records_in_call_order(aws):
    keys = [f"k{i:02d}" for i in range(12)]
    # the first call is the slowest: later ones finish first, yet are recorded after it
    tool = Lookup({k: (0.6 if i == 0 else 0.25) for i, k in enumerate(keys)})
    ctx, b = setup(aws, lookups(keys), tool)
    assert run(ctx, b).state == "idle"
    calls, results = calls_and_results(ctx, b)
    assert results == calls == [f"call_{k}" for k in keys]
    assert tool.most == MAX_IN_FLIGHT  # they overlapped, never more than 8
    assert max(tool.unrecorded_at_start) <= MAX_IN_FLIGHT
    # the 9th started only once the first was recorded (finished-but-unrecorded calls count)
    assert tool.started.index("call_k08") >= MAX_IN_FLIGHT and tool.unrecorded_at_start[8] <= MAX_IN_FLIGHT
    assert set(tool.runs.values()) == {1}
    evs = ctx.writer.load(b).fold.events
    kinds = [e["type"] for e in evs]
    # each call decided with the response (one append), then the results; no effect events
    first_result = kinds.index("tool_result")
    pairs = ["tool_call", "permission_decision"] * len(keys)
    assert kinds[kinds.index("model_response") + 1 : first_result] == pairs
    assert not any(k.startswith("effect_") for k in kinds)
    assert evs[-1]["data"] == {"reason": "end_turn"}
    verify_export(ctx, b)


def test_a_call_that_is_not_concurrent_runs_alone(aws):
    todo = {
        "type": "tool_use",
        "call_id": "call_todo",
        "name": "todo_write",
        "input": {"todos": [{"id": "t1", "content": "x", "status": "pending"}]},
    }
    tail = lookups(["z1", "z2"])
    tool = Lookup({"a1": 0.2, "a2": 0.2, "z1": 0.2, "z2": 0.2})
    ctx, b = setup(aws, lookups(["a1", "a2"], [todo, *tail]), tool)
    assert run(ctx, b).state == "idle"
    calls, results = calls_and_results(ctx, b)
    assert results == calls == ["call_a1", "call_a2", "call_todo", "call_z1", "call_z2"]
    assert tool.most == 2  # a1+a2 together, then todo_write alone, then z1+z2
    kinds = [e["type"] for e in ctx.writer.load(b).fold.events]
    assert kinds.count("todos_updated") == 1
    verify_export(ctx, b)


def test_a_crash_mid_group_recovers_from_the_log(aws):
    keys = [f"c{i}" for i in range(6)]
    tool = Lookup({k: (0.01 if i == 0 else 0.4) for i, k in enumerate(keys)})
    ctx, b = setup(aws, lookups(keys), tool, lease_ttl_ms=1000)
    doomed = make_ctx(aws, models=ctx.models, tools=ctx.tools, lease_ttl_ms=1000)
    doomed.writer = CrashAfter(doomed.writer, "tool_result")
    with pytest.raises(Crash):
        run(doomed, b, holder="doomed")
    _, recorded = calls_and_results(ctx, b)
    assert recorded == ["call_c0"]  # only the first was recorded before the death
    time.sleep(0.5)  # let the dead worker's threads finish (they record nothing)
    aws.clock.advance(2000)  # its lease lapses
    assert run(ctx, b, holder="recovery").state == "idle"
    calls, results = calls_and_results(ctx, b)
    assert results == calls == [f"call_{k}" for k in keys]
    assert tool.runs["c0"] == 1  # a recorded call never runs again
    assert all(tool.runs[k] in (1, 2) for k in keys[1:])  # the unrecorded ones ran again
    verify_export(ctx, b)


def test_a_cancel_barrier_stops_the_group_from_starting_more(aws):
    from helpers.engine import USER

    keys = [f"x{i:02d}" for i in range(12)]
    tool = Lookup({k: 0.3 for k in keys})
    ctx, b = setup(aws, lookups(keys), tool)
    api = Writer(aws.events(), clock=aws.clock)  # the cancel route: another process
    inner = tool.__call__

    def cancel_on_first(args: dict[str, Any], tc: ToolContext) -> ToolOutput:
        if args["key"] == "x00":
            api.append(b, [Draft("cancel_requested", {"scope": "turn"}, USER)])
        return inner(args, tc)

    cancel_on_first.concurrent = True  # type: ignore[attr-defined]
    ctx.tools = {**ctx.tools, "lookup": cancel_on_first}
    assert run(ctx, b).state == "idle"
    evs = ctx.writer.load(b).fold.events
    origins = {e["data"]["call_id"]: e["data"]["origin"] for e in evs if e["type"] == "tool_result"}
    started = [f"call_{k}" for k in keys[:MAX_IN_FLIGHT]]
    assert all(origins[c] == "executed" for c in started)  # what ran is recorded
    assert all(origins[f"call_{k}"] == "not_executed" for k in keys[MAX_IN_FLIGHT:])  # never started
    assert sum(tool.runs.values()) == MAX_IN_FLIGHT
    assert evs[-1]["data"] == {"reason": "cancelled"}
    verify_export(ctx, b)
