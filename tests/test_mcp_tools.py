"""MCP tool servers (engine/mcp_tools.py, engine/mcp_client.py) against a real MCP server: the
demo server of `threads-aws dev` (local/demo_mcp.py, the SDK's MCPServer over streamable HTTP on
loopback), driven by the run-step worker on moto."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers.engine import events, grant, make_ctx, of_type, run, say, types, verify_export
from threads_aws.agents import parse_agents
from threads_aws.config.agents_file import AgentsFileError, validate
from threads_aws.core.canonical import canonical_hash, new_uuid7
from threads_aws.core.lines import StoredLine, header_line
from threads_aws.engine.mcp_tools import (
    StepMcp,
    effect_class,
    namespaced,
    result_output,
    sync_tools,
    tool_specs,
)
from threads_aws.store.protocol import NewBranch
from threads_aws.writer import Draft
from threads_aws_dev.local.demo_mcp import DemoMcp

WINDOW = 86_400_000


@pytest.mark.parametrize(
    "annotations, expected",
    [
        ({"readOnlyHint": True}, {"effect_class": "read_only"}),
        ({"readOnlyHint": True, "destructiveHint": True}, {"effect_class": "read_only"}),
        ({"idempotentHint": True}, {"dedup_window_ms": WINDOW, "effect_class": "idempotent"}),
        (
            {"idempotentHint": True, "destructiveHint": False},
            {"dedup_window_ms": WINDOW, "effect_class": "idempotent"},
        ),
        ({"destructiveHint": False}, {"effect_class": "unguarded"}),  # additive: no lookup to reconcile
        ({"destructiveHint": True}, {"effect_class": "unguarded"}),
        ({}, {"effect_class": "unguarded"}),  # MCP defaults: not read-only, destructive
        (None, {"effect_class": "unguarded"}),
        ({"readOnlyHint": False, "idempotentHint": False}, {"effect_class": "unguarded"}),
    ],
)
def test_annotations_map_to_an_effect_class(annotations, expected):
    assert effect_class(annotations, WINDOW) == expected


def test_an_idempotent_hint_without_a_declared_window_is_unguarded():
    # The hint says a repeat has no further effect, not that the server dedups on the effect
    # key: only a declared dedup window makes a re-send after an unknown outcome safe.
    assert effect_class({"idempotentHint": True}, None) == {"effect_class": "unguarded"}
    assert effect_class({"readOnlyHint": True}, None) == {"effect_class": "read_only"}


def test_names_are_namespaced_and_unfit_tools_not_offered():
    obj = {"type": "object"}
    listed = [
        {"name": "Get-Weather.v2", "inputSchema": obj, "description": "w"},
        {"name": "get_weather_v2", "inputSchema": obj},  # collides with the first after mapping
        {"name": "x" * 60, "inputSchema": obj},  # too long for Name
        {"name": "ok", "inputSchema": obj, "annotations": {"title": "The OK tool", "readOnlyHint": True}},
        {"name": "hidden", "inputSchema": obj},
        {"name": "no_schema"},
    ]
    specs, names = tool_specs("wx", {"tools": ["Get-Weather.v2", "get_weather_v2", "ok", "x" * 60]}, listed)
    assert [s["name"] for s in specs] == ["mcp__wx__ok"]  # both colliding names dropped, hidden not allowed
    assert specs[0] == {
        "description": "The OK tool",
        "effect_class": "read_only",
        "input_schema": obj,
        "name": "mcp__wx__ok",
    }
    assert names == {"mcp__wx__ok": "ok"}
    specs, names = tool_specs("wx", {}, listed[:1])
    assert names == {"mcp__wx__get_weather_v2": "Get-Weather.v2"}
    assert namespaced("wx", "time") == "mcp__wx__time" != "time"  # never a built-in's name


def test_results_become_tool_outputs():
    text = {
        "content": [{"type": "text", "text": "a"}, {"type": "image", "data": "..", "mimeType": "image/png"}]
    }
    assert result_output(text).text == "a\n[image content image/png]"
    assert result_output({"content": [], "structuredContent": {"b": 1, "a": 2}}).text == '{"a":2,"b":1}'
    out = result_output({"content": [{"type": "text", "text": "boom"}], "isError": True})
    assert out.is_error and out.text == "boom"


def test_the_agents_file_checks_mcp_servers():
    base = {"model": {"provider": "demo", "name": "demo-1"}, "adapter": {"name": "demo", "version": "1"}}
    good = {
        "url": "http://127.0.0.1:1/mcp",
        "headers": {"Authorization": {"env": "TOKEN", "prefix": "Bearer "}, "X-Client": "threads"},
        "timeout_ms": 5000,
        "tools": ["a"],
    }
    assert validate({"a": {**base, "instructions": "", "mcp_servers": {"srv": good}}}) == []
    bad = {
        "Bad-Name": {"url": "http://x/mcp"},
        "a__b": {"url": "http://x/mcp"},
        "nourl": {},
        "srv": {"url": "ftp://x", "headers": {"H": {"env": "A", "secret": "B"}}, "timeout_ms": 1, "extra": 1},
    }
    errs = validate({"a": {**base, "instructions": "", "mcp_servers": bad}})
    text = "\n".join(errs)
    for needle in (
        "'Bad-Name'",
        "'a__b'",
        "'nourl': needs a url",
        "unknown key 'extra'",
        "url must be http(s)",
    ):
        assert needle in text
    assert "exactly one of env, secret, value" in text and "timeout_ms must be" in text
    tool = {"name": "mcp__x__y", "description": "", "input_schema": {}, "effect_class": "read_only"}
    with pytest.raises(AgentsFileError, match="'__' is for MCP tools"):
        parse_agents(json.dumps({"a": {**base, "instructions": "", "tools": [tool]}}))


# -- against the demo server


@pytest.fixture
def demo(monkeypatch):
    server = DemoMcp().start()
    monkeypatch.setenv("THREADS_DEMO_MCP_URL", server.url)
    yield server
    server.stop()


class Steps:
    """ctx.mcp that remembers each step's MCP side (to check it was closed)."""

    def __init__(self) -> None:
        self.made: list[StepMcp] = []

    def __call__(self) -> StepMcp:
        self.made.append(StepMcp())
        return self.made[-1]


