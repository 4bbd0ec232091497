"""`before_tool` hooks (engine/hooks.py): an agent's rule list decides before the permission
engine; `hook_decision` is recorded in the same transaction as the call's permission decision
(durable before the work it gates, never re-run on replay); deny and guide close the call
`denied` with the hook's text; annotate adds `injected{source: hook}`; ask needs an approver."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers.engine import make_ctx, run, say, scripted, verify_export
from threads_aws.agents import parse_agents
from threads_aws.config.agents_file import AgentsFileError
from threads_aws.core.canonical import new_uuid7
from threads_aws.core.lines import StoredLine, header_line
from threads_aws.engine.context import EngineContext
from threads_aws.engine.models import ScriptedModel
from threads_aws.engine.tools import BUILTIN_EXECUTORS, ToolContext, ToolOutput
from threads_aws.store import NewBranch
from threads_aws.writer import Draft

HOOKS = {
    "before_tool": [
        {"match": "lookup(secrets/*)", "decision": "guide", "text": "Look under public/ instead."},
        {"match": "note", "decision": "deny", "text": "Notes are closed today."},
        {"match": "time", "decision": "annotate", "text": "Times are UTC."},
        {"match": "todo_write", "decision": "ask"},
        {"match": "lookup", "decision": "allow"},
    ]
}
AGENT = {
    "model": {"provider": "scripted", "name": "scripted-1"},
    "adapter": {"name": "scripted", "version": "1"},
    "instructions": "Be careful.",
    "tools": [
        "time",
        "note",
        "todo_write",
        {
            "name": "lookup",
            "description": "Read a path (read-only).",
            "effect_class": "read_only",
            "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    ],
    "permissions": {"allow": ["time", "todo_write", "lookup", "note"]},
    "hooks": HOOKS,
}


def lookup(args: dict[str, Any], tc: ToolContext) -> ToolOutput:
    return ToolOutput(f"contents of {args['path']}")


def use(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "call_id": call_id, "name": name, "input": args}


def setup(aws: Any, script: list[Any]) -> tuple[EngineContext, str, ScriptedModel]:
    model = ScriptedModel(script)
    agent = parse_agents(json.dumps({"careful": AGENT}))["careful"]
    ctx = make_ctx(
        aws,
        models=scripted(model),
        tools={**BUILTIN_EXECUTORS, "lookup": lookup},
    )
    ctx.agents = {**(ctx.agents or {}), "careful": agent}  # the deployed agent its threads pin
    thread_id, branch_id = new_uuid7(), new_uuid7()
    header = StoredLine.of_header(header_line(thread_id, branch_id, ctx.clock()))
    ctx.store.create_branch(
        NewBranch(thread_id=thread_id, tenant="acme", branch_id=branch_id, header=header, create_thread=True)
    )
    ctx.writer.append(branch_id, [Draft("thread_started", agent.thread_started(), {"kind": "host"})])
    say(ctx, branch_id, "go")
    return ctx, branch_id, model


def done(text: str = "Ok.") -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "stop_reason": "end_turn"}


def evs(ctx: EngineContext, b: str) -> list[dict[str, Any]]:
    return list(ctx.writer.load(b).fold.events)


def test_deny_and_annotate_are_recorded_before_the_work_they_gate(aws):
    uses = [use("call_t", "time"), use("call_n", "note", text="x")]
    script = [{"content": uses, "stop_reason": "tool_use"}]
    ctx, b, model = setup(aws, [*script, done()])
    assert run(ctx, b).state == "idle"
    events = evs(ctx, b)
    kinds = [e["type"] for e in events]
    i = kinds.index("model_response")
    # the response's own transaction: each call, its hook decision, then its permission decision
    assert kinds[i : i + 9] == [
        "model_response",
        "tool_call",
        "hook_decision",
        "injected",
        "permission_decision",
        "tool_call",
        "hook_decision",
        "permission_decision",
        "tool_result",
    ]
    annotate, injected, allowed = events[i + 2], events[i + 3], events[i + 4]
    assert annotate["data"] == {
        "call_id": "call_t",
        "decision": "annotate",
        "extension": "agent",
        "hook": "before_tool",
        "reason": "Times are UTC.",
    }
    assert injected["data"]["source"] == "hook" and injected["data"]["text"] == "Times are UTC."
    assert injected["data"]["trust"] == "trusted_instruction"
    assert allowed["data"]["decision"] == "allow" and allowed["data"]["source"] == "policy"
    deny, denied, closed = events[i + 6], events[i + 7], events[i + 8]
    assert deny["data"]["decision"] == "deny" and deny["data"]["call_id"] == "call_n"
    assert denied["data"] == {
        "call_id": "call_n",
        "decision": "deny",
        "mode": "default",
        "reason": "Notes are closed today.",
        "rule_id": "note",
        "source": "hook",
    }
    assert closed["data"]["origin"] == "denied" and "Notes are closed today." in closed["data"]["preview"]
    assert kinds.count("effect_begin") == 0  # the denied note never began
    # the model saw the injected context and the denial
    assert b"Times are UTC." in model.requests[1] and b"Notes are closed today." in model.requests[1]
    # replay: the calls are decided; the hooks never run again
    assert run(ctx, b).state == "idle"
    assert [e["type"] for e in evs(ctx, b)].count("hook_decision") == 2
    verify_export(ctx, b)


def test_guide_closes_the_call_with_how_to_reissue_it(aws):
    script = [
        {"content": [use("call_s", "lookup", path="secrets/key")], "stop_reason": "tool_use"},
        {"content": [use("call_p", "lookup", path="public/key")], "stop_reason": "tool_use"},
        done(),
    ]
    ctx, b, model = setup(aws, script)
    assert run(ctx, b).state == "idle"
    events = evs(ctx, b)
    results = {e["data"]["call_id"]: e["data"] for e in events if e["type"] == "tool_result"}
    assert results["call_s"]["origin"] == "denied"
    assert "Look under public/ instead." in results["call_s"]["preview"]
    assert results["call_p"] == {
        "call_id": "call_p",
        "completeness": "complete",
        "is_error": False,
        "origin": "executed",
        "preview": "contents of public/key",
    }
    hooks = [e["data"] for e in events if e["type"] == "hook_decision"]
    assert [(h["call_id"], h["decision"]) for h in hooks] == [("call_s", "guide"), ("call_p", "allow")]
    # the recorded call keeps the model's input: history is never rewritten
    (first,) = [e for e in events if e["type"] == "tool_call" and e["data"]["call_id"] == "call_s"]
    assert first["data"]["input"] == {"path": "secrets/key"}
    verify_export(ctx, b)


def test_an_ask_hook_needs_an_approver_even_where_the_policy_allows(aws):
    todos = [{"id": "t1", "content": "x", "status": "pending"}]
    script = [{"content": [use("call_w", "todo_write", todos=todos)], "stop_reason": "tool_use"}, done()]
    ctx, b, _ = setup(aws, script)
    assert run(ctx, b).state == "parked"
    events = evs(ctx, b)
    kinds = [e["type"] for e in events]
    assert kinds[-4:] == ["hook_decision", "permission_decision", "approval_requested", "parked"]
    assert events[-3]["data"]["decision"] == "ask" and events[-3]["data"]["source"] == "hook"


def test_hooks_are_validated_with_the_agents_file():
    bad = {
        **AGENT,
        "hooks": {
            "before_tool": [
                {"match": "Not A Rule", "decision": "deny", "text": "x"},
                {"match": "note", "decision": "rewrite"},
                {"match": "note", "decision": "guide"},
            ]
        },
    }
    with pytest.raises(AgentsFileError) as exc:
        parse_agents(json.dumps({"bad": bad}))
    msg = str(exc.value)
    assert "match is not a permission rule" in msg
    assert "decision must be one of" in msg
    assert "a guide rule needs its text" in msg
    with pytest.raises(AgentsFileError):
        parse_agents(json.dumps({"bad": {**AGENT, "hooks": {"after_tool": []}}}))
    # the hooks are part of the pinned config: another rule list is another config_hash
    a = parse_agents(json.dumps({"a": AGENT}))["a"]
    b = parse_agents(json.dumps({"a": {**AGENT, "hooks": {"before_tool": []}}}))["a"]
    assert a.config_hash != b.config_hash


def test_the_demo_agent_shows_its_hooks_and_a_parallel_group(aws):
    from helpers.engine import new_thread

    ctx = make_ctx(aws)
    b = new_thread(ctx, "demo")
    say(ctx, b, "exec: rm -rf notes")
    assert run(ctx, b).state == "idle"  # denied by the hook: no approval asked, nothing ran
    events = evs(ctx, b)
    (hook,) = [e["data"] for e in events if e["type"] == "hook_decision"]
    assert hook["decision"] == "deny" and hook["reason"] == "The demo agent never deletes files."
    assert not any(e["type"] in ("approval_requested", "effect_begin") for e in events)
    say(ctx, b, "read: a.txt; b.txt; c.txt")
    assert run(ctx, b).state == "idle"
    events = evs(ctx, b)
    reads = [
        e["data"]["call_id"] for e in events if e["type"] == "tool_call" and e["data"]["name"] == "read_file"
    ]
    results = [e["data"]["call_id"] for e in events if e["type"] == "tool_result"]
    assert len(reads) == 3 and results[-3:] == reads  # one response, results in call order
    verify_export(ctx, b)
