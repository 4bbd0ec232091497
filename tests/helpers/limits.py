"""Shared helpers of the run-limits tests (budgets, output, continuation, compaction): threads
with a chosen policy, child threads linked to a parent event as the conformance logs build
them, and the export / re-import / projections round trip."""

from __future__ import annotations

import copy
from typing import Any

from threads_aws.agents import load_agents
from threads_aws.core import projections
from threads_aws.core.canonical import new_uuid7
from threads_aws.core.lines import StoredLine, header_line
from threads_aws.engine.step import EngineContext
from threads_aws.store import NewBranch
from threads_aws.writer import Draft

from helpers.engine import USER, events, verify_export

HOST = {"kind": "host"}
MODEL_ENTRY = {
    "provider": "scripted",
    "name": "scripted-1",
    "context_window": 1000,
    "max_output_tokens": 4096,
    "input_billing_bound": "context_window",
    "price": {"input": 3, "output": 15},
}


def done(text: str = "Done.", **usage: int) -> dict[str, Any]:
    answer: dict[str, Any] = {"content": [{"type": "text", "text": text}], "stop_reason": "end_turn"}
    if usage:
        answer["usage"] = usage
    return answer


def use(name: str = "time", call_id: str = "call_1", **usage: int) -> dict[str, Any]:
    part = {"type": "tool_use", "call_id": call_id, "name": name, "input": {}}
    answer: dict[str, Any] = {"content": [part], "stop_reason": "tool_use"}
    if usage:
        answer["usage"] = usage
    return answer


def thread(
    ctx: EngineContext,
    agent: str = "scripted",
    *,
    parent: dict[str, Any] | None = None,
    model_params: dict[str, Any] | None = None,
    **policy: Any,
) -> str:
    """A new thread of `agent` with `policy` sections set over the agent's (`budget`, `models`,
    `currency`, ...; None removes one), optionally a child of `parent`."""
    thread_id, branch_id = new_uuid7(), new_uuid7()
    header = StoredLine.of_header(header_line(thread_id, branch_id, ctx.clock()))
    ctx.store.create_branch(
        NewBranch(thread_id=thread_id, tenant="acme", branch_id=branch_id, header=header, create_thread=True)
    )
    started = copy.deepcopy(load_agents()[agent].thread_started())
    for k, v in policy.items():
        if v is None:
            started["policy"].pop(k, None)
        else:
            started["policy"][k] = v
    if model_params is not None:
        started["model_params"] = model_params
    if parent is not None:
        started["parent"] = parent
    ctx.writer.append(branch_id, [Draft("thread_started", started, HOST)])
    return branch_id


def ask(ctx: EngineContext, branch_id: str, text: str = "go", **data: Any) -> str:
    """A run's user_input (a `budget=` rides on it)."""
    body = {"source": "api", "text": text, **data}
    _, lines = ctx.writer.append(branch_id, [Draft("user_input", body, USER)])
    return str(lines[0].event_id)


def spawn(ctx: EngineContext, parent_branch: str, n: int = 1) -> list[dict[str, Any]]:
    """`agent_spawned` events on the parent (as a spawn call would write them) and the
    `thread_started.parent` link of each child."""
    rec = ctx.writer.record(parent_branch)
    links = []
    for i in range(n):
        child = new_uuid7()
        data = {
            "agent_name": "scripted",
            "call_id": f"call_spawn_{i}",
            "child_thread_id": child,
            "isolation": "none",
            "mode": "background",
        }
        _, lines = ctx.writer.append(parent_branch, [Draft("agent_spawned", data, HOST)])
        links.append(
            {
                "branch_id": parent_branch,
                "event_id": lines[0].event_id,
                "relation": "subagent",
                "thread_id": rec.thread_id,
            }
        )
    return links


def child(ctx: EngineContext, link: dict[str, Any], text: str = "work") -> str:
    branch = thread(ctx, parent=link)
    body = {"source": "parent_agent", "text": text}
    # the child's input comes from the host on behalf of the root run's principal
    ctx.writer.append(branch, [Draft("user_input", body, {"kind": "host", "principal": USER["principal"]})])
    return branch


def round_trip(ctx: EngineContext, branch_id: str, run_id: str | None = None) -> dict[str, Any]:
    """Export, re-import (every request re-rendered to its bytes), and the projections of the
    re-imported log equal the live ones; returns the re-imported projections (with the run's
    RunOutcome under `outcome`)."""
    imp = verify_export(ctx, branch_id)
    live = events(ctx, branch_id)
    again = imp.fold.events
    assert projections.all_projections(again) == projections.all_projections(live)
    out = projections.all_projections(again)
    if run_id is not None:
        rec = ctx.writer.record(branch_id)
        out["outcome"] = projections.run_outcome(again, run_id, thread_id=rec.thread_id, branch_id=branch_id)
        assert out["outcome"] == projections.run_outcome(
            live, run_id, thread_id=rec.thread_id, branch_id=branch_id
        )
    return out