def thread(ctx, agent_name: str = "demo-tools", agent: Any = None, **perms: Any) -> str:
    thread_id, branch_id = new_uuid7(), new_uuid7()
    header = StoredLine.of_header(header_line(thread_id, branch_id, ctx.clock()))
    ctx.store.create_branch(
        NewBranch(thread_id=thread_id, tenant="acme", branch_id=branch_id, header=header, create_thread=True)
    )
    started = (agent or ctx.agents[agent_name]).thread_started()
    started["policy"]["permissions"].update(perms)
    ctx.writer.append(branch_id, [Draft("thread_started", started, {"kind": "host"})])
    return branch_id


def mcp(ctx, b: str, tool: str, **args: Any) -> None:
    say(ctx, b, f"mcp: mcp__demo__{tool} {json.dumps(args)}")


def test_the_first_step_pins_the_servers_tools_then_a_read_only_call_runs(aws, demo):
    steps = Steps()
    ctx = make_ctx(aws, mcp=steps)
    b = thread(ctx)
    mcp(ctx, b, "lookup_rate", currency="usd")
    assert run(ctx, b).state == "idle"
    t = types(ctx, b)
    assert t.index("tools_changed") < t.index("model_request")  # pinned before the first request
    (changed,) = of_type(ctx, b, "tools_changed")
    tools = changed["data"]["tools"]
    assert changed["data"]["tools_hash"] == canonical_hash(tools)
    assert changed["data"]["cause"] == {"kind": "mcp_list_changed", "server": "demo"}
    assert [(s["name"], s["effect_class"]) for s in tools] == [
        ("time", "read_only"),
        ("mcp__demo__lookup_rate", "read_only"),
        ("mcp__demo__save_record", "idempotent"),
        ("mcp__demo__delete_record", "unguarded"),
    ]
    assert tools[2]["dedup_window_ms"] == WINDOW
    assert tools[1]["input_schema"]["required"] == ["currency"]
    (res,) = of_type(ctx, b, "tool_result")
    assert res["data"]["origin"] == "executed" and res["data"]["preview"] == "1 USD = 0.92 EUR"
    assert "effect_begin" not in t  # read-only: no effect events
    assert demo.calls == [("lookup_rate", {"currency": "usd"})]
    assert steps.made and all(not s.conns._conns and s.conns._loop is None for s in steps.made)
    verify_export(ctx, b)
    # The next turn lists again (a new step) and finds the same set: no second tools_changed.
    say(ctx, b, "hello")
    assert run(ctx, b).state == "idle"
    assert types(ctx, b).count("tools_changed") == 1


def test_a_destructive_call_asks_then_commits_once(aws, demo):
    ctx = make_ctx(aws)
    b = thread(ctx)
    demo.records["r1"] = "v"
    mcp(ctx, b, "delete_record", key="r1")
    assert run(ctx, b).state == "parked"  # unguarded: asks under the default mode
    (decision,) = of_type(ctx, b, "permission_decision")
    assert decision["data"]["decision"] == "ask"
    assert demo.calls == []
    grant(ctx, b)
    assert run(ctx, b).state == "idle"
    t = types(ctx, b)
    assert t.index("effect_begin") < t.index("effect_commit") < t.index("tool_result")
    (res,) = of_type(ctx, b, "tool_result")
    assert res["data"]["preview"] == "deleted r1" and not res["data"]["is_error"]
    assert demo.calls == [("delete_record", {"key": "r1", "delay_ms": 0})] and "r1" not in demo.records
    verify_export(ctx, b)


