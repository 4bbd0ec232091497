"""Subagents on moto with the demo model (issue 11 §3): `spawn: demo: <task>` runs a child
thread of the demo agent; the child's approval parks the parent (`parked{kind: child}`), the
ROOT's approver answers it through the child's approval route, the child's result comes back as
`agent_finished` + the call's result; child and ancestor budgets cover the child; a tree cancel
reaches the child first. Every log exports, re-imports and reduces; the `children` projection
says what happened."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.engine import (
    Crash,
    dies_creating_a_thread,
    events,
    make_ctx,
    new_thread,
    of_type,
    run,
    say,
    scripted,
    types,
    verify_export,
)
from helpers.host import ALICE, BOB, make_host
from threads_aws.core import projections
from threads_aws.core.importer import import_log
from threads_aws.engine.models import ScriptedModel
from threads_aws.engine.step import EngineContext
from threads_aws.host.errors import ApiError
from threads_aws.writer import Draft


def tool_use(args: dict[str, Any]) -> dict[str, Any]:
    return {"call_id": "c1", "input": args, "name": "spawn_agent", "type": "tool_use"}


def child_of(ctx: EngineContext, parent: str, n: int = 0) -> tuple[str, str]:
    """(child thread id, its main branch) of the parent's n-th agent_spawned."""
    spawned = of_type(ctx, parent, "agent_spawned")[n]
    tid = spawned["data"]["child_thread_id"]
    thread = ctx.stores.threads.get_thread("acme", tid)
    assert thread is not None
    return tid, thread.main_branch_id


def pending_challenge(ctx: EngineContext, branch: str) -> str:
    f = ctx.writer.load(branch).fold
    return next(k for k, c in f.challenges.items() if not c.consumed)


def reduced(ctx: EngineContext, branch: str) -> dict[str, Any]:
    """The exported log re-imported and reduced (the projections of the re-imported events)."""
    imp = verify_export(ctx, branch)
    again = import_log(ctx.store.export(branch))
    assert [e["event_id"] for e in again.fold.events] == [e["event_id"] for e in imp.fold.events]
    return dict(projections.all_projections(imp.fold.events))


def test_spawn_child_approval_by_root_approver_result_reaches_parent(aws: Any) -> None:
    ctx, host = make_ctx(aws), make_host(aws)
    parent = new_thread(ctx)
    run_id = say(ctx, parent, "spawn: demo: note: buy milk")
    assert run(ctx, parent).state == "parked"  # waiting on its child (no park yet)
    assert types(ctx, parent)[-3:] == ["tool_call", "permission_decision", "agent_spawned"]
    spawned = of_type(ctx, parent, "agent_spawned")[0]
    assert spawned["data"] | {"child_thread_id": "x"} == {
        "agent_name": "demo",
        "call_id": spawned["data"]["call_id"],
        "child_thread_id": "x",
        "isolation": "none",
        "mode": "foreground",
    }
    tid, child = child_of(ctx, parent)
    first = events(ctx, child)
    assert first[0]["data"]["parent"] == {
        "branch_id": parent,
        "event_id": spawned["event_id"],
        "relation": "subagent",
        "thread_id": spawned["thread_id"],
    }
    assert first[1]["type"] == "user_input"
    assert first[1]["data"] == {"source": "parent_agent", "text": "note: buy milk"}
    assert first[1]["actor"] == {"kind": "host", "principal": ALICE.as_dict()}

    assert run(ctx, child).state == "parked"  # the child's note asks for approval
    assert run(ctx, parent).state == "parked"
    park = of_type(ctx, parent, "parked")[-1]["data"]
    assert park == {"address": {"id": tid, "kind": "child"}, "reason": "awaiting_approval"}
    assert projections.run_outcome(events(ctx, parent), run_id, thread_id="t", branch_id=parent)[
        "status"
    ] == ("parked")

    challenge = pending_challenge(ctx, child)
    with pytest.raises(ApiError) as denied:  # not the root's approver
        host.decide_approval(BOB, tid, challenge, {"decision": "grant"})
    assert denied.value.code == "forbidden"
    host.decide_approval(ALICE, tid, challenge, {"decision": "grant"})  # the root run's principal

    assert run(ctx, child).state == "idle"
    assert run(ctx, parent).state == "idle"
    assert types(ctx, parent)[6:] == [
        "agent_spawned",
        "parked",
        "resumed",
        "agent_finished",
        "tool_result",
        "model_request",
        "model_response",
        "turn_completed",
    ]
    resumed = of_type(ctx, parent, "resumed")[-1]["data"]
    assert resumed == {"address": {"id": tid, "kind": "child"}, "cause_event_id": spawned["event_id"]}
    finished = of_type(ctx, parent, "agent_finished")[0]["data"]
    assert finished["child_thread_id"] == tid and finished["status"] == "completed"
    child_usage = ctx.writer.load(child).fold
    assert finished["usage"] == {"input_tokens": child_usage.usage_in, "output_tokens": child_usage.usage_out}
    text = ctx.artifacts.get_ref(finished["output_ref"]).decode()
    assert text.startswith("Done: ")
    (res,) = [
        e for e in of_type(ctx, parent, "tool_result") if e["data"]["call_id"] == spawned["data"]["call_id"]
    ]
    assert res["data"]["preview"] == text and res["data"]["is_error"] is False
    outcome = projections.run_outcome(events(ctx, parent), run_id, thread_id="t", branch_id=parent)
    assert outcome is not None and outcome["status"] == "completed"
    assert outcome["output"] == f"Done: {text}"

    state = reduced(ctx, parent)
    assert state["children"] == [{"child_thread_id": tid, "status": "completed"}]
    detail = host.thread(ALICE, spawned["thread_id"])  # the API agrees with the projection
    assert detail["children"] == state["children"] and "parent" not in detail
    assert host.thread(ALICE, tid)["parent"] == first[0]["data"]["parent"]
    assert reduced(ctx, child)["run"]["status"] == "completed"
    assert len(of_type(ctx, child, "approval_granted")) == 1


