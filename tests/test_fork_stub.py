"""Stub-mode forks (semantics.md §6 "`stub` mode", `sandbox.stubs`) through the host and the
run-step worker: no sandbox restore and no ledger row; the child's external operations are
answered from the parent's recordings after the fork point by `(tool, args_hash, occurrence)`,
consumed in order, never going live; a miss fails closed (`effect_resolved{not_sent}`, the run
ends `unmatched_external_op`); workspace tools act on the child's own copy. The recordings are
checked against the conformance `StubScript` schema (the `stub` kind's data shape)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from helpers.engine import (
    Crash,
    CrashAfter,
    grant,
    make_ctx,
    new_thread,
    notes_stored,
    of_type,
    run,
    say,
    types,
    verify_export,
)
from helpers.host import ALICE, make_host
from threads_aws.core.canonical import canonical_hash
from threads_aws.core.projections import run_outcome
from threads_aws.sandbox import fork as forking

ALLOW = ["time", "todo_write", "ask_user", "read_file", "write_file", "edit_file", "list_files", "note"]
CASE_SCHEMA = Path(__file__).resolve().parents[1] / ".." / "shared" / "conformance" / "case.schema.json"


def results(ctx: Any, b: str) -> list[dict[str, Any]]:
    return [e["data"] for e in of_type(ctx, b, "tool_result")]


def parent_with_a_note(aws: Any) -> tuple[Any, Any, str, str, dict[str, Any]]:
    """A parent that wrote notes.txt (its snapshot is the fork point), then stored one note."""
    host, ctx = make_host(aws), make_ctx(aws)
    b = new_thread(ctx, allow=ALLOW, ask=[])
    say(ctx, b, "write notes.txt: v1")
    run(ctx, b)
    say(ctx, b, "note: buy milk")
    run(ctx, b)
    assert results(ctx, b)[-1]["preview"] == "stored note 1" and notes_stored(aws) == 1
    tid = ctx.writer.load(b).thread_id
    (point,) = host.fork_points(ALICE, tid, b)
    return host, ctx, b, tid, point


def outcome(ctx: Any, b: str, run_id: str) -> dict[str, Any]:
    view = ctx.writer.load(b)
    got = run_outcome(view.fold.events, run_id, thread_id=view.thread_id, branch_id=b)
    assert got is not None
    return got


def test_stub_fork_replays_recordings_and_fails_closed_on_a_miss(aws: Any) -> None:
    host, ctx, b, tid, point = parent_with_a_note(aws)
    parent_bytes = ctx.store.export(b)
    child = host.fork(ALICE, tid, b, {"event_id": point["event_id"], "mode": "stub"})
    c = child["branch_id"]
    assert ctx.store.export(b) == parent_bytes  # the parent is byte-unchanged
    assert host.stores.resources.rows(c) == []  # nothing restored, nothing created
    info = next(x for x in host.branches(ALICE, tid) if x["branch_id"] == c)
    assert info["mode"] == "stub" and info["runnable"] is True
    assert next(x for x in host.branches(ALICE, tid) if x["branch_id"] == b)["mode"] == "live"
    fork_ev = ctx.writer.load(c).fold.events[point["seq"]]
    assert fork_ev["type"] == "fork" and fork_ev["data"]["sandbox_id"] == "stub"

    # The recordings: the parent's one external op after the fork point, as a StubScript.
    rec = ctx.store.head(c)
    script = json.loads(ctx.artifacts.get(rec.stubs_sha256))
    schema = json.loads(CASE_SCHEMA.read_text())
    jsonschema.validate(script, {**schema, "$ref": "#/$defs/StubScript"})
    assert script == {
        "stubs": [
            {
                "args_hash": canonical_hash({"text": "buy milk"}),
                "is_error": False,
                "occurrence": 0,
                "output": "stored note 1",
                "tool": "note",
            }
        ]
    }

    # A match: answered from the recording (committed like a dispatch), nothing stored.
    say(ctx, c, "note: buy milk")
    run(ctx, c)
    assert results(ctx, c)[-1] == {
        "call_id": results(ctx, c)[-1]["call_id"],
        "completeness": "complete",
        "is_error": False,
        "origin": "executed",
        "preview": "stored note 1",
    }
    assert types(ctx, c)[-6:-2] == ["effect_begin", "effect_commit", "tool_result", "model_request"]
    assert notes_stored(aws) == 1

    # Workspace tools act on the child's own copy; read-only tools just run.
    say(ctx, c, "read notes.txt")
    run(ctx, c)
    assert results(ctx, c)[-1]["preview"] == "v1"
    say(ctx, c, "write notes.txt: v2 in the stub child")
    run(ctx, c)
    say(ctx, c, "read notes.txt")
    run(ctx, c)
    assert results(ctx, c)[-1]["preview"] == "v2 in the stub child"

    # The same op again is occurrence 1: no recording, so it fails closed.
    run_id = say(ctx, c, "note: buy milk")
    before = len(types(ctx, c))
    run(ctx, c)
    tail = of_type(ctx, c, "effect_resolved")[-1]["data"]
    assert types(ctx, c)[before:][-4:] == ["effect_begin", "effect_resolved", "tool_result", "turn_completed"]
    assert tail == {"by": "adapter", "call_id": tail["call_id"], "outcome": "not_sent"}
    miss = results(ctx, c)[-1]
    assert miss["origin"] == "not_executed" and miss["is_error"] is True
    assert miss["preview"].startswith("unmatched_external_op")
    assert of_type(ctx, c, "turn_completed")[-1]["data"] == {"reason": "error"}
    failed = outcome(ctx, c, run_id)
    assert failed["status"] == "failed" and failed["error"]["code"] == "unmatched_external_op"
    assert notes_stored(aws) == 1  # nothing went live

    # The parent is live and independent: its files and its next note are its own.
    say(ctx, b, "read notes.txt")
    run(ctx, b)
    assert results(ctx, b)[-1]["preview"] == "v1"
    say(ctx, b, "note: buy milk")
    run(ctx, b)
    assert results(ctx, b)[-1]["preview"] == "stored note 2" and notes_stored(aws) == 2
    verify_export(ctx, b)
    verify_export(ctx, c)


def test_a_different_input_is_a_miss_and_a_later_run_goes_on(aws: Any) -> None:
    host, ctx, b, tid, point = parent_with_a_note(aws)
    c = host.fork(ALICE, tid, b, {"event_id": point["event_id"], "mode": "stub"})["branch_id"]
    run_id = say(ctx, c, "note: buy bread")
    run(ctx, c)
    assert outcome(ctx, c, run_id)["error"]["code"] == "unmatched_external_op"
    ok = say(ctx, c, "note: buy milk")  # the recording was never consumed: occurrence 0 matches
    run(ctx, c)
    assert outcome(ctx, c, ok)["status"] == "completed"
    assert results(ctx, c)[-1]["preview"] == "stored note 1" and notes_stored(aws) == 1
    verify_export(ctx, c)


def test_stub_fork_needs_no_sandbox_and_keeps_the_typed_errors(aws: Any) -> None:
    host, ctx, b, tid, point = parent_with_a_note(aws)
    host.sandbox = None
    with pytest.raises(Exception) as live:  # noqa: PT011 - ApiError, typed
        host.fork(ALICE, tid, b, {"event_id": point["event_id"]})
    assert live.value.code == "sandbox_required"  # type: ignore[attr-defined]
    note_call = of_type(ctx, b, "tool_call")[-1]["event_id"]
    with pytest.raises(Exception) as bad:  # noqa: PT011 - LogError, typed
        host.fork(ALICE, tid, b, {"event_id": note_call, "mode": "stub"})
    assert bad.value.code == "no_snapshot_boundary"  # type: ignore[attr-defined]
    aws.clock.advance(8 * 86_400_000)
    with pytest.raises(Exception) as expired:  # noqa: PT011 - LogError, typed
        host.fork(ALICE, tid, b, {"event_id": point["event_id"], "mode": "stub"})
    assert expired.value.code == "snapshot_expired"  # type: ignore[attr-defined]
    assert [x["branch_id"] for x in host.branches(ALICE, tid)] == [b]  # nothing was created


def test_a_crash_mid_stub_fork_is_never_resumed(aws: Any) -> None:
    host, ctx, b, tid, point = parent_with_a_note(aws)
    child = "0192e000-0000-7000-8000-00000000c0de"
    parent_bytes = ctx.store.export(b)

    def crash(where: str) -> None:
        raise forking.Crash(where)

    with pytest.raises(forking.Crash):
        forking.fork_stub(
            ctx.store,
            ctx.artifacts,
            tenant="acme",
            branch_id=b,
            event_id=point["event_id"],
            new_branch_id=child,
            now=aws.clock(),
            failpoint=crash,
        )
    forking.recover_fork(ctx.store, host.stores.resources, host.sandbox, child)
    assert ctx.store.head(child).state == "fork_failed"
    assert [x["branch_id"] for x in host.branches(ALICE, tid)] == [b]
    assert ctx.store.export(b) == parent_bytes


def mcp_agent() -> Any:
    """demo-tools (the demo MCP server) that can also write the workspace (for a snapshot)."""
    import threads_aws
    from threads_aws.agents import parse_agents

    path = Path(threads_aws.__file__).parent / "data" / "agents.json"
    spec = json.loads(path.read_text())["demo-tools"]
    spec["tools"] = ["time", "write_file", "read_file"]
    spec["permissions"]["allow"] = ["time", "write_file", "read_file"]
    return parse_agents(json.dumps({"a": spec}))["a"]


def mcp_ctx(aws: Any, **kw: Any) -> Any:
    ctx = make_ctx(aws, **kw)
    ctx.agents["a"] = mcp_agent()  # a copy of the container's agents: this context's own
    return ctx


def mcp_thread(ctx: Any) -> tuple[str, str]:
    from threads_aws.core.canonical import new_uuid7
    from threads_aws.core.lines import StoredLine, header_line
    from threads_aws.store.protocol import NewBranch
    from threads_aws.writer import Draft

    tid, b = new_uuid7(), new_uuid7()
    header = StoredLine.of_header(header_line(tid, b, ctx.clock()))
    ctx.store.create_branch(
        NewBranch(thread_id=tid, tenant="acme", branch_id=b, header=header, create_thread=True)
    )
    ctx.writer.append(b, [Draft("thread_started", ctx.agents["a"].thread_started(), {"kind": "host"})])
    return tid, b


@pytest.fixture
def demo_mcp(monkeypatch: pytest.MonkeyPatch) -> Any:
    from threads_aws_dev.local.demo_mcp import DemoMcp

    server = DemoMcp().start()
    monkeypatch.setenv("THREADS_DEMO_MCP_URL", server.url)
    yield server
    server.stop()


def test_a_read_only_mcp_call_is_external_too(aws: Any, demo_mcp: Any) -> None:
    """A read-only call that reaches a server (an MCP tool) is answered from the recordings in
    stub mode; the server never sees the child's calls, and a miss fails closed."""
    host, ctx = make_host(aws), mcp_ctx(aws)
    tid, b = mcp_thread(ctx)
    say(ctx, b, "write notes.txt: v1")
    run(ctx, b)
    say(ctx, b, 'mcp: mcp__demo__lookup_rate {"currency": "usd"}')
    run(ctx, b)
    assert results(ctx, b)[-1]["preview"] == "1 USD = 0.92 EUR"
    assert demo_mcp.calls == [("lookup_rate", {"currency": "usd"})]
    (point,) = host.fork_points(ALICE, tid, b)
    c = host.fork(ALICE, tid, b, {"event_id": point["event_id"], "mode": "stub"})["branch_id"]
    stubs = json.loads(ctx.artifacts.get(ctx.store.head(c).stubs_sha256))["stubs"]
    assert [(s["tool"], s["occurrence"], s["output"]) for s in stubs] == [
        ("mcp__demo__lookup_rate", 0, "1 USD = 0.92 EUR")
    ]

    say(ctx, c, 'mcp: mcp__demo__lookup_rate {"currency": "usd"}')
    run(ctx, c)
    hit = results(ctx, c)[-1]
    assert hit["origin"] == "executed" and hit["preview"] == "1 USD = 0.92 EUR"
    missed = say(ctx, c, 'mcp: mcp__demo__lookup_rate {"currency": "gbp"}')
    run(ctx, c)
    assert results(ctx, c)[-1]["origin"] == "not_executed"
    assert outcome(ctx, c, missed)["error"]["code"] == "unmatched_external_op"
    assert "effect_begin" not in types(ctx, c)[point["seq"] :]  # read-only: no effect events
    assert demo_mcp.calls == [("lookup_rate", {"currency": "usd"})]  # only the parent's
    verify_export(ctx, c)


