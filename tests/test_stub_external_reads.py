"""Stub mode (semantics.md §6 "`stub` mode": no mediated external operation goes live; each
invocation is matched by `(tool, args_hash, occurrence)`, consumed in order) for the paths
beside the plain dispatch: a parallel read-only group of external tools (a Lambda tool is
`concurrent`), repeated read-only calls (they have no effect events to count), and a crash
after an effect's begin (recovery must not reach the tool's lookup)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from helpers.engine import Crash, CrashAfter, make_ctx, run, say, scripted, verify_export
from threads_aws.agents import load_agents, parse_agents
from threads_aws.core import projections
from threads_aws.core.canonical import canonical_hash, new_uuid7
from threads_aws.core.lines import StoredLine, header_line
from threads_aws.engine.context import EngineContext
from threads_aws.engine.models import ScriptedModel
from threads_aws.engine.tools import BUILTIN_EXECUTORS, ToolContext, ToolOutput
from threads_aws.sandbox.stubs import store_recordings
from threads_aws.store import NewBranch
from threads_aws.writer import Draft


def agent(effect_class: str) -> Any:
    tool: dict[str, Any] = {
        "name": "lookup",
        "description": "Look a key up.",
        "effect_class": effect_class,
        "input_schema": {"type": "object", "properties": {"key": {"type": "string"}}},
    }
    spec = {
        "model": {"provider": "scripted", "name": "scripted-1"},
        "adapter": {"name": "scripted", "version": "1"},
        "instructions": "Look things up.",
        "tools": [tool],
        "permissions": {"allow": ["lookup"]},
    }
    return parse_agents(json.dumps({"lookups": spec}))["lookups"]


class Live:
    """An external tool that records every live invocation (a stub branch must make none)."""

    def __init__(self, concurrent: bool) -> None:
        self.concurrent = concurrent
        self.calls: list[str] = []
        self.lookups: list[str] = []

    def __call__(self, args: dict[str, Any], tc: ToolContext) -> ToolOutput:
        self.calls.append(str(args["key"]))
        return ToolOutput(f"live {args['key']}")

    def reconcile(self, args: dict[str, Any], tc: ToolContext) -> ToolOutput | None:
        self.lookups.append(str(args["key"]))
        return None


def stub(key: str, occurrence: int, output: str) -> dict[str, Any]:
    return {
        "args_hash": canonical_hash({"key": key}),
        "is_error": False,
        "occurrence": occurrence,
        "output": output,
        "tool": "lookup",
    }


def stub_branch(
    aws: Any, tool: Live, keys: Sequence[str], stubs: list[dict[str, Any]], effect_class: str = "read_only"
) -> tuple[EngineContext, str]:
    uses = [
        {"type": "tool_use", "call_id": f"call_{i}", "name": "lookup", "input": {"key": k}}
        for i, k in enumerate(keys)
    ]
    model = ScriptedModel(
        [
            {"content": uses, "stop_reason": "tool_use"},
            {"content": [{"type": "text", "text": "Found."}], "stop_reason": "end_turn"},
        ]
    )
    ctx = make_ctx(
        aws, models=scripted(model), tools={**BUILTIN_EXECUTORS, "lookup": tool}, lease_ttl_ms=1000
    )
    thread_id, branch_id = new_uuid7(), new_uuid7()
    header = StoredLine.of_header(header_line(thread_id, branch_id, ctx.clock()))
    ctx.store.create_branch(
        NewBranch(
            thread_id=thread_id,
            tenant="acme",
            branch_id=branch_id,
            header=header,
            create_thread=True,
            stubs_sha256=store_recordings(stubs, ctx.artifacts),
        )
    )
    started = agent(effect_class).thread_started()
    ctx.writer.append(branch_id, [Draft("thread_started", started, {"kind": "host"})])
    say(ctx, branch_id, "look up everything")
    return ctx, branch_id


def previews(ctx: EngineContext, b: str) -> list[tuple[str, str]]:
    evs = ctx.writer.load(b).fold.events
    return [(e["data"]["origin"], e["data"]["preview"]) for e in evs if e["type"] == "tool_result"]


def test_a_parallel_group_of_external_reads_is_answered_from_the_recordings(aws: Any) -> None:
    tool = Live(concurrent=True)  # like a Lambda tool: it would form a parallel group
    ctx, b = stub_branch(
        aws, tool, ["a", "b", "c"], [stub("a", 0, "A"), stub("b", 0, "B"), stub("c", 0, "C")]
    )
    assert run(ctx, b).state == "idle"
    assert tool.calls == []  # nothing went live
    assert previews(ctx, b) == [("executed", "A"), ("executed", "B"), ("executed", "C")]
    verify_export(ctx, b)


def test_a_repeated_read_consumes_the_next_occurrence(aws: Any) -> None:
    tool = Live(concurrent=False)
    ctx, b = stub_branch(aws, tool, ["a", "a"], [stub("a", 0, "first"), stub("a", 1, "second")])
    assert run(ctx, b).state == "idle"
    assert tool.calls == []
    assert previews(ctx, b) == [("executed", "first"), ("executed", "second")]
    verify_export(ctx, b)


def test_a_repeated_read_past_the_recordings_is_a_miss(aws: Any) -> None:
    tool = Live(concurrent=False)
    ctx, b = stub_branch(aws, tool, ["a", "a"], [stub("a", 0, "first")])
    run(ctx, b)
    assert tool.calls == []
    got = previews(ctx, b)
    assert got[0] == ("executed", "first")
    assert got[1][0] == "not_executed" and got[1][1].startswith("unmatched_external_op")
    assert ctx.writer.load(b).fold.events[-1]["data"] == {"reason": "error"}


def test_a_crash_after_begin_is_matched_again_never_looked_up_live(aws: Any) -> None:
    tool = Live(concurrent=False)
    ctx, b = stub_branch(aws, tool, ["a"], [stub("a", 0, "recorded")], effect_class="reconcilable")
    doomed = make_ctx(aws, models=ctx.models, tools=ctx.tools, lease_ttl_ms=1000)
    doomed.writer = CrashAfter(doomed.writer, "effect_begin")
    with pytest.raises(Crash):
        run(doomed, b, holder="doomed")
    aws.clock.advance(2000)  # its lease lapses
    assert run(ctx, b, holder="recovery").state == "idle"
    assert tool.calls == [] and tool.lookups == []  # neither the tool nor its lookup went live
    evs = ctx.writer.load(b).fold.events
    settled = [e["data"] for e in evs if e["type"] == "effect_resolved"]
    assert settled == [{"by": "adapter", "call_id": "call_0", "outcome": "not_sent"}]
    assert [e["data"]["attempt"] for e in evs if e["type"] == "effect_begin"] == [1, 2]
    assert previews(ctx, b) == [("executed", "recorded")]
    verify_export(ctx, b)


def demo_stub_branch(aws: Any) -> tuple[EngineContext, str]:
    """A stub-mode branch of the demo agent with no recordings (its parent made no external call)."""
    ctx = make_ctx(aws)
    thread_id, branch_id = new_uuid7(), new_uuid7()
    header = StoredLine.of_header(header_line(thread_id, branch_id, ctx.clock()))
    ctx.store.create_branch(
        NewBranch(
            thread_id=thread_id,
            tenant="acme",
            branch_id=branch_id,
            header=header,
            create_thread=True,
            stubs_sha256=store_recordings([], ctx.artifacts),
        )
    )
    started = load_agents()["demo"].thread_started()
    ctx.writer.append(branch_id, [Draft("thread_started", started, {"kind": "host"})])
    return ctx, branch_id


@pytest.mark.parametrize("prompt", ["spawn: demo: note: buy milk", "handoff: demo"])
def test_a_spawn_or_handoff_on_a_stub_branch_starts_no_live_thread(aws: Any, prompt: str) -> None:
    # A child or handoff target would be a live thread whose tools go live: the parent records
    # neither call, so on a stub branch each is an unmatched external operation (fail closed).
    ctx, b = demo_stub_branch(aws)
    run_id = say(ctx, b, prompt)
    run(ctx, b)
    evs = ctx.writer.load(b).fold.events
    kinds = [e["type"] for e in evs]
    assert "agent_spawned" not in kinds and "handoff" not in kinds
    assert "effect_begin" not in kinds and "effect_resolved" not in kinds
    (res,) = [e["data"] for e in evs if e["type"] == "tool_result"]
    assert res["origin"] == "not_executed" and res["preview"].startswith("unmatched_external_op")
    assert evs[-1]["type"] == "turn_completed" and evs[-1]["data"] == {"reason": "error"}
    outcome = projections.run_outcome(evs, run_id, thread_id=evs[0]["thread_id"], branch_id=b)
    assert outcome["status"] == "failed" and outcome["error"]["code"] == "unmatched_external_op"
    threads, _ = ctx.stores.threads.list_threads("acme")
    assert len(threads) == 1  # no child or target thread was created
    verify_export(ctx, b)