def test_child_budget_and_ancestor_budgets_cover_the_child(aws: Any) -> None:
    """A run budget on the parent covers its child as an ancestor: the child's request is
    refused `budget_exceeded{scope: ancestor, owner_thread_id: parent thread}` once the parent's
    run used it up; the child ends budget_exhausted and the parent's call says so."""
    ctx = make_ctx(aws)
    parent = new_thread(ctx)
    ctx.writer.append(
        parent,
        [
            Draft(
                "user_input",
                {"budget": {"max_model_requests": 1}, "source": "api", "text": "spawn: demo: hello"},
                {"kind": "user", "principal": ALICE.as_dict()},
            )
        ],
    )
    assert run(ctx, parent).state == "parked"
    _, child = child_of(ctx, parent)
    assert run(ctx, child).state == "idle"
    (refusal,) = of_type(ctx, child, "budget_exceeded")
    assert refusal["data"]["scope"] == "ancestor"
    assert refusal["data"]["owner_thread_id"] == events(ctx, parent)[0]["thread_id"]
    assert run(ctx, parent).state == "idle"
    finished = of_type(ctx, parent, "agent_finished")[0]["data"]
    assert finished["status"] == "budget_exhausted"
    res = of_type(ctx, parent, "tool_result")[-1]["data"]
    assert res["is_error"] is True and res["preview"] == "budget_exhausted: budget_exhausted"
    assert reduced(ctx, parent)["children"][0]["status"] == "budget_exhausted"


def test_child_budget_of_the_spawn_call_is_the_child_runs_budget(aws: Any) -> None:
    ctx = make_ctx(aws)
    use = {"agent": "demo", "budget": {"max_model_requests": 5}, "prompt": "hello"}
    model = ScriptedModel([{"content": [tool_use(use)], "stop_reason": "tool_use"}])
    pctx = make_ctx(aws, models=scripted(model))
    parent = new_thread(ctx)
    say(ctx, parent, "go")
    assert run(pctx, parent).state == "parked"
    spawned = of_type(ctx, parent, "agent_spawned")[0]["data"]
    assert spawned["budget"] == {"max_model_requests": 5}
    _, child = child_of(ctx, parent)
    assert events(ctx, child)[1]["data"]["budget"] == {"max_model_requests": 5}