def test_a_crash_after_begin_in_stub_mode_settles_not_sent_and_replays(aws: Any, demo_mcp: Any) -> None:
    """An unguarded external call (it would park for a human when live) whose worker died
    after its effect_begin: in stub mode nothing went live, so recovery settles it `not_sent`
    (by the adapter) and the re-dispatch is answered from the recording."""
    host, ctx = make_host(aws), mcp_ctx(aws)
    tid, b = mcp_thread(ctx)
    say(ctx, b, "write notes.txt: v1")
    run(ctx, b)
    demo_mcp.records["r1"] = "v"
    say(ctx, b, 'mcp: mcp__demo__delete_record {"key": "r1"}')
    run(ctx, b)
    grant(ctx, b)
    run(ctx, b)
    assert results(ctx, b)[-1]["preview"] == "deleted r1"
    (point,) = host.fork_points(ALICE, tid, b)
    c = host.fork(ALICE, tid, b, {"event_id": point["event_id"], "mode": "stub"})["branch_id"]
    say(ctx, c, 'mcp: mcp__demo__delete_record {"key": "r1"}')
    run(ctx, c)
    grant(ctx, c)

    doomed = mcp_ctx(aws, lease_ttl_ms=1000)
    doomed.writer = CrashAfter(doomed.writer, "effect_begin")
    with pytest.raises(Crash):
        run(doomed, c, holder="doomed")
    aws.clock.advance(2000)  # its lease lapses
    assert run(ctx, c, holder="recovery").state == "idle"
    t = types(ctx, c)[point["seq"] :]
    assert t.count("effect_begin") == 2 and "parked" in t  # the approval's park only
    assert t.index("effect_unknown") < t.index("effect_resolved") < t.index("effect_commit")
    resolved = of_type(ctx, c, "effect_resolved")[-1]["data"]
    assert resolved["outcome"] == "not_sent" and resolved["by"] == "adapter"
    assert results(ctx, c)[-1]["preview"] == "deleted r1" and results(ctx, c)[-1]["origin"] == "executed"
    assert [x[0] for x in demo_mcp.calls] == ["delete_record"]  # the parent's only
    verify_export(ctx, c)


def test_gc_keeps_a_stub_branch_recordings(aws: Any) -> None:
    """The recordings are named by the branch record, not the log: GC must keep them."""
    from threads_aws.sandbox.gc import collect
    from threads_aws.store.records import wall_ms
    from threads_aws.store.sweep import Sweep

    aws.clock.now = wall_ms()  # objects' LastModified is the real clock
    host, ctx, b, tid, point = parent_with_a_note(aws)
    c = host.fork(ALICE, tid, b, {"event_id": point["event_id"], "mode": "stub"})["branch_id"]
    recorded = ctx.store.head(c).stubs_sha256
    s = aws.services()
    sweep = Sweep(s.ddb, aws.resources.state_table, s.s3, aws.resources.bucket)
    aws.clock.now = wall_ms() + 2_000  # LastModified has whole seconds
    report = collect(
        ctx.store, ctx.artifacts, host.stores.resources, sweep, host.sandbox, now=aws.clock(), grace_ms=0
    )
    assert recorded not in report.deleted and ctx.artifacts.exists(recorded)
    say(ctx, c, "note: buy milk")
    run(ctx, c)
    assert results(ctx, c)[-1]["preview"] == "stored note 1"
