"""Subagent isolation on moto (semantics §8 "Subagents": `agent_spawned.isolation`;
`engine.isolation`): each value's real file outcome in the parent's and the child's workspace,
driven by the demo model's `spawn <isolation>: <agent>: <task>` (and a scripted parent where it
must write while a background child runs). Every log exports, re-imports and reduces."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.engine import (
    Crash,
    crashing,
    events,
    make_ctx,
    new_thread,
    of_type,
    run,
    say,
    types,
    verify_export,
)
from threads_aws.engine.demo_model import DemoModel
from threads_aws.engine.models import ScriptedModel
from threads_aws.engine.step import EngineContext
from threads_aws.sandbox.workspace import Workspace


def files(ctx: EngineContext, branch: str) -> dict[str, str]:
    """The branch's workspace as its fold names it, read back from S3."""
    ws = Workspace(ctx.artifacts)
    m = ws.manifest(ctx.writer.load(branch).fold.workspace)
    return {p: ws.read(m, p).decode() for p in m.paths()}


def child_branch(ctx: EngineContext, parent: str) -> str:
    (spawned,) = of_type(ctx, parent, "agent_spawned")
    thread = ctx.stores.threads.get_thread("acme", spawned["data"]["child_thread_id"])
    assert thread is not None
    return thread.main_branch_id


def spawn_over_a_workspace(aws: Any, command: str) -> tuple[EngineContext, str, str]:
    """A parent holding a.txt spawns `command`; the child and then the parent run to idle."""
    ctx = make_ctx(aws)
    parent = new_thread(ctx)
    say(ctx, parent, "write a.txt: the parent's")
    assert run(ctx, parent).state == "idle"
    say(ctx, parent, command)
    assert run(ctx, parent).state == "parked"  # waiting on its child
    child = child_branch(ctx, parent)
    assert run(ctx, child).state == "idle"
    assert run(ctx, parent).state == "idle"
    verify_export(ctx, parent)
    verify_export(ctx, child)
    return ctx, parent, child


def finished_text(ctx: EngineContext, parent: str) -> str:
    (finished,) = of_type(ctx, parent, "agent_finished")
    return ctx.artifacts.get_ref(finished["data"]["output_ref"]).decode()


def isolation_of(ctx: EngineContext, parent: str) -> str:
    (spawned,) = of_type(ctx, parent, "agent_spawned")
    return str(spawned["data"]["isolation"])


def test_none_the_child_has_its_own_empty_workspace(aws: Any) -> None:
    ctx, parent, child = spawn_over_a_workspace(aws, "spawn: demo: write b.txt: the child's")
    assert isolation_of(ctx, parent) == "none"
    assert files(ctx, child) == {"b.txt": "the child's"}  # no a.txt: nothing shared
    assert files(ctx, parent) == {"a.txt": "the parent's"}
    assert events(ctx, child)[1]["type"] == "user_input"  # no copy of any workspace


def test_forked_sandbox_copies_the_parent_and_its_writes_stay_in_the_child(aws: Any) -> None:
    ctx, parent, child = spawn_over_a_workspace(aws, "spawn forked_sandbox: demo: write a.txt: the child's")
    assert isolation_of(ctx, parent) == "forked_sandbox"
    first = events(ctx, child)[1]
    assert first["type"] == "snapshot"  # the copy: the parent's manifest at the spawn
    assert first["data"]["manifest_hash"] == of_type(ctx, parent, "snapshot")[0]["data"]["manifest_hash"]
    assert files(ctx, child) == {"a.txt": "the child's"}
    assert files(ctx, parent) == {"a.txt": "the parent's"}  # the child's write never reached it
    assert len(of_type(ctx, parent, "snapshot")) == 1
    assert "[" not in finished_text(ctx, parent)  # nothing offered back


def test_forked_child_reads_the_parents_files(aws: Any) -> None:
    ctx, parent, child = spawn_over_a_workspace(aws, "spawn forked_sandbox: demo: read a.txt")
    (result,) = [e for e in of_type(ctx, child, "tool_result")]
    assert result["data"]["preview"] == "the parent's" and not result["data"]["is_error"]


def test_worktree_merges_the_childs_changes_back(aws: Any) -> None:
    ctx, parent, child = spawn_over_a_workspace(aws, "spawn worktree: demo: write b.txt: the child's")
    assert isolation_of(ctx, parent) == "worktree"
    assert files(ctx, child) == {"a.txt": "the parent's", "b.txt": "the child's"}
    assert files(ctx, parent) == {"a.txt": "the parent's", "b.txt": "the child's"}
    assert "[worktree: merged into your workspace: b.txt (added)]" in finished_text(ctx, parent)
    i = types(ctx, parent).index("agent_finished")
    assert types(ctx, parent)[i : i + 3] == ["agent_finished", "tool_result", "snapshot"]
    # the write-back snapshot sits inside the turn (no fork point); the turn's end captures one
    fold = ctx.writer.load(parent).fold
    assert types(ctx, parent)[-2:] == ["turn_completed", "snapshot"]
    assert [p["seq"] for p in fold.fork_points()][-1] == len(fold.events)


def test_shared_sandbox_writes_land_in_the_parents_workspace(aws: Any) -> None:
    ctx, parent, child = spawn_over_a_workspace(aws, "spawn shared_sandbox: demo: write a.txt: the child's")
    assert isolation_of(ctx, parent) == "shared_sandbox"
    assert files(ctx, parent) == {"a.txt": "the child's"}
    assert files(ctx, child) == {"a.txt": "the child's"}
    assert "[shared_sandbox: the child changed a.txt (modified)]" in finished_text(ctx, parent)