def test_an_is_error_result_is_an_error_result(aws, demo):
    ctx = make_ctx(aws)
    b = thread(ctx, allow=["mcp__demo__*"])
    mcp(ctx, b, "delete_record", key="missing")
    assert run(ctx, b).state == "idle"
    (res,) = of_type(ctx, b, "tool_result")
    assert res["data"]["is_error"] and res["data"]["origin"] == "executed"
    assert "effect_commit" in types(ctx, b) and "effect_unknown" not in types(ctx, b)
    verify_export(ctx, b)


def test_a_changed_listing_is_pinned_before_the_next_request(aws, demo):
    ctx = make_ctx(aws)
    b = thread(ctx)
    say(ctx, b, "hi")
    run(ctx, b)
    demo.mcp.remove_tool("save_record")
    n = len(events(ctx, b))
    mcp(ctx, b, "save_record", key="k", value="v")
    run(ctx, b)
    later = [e["type"] for e in events(ctx, b)[n:]]
    assert later[:3] == ["user_input", "tools_changed", "model_request"]
    names = [s["name"] for s in of_type(ctx, b, "tools_changed")[-1]["data"]["tools"]]
    assert "mcp__demo__save_record" not in names and "mcp__demo__delete_record" in names
    (decision,) = of_type(ctx, b, "permission_decision")  # the model called a tool it no longer has
    assert decision["data"]["decision"] == "deny"
    verify_export(ctx, b)


def test_an_unreachable_server_keeps_the_pinned_tools(aws, demo):
    ctx = make_ctx(aws)
    b = thread(ctx)
    say(ctx, b, "hi")
    run(ctx, b)
    demo.stop()
    mcp(ctx, b, "lookup_rate", currency="EUR")
    assert run(ctx, b).state == "idle"
    assert types(ctx, b).count("tools_changed") == 1  # no listing: the set stays as pinned
    (res,) = of_type(ctx, b, "tool_result")
    assert res["data"]["is_error"] and "cannot" in res["data"]["preview"]
    verify_export(ctx, b)


def test_header_values_come_from_secret_references(aws, monkeypatch):
    server = DemoMcp(token="s3cret").start()
    try:
        monkeypatch.setenv("DEMO_MCP_TOKEN", "s3cret")
        decl = {
            "url": server.url,
            "headers": {"Authorization": {"env": "DEMO_MCP_TOKEN", "prefix": "Bearer "}},
        }
        agent = {
            "model": {"provider": "demo", "name": "demo-1"},
            "adapter": {"name": "demo", "version": "1"},
            "instructions": "",
            "mcp_servers": {"demo": decl},
        }
        step = StepMcp()
        try:
            draft = sync_tools(step, parse_agents(json.dumps({"a": agent}))["a"], [])
        finally:
            step.close()
        assert draft is not None and len(draft.data["tools"]) == 3
        monkeypatch.setenv("DEMO_MCP_TOKEN", "wrong")
        step = StepMcp()
        try:
            assert sync_tools(step, parse_agents(json.dumps({"a": agent}))["a"], []) is None  # refused
        finally:
            step.close()
    finally:
        server.stop()


def test_a_lost_append_race_re_derives_the_same_tools_changed(demo):
    agent = parse_agents(
        json.dumps(
            {
                "a": {
                    "model": {"provider": "demo", "name": "demo-1"},
                    "adapter": {"name": "demo", "version": "1"},
                    "instructions": "",
                    "mcp_servers": {"demo": {"url": demo.url}},
                }
            }
        )
    )["a"]
    step = StepMcp()
    try:
        first = sync_tools(step, agent, [])
        again = sync_tools(step, agent, [])  # the append lost a race: the next decision asks again
        assert first is not None and again is not None and first.data == again.data
        assert step.conns.requests == {"demo": 1}  # listed once per step
        assert sync_tools(step, agent, first.data["tools"]) is None  # once appended: nothing more
    finally:
        step.close()


def test_the_effect_key_goes_in_the_calls_meta_and_the_server_may_dedup_on_it(aws, demo):
    from threads_aws.engine.mcp_tools import McpTool
    from threads_aws.engine.tools import ToolContext

    step = StepMcp()
    decl = {"url": demo.url}
    tool = McpTool(step, "demo", decl, "mcp__demo__save_record")

    def tc(attempt: int) -> ToolContext:
        return ToolContext("acme", "t", "b", "c1", "b:c1", attempt, lambda: 0, None)  # type: ignore[arg-type]

    try:
        outs = [tool({"key": "k", "value": "v"}, tc(n)) for n in (1, 2)]
    finally:
        step.close()
    assert [o.text for o in outs] == ["saved k", "saved k"]
    assert demo.calls == [("save_record", {"key": "k", "value": "v"})]  # the re-send applied nothing
    assert demo.saved == {"b:c1": "saved k"}