def test_tree_cancel_reaches_the_child_first(aws: Any) -> None:
    """Cancel on the parent while its child is parked: the child gets cancel_requested{scope:
    tree} (principal = the canceller) and ends cancelled; the parent then writes agent_finished,
    the call's result, cancelled, turn_completed{cancelled} in that order."""
    ctx, host = make_ctx(aws), make_host(aws)
    parent = new_thread(ctx)
    say(ctx, parent, "spawn: demo: note: buy milk")
    run(ctx, parent)
    tid, child = child_of(ctx, parent)
    run(ctx, child)
    run(ctx, parent)  # parked on the child
    host.cancel(ALICE, events(ctx, parent)[0]["thread_id"], None)
    assert run(ctx, parent).state == "parked"  # waits for the child's end
    barrier = of_type(ctx, child, "cancel_requested")[0]
    assert barrier["data"] == {"reason": "ancestor cancelled", "scope": "tree"}
    assert barrier["actor"] == {"kind": "host", "principal": ALICE.as_dict()}
    assert run(ctx, child).state == "idle"
    assert of_type(ctx, child, "turn_completed")[-1]["data"] == {"reason": "cancelled"}
    assert run(ctx, parent).state == "idle"
    evs = [e["type"] for e in events(ctx, parent)]
    at = evs.index("cancel_requested")
    order = [t for t in evs[at:] if t in ("agent_finished", "tool_result", "cancelled", "turn_completed")]
    assert order == ["agent_finished", "tool_result", "cancelled", "turn_completed"]
    assert of_type(ctx, parent, "agent_finished")[0]["data"]["status"] == "cancelled"
    assert not ctx.writer.load(parent).fold.parked
    assert reduced(ctx, parent)["children"] == [{"child_thread_id": tid, "status": "cancelled"}]
    reduced(ctx, child)


def test_spawn_of_an_agent_not_listed_closes_the_call(aws: Any) -> None:
    ctx = make_ctx(aws)
    use = {"agent": "openai", "prompt": "hello"}
    model = ScriptedModel([{"content": [tool_use(use)], "stop_reason": "tool_use"}])
    pctx = make_ctx(aws, models=scripted(model))
    parent = new_thread(ctx)
    say(ctx, parent, "go")
    run(pctx, parent)
    assert not of_type(ctx, parent, "agent_spawned")
    decision = of_type(ctx, parent, "permission_decision")[0]["data"]
    assert decision["decision"] == "deny"  # the input schema's enum names the agent's subagents
    verify_export(ctx, parent)


def test_a_grandchild_park_reaches_the_root_and_answers_to_its_approver(aws: Any) -> None:
    """`spawn: demo: spawn: demo: note: x`: the grandchild's approval parks the child, which
    parks the root; the root run's principal grants it on the grandchild's route; the answer
    climbs back up, each level's agent_finished once."""
    ctx, host = make_ctx(aws), make_host(aws)
    root = new_thread(ctx)
    run_id = say(ctx, root, "spawn: demo: spawn: demo: note: x")
    run(ctx, root)
    _, child = child_of(ctx, root)
    run(ctx, child)
    gtid, grandchild = child_of(ctx, child)
    assert events(ctx, grandchild)[0]["data"]["parent"]["branch_id"] == child
    assert run(ctx, grandchild).state == "parked"
    assert run(ctx, child).state == "parked"
    assert run(ctx, root).state == "parked"
    assert of_type(ctx, child, "parked")[-1]["data"]["address"] == {"id": gtid, "kind": "child"}
    assert of_type(ctx, root, "parked")[-1]["data"]["reason"] == "awaiting_approval"
    challenge = pending_challenge(ctx, grandchild)
    with pytest.raises(ApiError):
        host.decide_approval(BOB, gtid, challenge, {"decision": "grant"})
    host.decide_approval(ALICE, gtid, challenge, {"decision": "grant"})
    for b in (grandchild, child, root):
        assert run(ctx, b).state == "idle"
    outcome = projections.run_outcome(events(ctx, root), run_id, thread_id="t", branch_id=root)
    assert outcome is not None and outcome["status"] == "completed"
    for b in (root, child, grandchild):
        assert len(of_type(ctx, b, "turn_completed")) == 1
        reduced(ctx, b)
    assert [c["status"] for c in reduced(ctx, child)["children"]] == ["completed"]


def test_a_child_agent_undeployed_before_its_creation_finishes_failed(aws: Any) -> None:
    """agent_spawned is durable, the worker died before creating the child, and the next worker
    no longer deploys that agent: the call finishes `failed` (one agent_finished), nothing hangs."""
    dying = dies_creating_a_thread(aws)
    parent = new_thread(dying)
    say(dying, parent, "spawn: demo: hello")
    with pytest.raises(Crash):
        run(dying, parent)
    aws.clock.advance(120_000)
    fresh = make_ctx(aws)
    fresh.agents = {k: v for k, v in (fresh.agents or {}).items() if k != "demo"}
    run(fresh, parent)
    (finished,) = of_type(fresh, parent, "agent_finished")
    assert finished["data"]["status"] == "failed"
    assert reduced(fresh, parent)["children"][0]["status"] == "failed"