def background_conflict(aws: Any, isolation: str) -> tuple[EngineContext, str]:
    """A background child writes a.txt while its parent writes a.txt too (one response: the
    spawn, then the parent's own write)."""
    spawn = {
        "agent": "demo",
        "background": True,
        "isolation": isolation,
        "prompt": "write a.txt: theirs",
    }
    uses = [
        {"type": "tool_use", "call_id": "call_bg_1", "name": "spawn_agent", "input": spawn},
        {
            "type": "tool_use",
            "call_id": "call_w_1",
            "name": "write_file",
            "input": {"path": "a.txt", "content": "mine"},
        },
    ]
    first = ScriptedModel([{"content": uses, "stop_reason": "tool_use"}])
    armed: list[int] = []

    def models(_m: Any, _a: Any) -> Any:  # the scripted answer once, to the request after "go"
        return first if armed and armed.pop() else DemoModel()

    ctx = make_ctx(aws, models=models)
    parent = new_thread(ctx)
    say(ctx, parent, "write a.txt: the original")
    assert run(ctx, parent).state == "idle"
    say(ctx, parent, "go")
    armed.append(1)
    assert run(ctx, parent).state == "wait"  # the turn goes on while the child runs
    assert files(ctx, parent) == {"a.txt": "mine"}
    child = child_branch(ctx, parent)
    assert events(ctx, child)[1]["type"] == "snapshot"  # its copy: the workspace AT the spawn
    assert run(ctx, child).state == "idle"
    assert files(ctx, child) == {"a.txt": "theirs"}
    assert run(ctx, parent).state == "idle"
    verify_export(ctx, parent)
    verify_export(ctx, child)
    return ctx, parent


def test_worktree_conflict_merges_nothing_and_says_where(aws: Any) -> None:
    ctx, parent = background_conflict(aws, "worktree")
    assert files(ctx, parent) == {"a.txt": "mine"}
    text = finished_text(ctx, parent)
    assert "[worktree: not merged, changed here too: a.txt; its changes: a.txt (modified)]" in text
    (late,) = of_type(ctx, parent, "tool_result_late")
    assert "not merged" in late["data"]["preview"]


def test_shared_sandbox_background_child_writes_over_the_parents(aws: Any) -> None:
    ctx, parent = background_conflict(aws, "shared_sandbox")
    assert files(ctx, parent) == {"a.txt": "theirs"}  # the later write, in the one sandbox


def test_an_unknown_isolation_closes_the_call(aws: Any) -> None:
    use = {"agent": "demo", "isolation": "vm", "prompt": "time"}
    first = ScriptedModel(
        [
            {
                "content": [{"type": "tool_use", "call_id": "c1", "name": "spawn_agent", "input": use}],
                "stop_reason": "tool_use",
            },
            {"content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn"},
        ]
    )
    ctx = make_ctx(aws, models=lambda _m, _a: first)
    parent = new_thread(ctx)
    say(ctx, parent, "go")
    assert run(ctx, parent).state == "idle"
    assert not of_type(ctx, parent, "agent_spawned")
    (result,) = of_type(ctx, parent, "tool_result")
    assert result["data"]["is_error"]


# ------------------------------------------------------------------ crashes
WORKTREE = "spawn worktree: demo: write b.txt: the child's"


def step_tree(ctx: EngineContext, parent: str) -> bool:
    """One round: the parent, then its child. True once the parent's turn is done."""
    state = run(ctx, parent, holder="w").state
    for ev in of_type(ctx, parent, "agent_spawned"):
        thread = ctx.stores.threads.get_thread("acme", ev["data"]["child_thread_id"])
        if thread is not None:
            run(ctx, thread.main_branch_id, holder="w")
    f = ctx.writer.load(parent).fold
    return state == "idle" and not f.turn_open and f.turns_completed > 1


def parent_with_a_file(aws: Any) -> str:
    ctx = make_ctx(aws)
    parent = new_thread(ctx)
    say(ctx, parent, "write a.txt: the parent's")
    assert run(ctx, parent).state == "idle"
    say(ctx, parent, WORKTREE)
    return parent


@pytest.mark.parametrize("when", ["before", "after"])
def test_worktree_write_back_survives_a_crash_at_every_step(aws: Any, when: str) -> None:
    """The worker dies before / after each append and thread creation of the spawn, the child
    and the write-back; a fresh worker ends where a clean run ends: the child's copy once, its
    change merged once (one write-back snapshot), every log valid."""
    counting, points = crashing(aws, at=-1, when="after")
    parent = parent_with_a_file(aws)
    assert any(step_tree(counting, parent) for _ in range(12))
    total = points.n
    assert total >= 6
    for at in range(1, total + 1):
        label = f"crash {when} step {at}"
        ctx, _ = crashing(aws, at, when)
        parent = parent_with_a_file(aws)
        with pytest.raises(Crash):
            for _ in range(12):
                step_tree(ctx, parent)
        aws.clock.advance(120_000)  # the dead worker's lease lapses
        fresh = make_ctx(aws)
        assert any(step_tree(fresh, parent) for _ in range(12)), label
        assert len(of_type(fresh, parent, "agent_finished")) == 1, label
        child = child_branch(fresh, parent)
        assert types(fresh, child)[:3] == ["thread_started", "snapshot", "user_input"], label
        assert files(fresh, parent) == {"a.txt": "the parent's", "b.txt": "the child's"}, label
        # the first turn's end, the write-back (inside the turn), the second turn's end
        assert len(of_type(fresh, parent, "snapshot")) == 3, label
        for b in (parent, child):
            assert fresh.writer.load(b).fold.quiescent(), label
            verify_export(fresh, b)
