"""Crash injection for spawn: the worker dies right before or right after each of its appends
and each child-thread creation (on the parent and on the child, i.e. at every point between two
of them), a fresh worker takes over once the lease lapses, and the tree still ends where a clean
run ends: one agent_spawned, one child thread with that id, one agent_finished, the note stored
exactly once, the parent's run completed with the child's answer, every log valid."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.engine import (
    Crash,
    crashing,
    events,
    make_ctx,
    new_thread,
    notes_stored,
    of_type,
    run,
    say,
    verify_export,
)
from helpers.host import ALICE, make_host
from threads_aws.core import projections
from threads_aws.engine.step import EngineContext

TASK = "spawn: demo: note: buy milk"


def children(ctx: EngineContext, parent: str) -> list[str]:
    out = []
    for ev in of_type(ctx, parent, "agent_spawned"):
        thread = ctx.stores.threads.get_thread("acme", ev["data"]["child_thread_id"])
        if thread is not None:
            out.append(thread.main_branch_id)
    return out


def step_tree(ctx: EngineContext, host: Any, parent: str) -> bool:
    """One round: step the parent and every child, the root's approver granting what a child
    asks. True once the parent is idle with its turn done."""
    state = run(ctx, parent, holder="w").state
    for child in children(ctx, parent):
        run(ctx, child, holder="w")
        f = host.writer.load(child).fold
        for cid, ch in f.challenges.items():
            if not ch.consumed:
                host.decide_approval(ALICE, f.thread_id, cid, {"decision": "grant"})
    f = host.writer.load(parent).fold
    return state == "idle" and not f.turn_open and f.turns_completed > 0


def clean_points(aws: Any) -> int:
    ctx, points = crashing(aws, at=-1, when="after")
    host = make_host(aws)
    parent = new_thread(make_ctx(aws))
    say(make_ctx(aws), parent, TASK)
    for _ in range(12):
        if step_tree(ctx, host, parent):
            return points.n
    raise AssertionError("no progress")


@pytest.mark.parametrize("when", ["before", "after"])
def test_spawn_survives_a_crash_at_every_step(aws: Any, when: str) -> None:
    total = clean_points(aws)
    assert total >= 10
    for at in range(1, total + 1):
        label = f"crash {when} step {at}"
        before = notes_stored(aws)
        ctx, _ = crashing(aws, at, when)
        host = make_host(aws)
        parent = new_thread(make_ctx(aws))
        run_id = say(make_ctx(aws), parent, TASK)
        crashed = False
        for _ in range(12):
            try:
                if step_tree(ctx, host, parent):
                    break
            except Crash:
                crashed = True
                break
        assert crashed, label
        aws.clock.advance(120_000)  # the dead worker's lease lapses
        fresh = make_ctx(aws)
        for _ in range(12):
            if step_tree(fresh, host, parent):
                break
        else:
            raise AssertionError(f"{label}: no progress after the crash")
        spawned = of_type(fresh, parent, "agent_spawned")
        assert len(spawned) == 1, label
        (child,) = children(fresh, parent)
        assert len(of_type(fresh, parent, "agent_finished")) == 1, label
        assert of_type(fresh, parent, "agent_finished")[0]["data"]["status"] == "completed", label
        outcome = projections.run_outcome(events(fresh, parent), run_id, thread_id="t", branch_id=parent)
        assert outcome is not None and outcome["status"] == "completed", label
        assert notes_stored(aws) - before == 1, label
        assert [e["type"] for e in events(fresh, child)][:2] == ["thread_started", "user_input"], label
        assert len(of_type(fresh, child, "user_input")) == 1, label
        for b in (parent, child):
            assert fresh.writer.load(b).fold.quiescent(), label
            verify_export(fresh, b)
        kids = projections.children(verify_export(fresh, parent).fold.events)
        assert kids == [{"child_thread_id": spawned[0]["data"]["child_thread_id"], "status": "completed"}]
