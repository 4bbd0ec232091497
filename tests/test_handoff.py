"""Handoff on moto with the demo model (issue 11 §3): `handoff: demo` moves the conversation to
a new thread of the demo agent: `handoff` + the call's result + `turn_completed{handoff}` on the
source (whose run ends handed_off and which takes no new input: rule 26), and on the target
`thread_started.parent{relation: handoff}` + `user_input{source: handoff}` with the forwarded
text; the source's budgets cover the target as ancestors; a crash between the handoff and the
target's creation re-creates the target from the log."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.engine import (
    Crash,
    crashing,
    dies_creating_a_thread,
    events,
    make_ctx,
    new_thread,
    of_type,
    run,
    say,
    types,
    verify_export,
)
from helpers.host import ALICE, make_host
from threads_aws.core import projections
from threads_aws.core.errors import LogError
from threads_aws.host.errors import ApiError
from threads_aws.writer import Draft


def target_of(ctx: Any, source: str) -> tuple[str, str]:
    (ev,) = of_type(ctx, source, "handoff")
    tid = ev["data"]["to_thread_id"]
    thread = ctx.stores.threads.get_thread("acme", tid)
    assert thread is not None
    return tid, thread.main_branch_id


def test_handoff_moves_the_conversation(aws: Any) -> None:
    ctx = make_ctx(aws)
    source = new_thread(ctx)
    run_id = say(ctx, source, "handoff: demo")
    assert run(ctx, source).state == "idle"
    assert types(ctx, source)[-5:] == [
        "tool_call",
        "permission_decision",
        "handoff",
        "tool_result",
        "turn_completed",
    ]
    hand = of_type(ctx, source, "handoff")[0]
    d = hand["data"]
    assert d["to_agent"] == "demo" and d["forwarded"] == "summary"
    forwarded = ctx.artifacts.get_ref(d["forwarded_ref"]).decode()
    assert forwarded == "Handed off from demo. The user's request: handoff: demo"
    assert of_type(ctx, source, "turn_completed")[-1]["data"] == {"reason": "handoff"}
    outcome = projections.run_outcome(events(ctx, source), run_id, thread_id="t", branch_id=source)
    assert (
        outcome is not None
        and outcome["status"] == "handed_off"
        and outcome["to_thread_id"] == d["to_thread_id"]
    )

    tid, target = target_of(ctx, source)
    first = events(ctx, target)
    assert first[0]["data"]["parent"] == {
        "branch_id": source,
        "event_id": hand["event_id"],
        "relation": "handoff",
        "thread_id": hand["thread_id"],
    }
    assert first[1]["data"] == {"source": "handoff", "text": forwarded}
    assert first[1]["actor"] == {"kind": "host", "principal": ALICE.as_dict()}
    assert run(ctx, target).state == "idle"
    assert of_type(ctx, target, "turn_completed")[-1]["data"] == {"reason": "end_turn"}

    # rule 26 on the source: no new input; the host refuses a run there
    with pytest.raises(LogError):
        say(ctx, source, "again")
    host = make_host(aws)
    with pytest.raises(ApiError) as refused:
        host.start_run(ALICE, {"agent": "demo", "input": "again", "thread_id": hand["thread_id"]}, "k-again")
    assert refused.value.code == "branch_not_runnable"
    for b in (source, target):
        imp = verify_export(ctx, b)
        projections.all_projections(imp.fold.events)


def test_handoff_target_counts_the_source_budgets_as_ancestors(aws: Any) -> None:
    ctx = make_ctx(aws)
    source = new_thread(ctx)
    data = {"budget": {"max_model_requests": 1}, "source": "api", "text": "handoff: demo"}
    ctx.writer.append(source, [Draft("user_input", data, {"kind": "user", "principal": ALICE.as_dict()})])
    run(ctx, source)
    _, target = target_of(ctx, source)
    run(ctx, target)
    (refusal,) = of_type(ctx, target, "budget_exceeded")
    assert refusal["data"]["scope"] == "ancestor"
    assert refusal["data"]["owner_thread_id"] == events(ctx, source)[0]["thread_id"]
    verify_export(ctx, target)


def test_a_crash_before_the_target_exists_recreates_it(aws: Any) -> None:
    """The source's handoff is durable but its worker died before creating the target: the
    source's next step (a redelivery) creates it, once."""

    ctx = make_ctx(aws)
    source = new_thread(ctx)
    say(ctx, source, "handoff: demo")
    dying = dies_creating_a_thread(aws)
    with pytest.raises(Crash):
        run(dying, source)
    (hand,) = of_type(ctx, source, "handoff")
    assert ctx.stores.threads.get_thread("acme", hand["data"]["to_thread_id"]) is None
    aws.clock.advance(120_000)
    assert run(ctx, source).state == "idle"
    _, target = target_of(ctx, source)
    assert [e["type"] for e in events(ctx, target)] == ["thread_started", "user_input"]
    assert run(ctx, source).state == "idle"  # nothing more to do
    assert len(of_type(ctx, source, "handoff")) == 1


def test_the_target_decides_under_the_sources_ceiling(aws: Any) -> None:
    """The source's policy denies `time`; the target's own allows it: the stricter wins, so the
    target's `time` call is denied (semantics §Permissions, the handoff ceiling)."""
    from helpers.engine import scripted
    from threads_aws.engine.models import ScriptedModel

    use = {"agent": "demo", "message": "time"}
    model = ScriptedModel(
        [
            {
                "content": [{"call_id": "h1", "input": use, "name": "handoff", "type": "tool_use"}],
                "stop_reason": "tool_use",
            }
        ]
    )
    ctx = make_ctx(aws)
    source = new_thread(ctx, deny=["time"])
    say(ctx, source, "over to you")
    run(make_ctx(aws, models=scripted(model)), source)
    _, target = target_of(ctx, source)
    assert events(ctx, target)[1]["data"]["text"] == "time"
    run(ctx, target)
    (decision,) = of_type(ctx, target, "permission_decision")
    assert decision["data"]["decision"] == "deny"
    assert of_type(ctx, target, "tool_result")[0]["data"]["origin"] == "denied"
    # without the ceiling the same agent allows it
    plain = new_thread(ctx)
    say(ctx, plain, "time")
    run(ctx, plain)
    assert of_type(ctx, plain, "permission_decision")[0]["data"]["decision"] == "allow"


@pytest.mark.parametrize("when", ["before", "after"])
def test_handoff_survives_a_crash_at_every_step(aws: Any, when: str) -> None:
    """The worker dies before/after each of its appends and the target's creation; a fresh one
    takes over: one handoff, one target thread (that id) with one forwarded input, the source's
    run handed_off."""
    clean, points = crashing(aws, at=-1, when="after")
    b = new_thread(make_ctx(aws))
    say(make_ctx(aws), b, "handoff: demo")
    run(clean, b)
    total = points.n
    assert total >= 3  # ..., handoff, the target, the result + turn_completed
    for at in range(1, total + 1):
        label = f"crash {when} step {at}"
        ctx, _ = crashing(aws, at, when)
        source = new_thread(make_ctx(aws))
        run_id = say(make_ctx(aws), source, "handoff: demo")
        with pytest.raises(Crash):
            run(ctx, source, holder="w1")
        aws.clock.advance(120_000)
        fresh = make_ctx(aws)
        assert run(fresh, source, holder="w2").state == "idle", label
        assert len(of_type(fresh, source, "handoff")) == 1, label
        _, target = target_of(fresh, source)
        assert [e["type"] for e in events(fresh, target)] == ["thread_started", "user_input"], label
        outcome = projections.run_outcome(events(fresh, source), run_id, thread_id="t", branch_id=source)
        assert outcome is not None and outcome["status"] == "handed_off", label
        verify_export(fresh, source)
        verify_export(fresh, target)


@pytest.mark.parametrize("moved_away", [False, True])
def test_a_channel_conversation_route_moves_with_the_handoff(aws: Any, moved_away: bool) -> None:
    """The route (tenant, channel, installation, conversation) → thread moves to the target in
    the target's creation transaction (one conditional update on the source thread), so the
    conversation's next message reaches the target."""
    from threads_aws.agents import load_agents
    from threads_aws.core.canonical import new_uuid7
    from threads_aws.new_thread import start_thread
    from threads_aws.store.channel_threads import ChannelRoute

    ctx = make_ctx(aws)
    tid, bid = new_uuid7(), new_uuid7()
    route = ChannelRoute("acme", "slack", "T1", "C1", thread_id=tid, branch_id=bid)
    start_thread(
        ctx.stores,
        ctx.writer,
        load_agents()["demo"],
        tenant="acme",
        thread_id=tid,
        branch_id=bid,
        now_ms=ctx.clock(),
        companions=[ctx.stores.channel_threads.create(route)],
    )
    sender = {"kind": "channel", "principal": ALICE.as_dict()}
    delivery = {
        "channel": "slack",
        "conversation": "C1",
        "delivery_id": "d1",
        "installation": "T1",
        "item_key": "i1",
        "text": "handoff: demo",
    }
    _, lines = ctx.writer.append(bid, [Draft("channel_delivery", delivery, sender)])
    text = {"delivery_event_id": lines[0].event_id, "source": "channel", "text": "handoff: demo"}
    ctx.writer.append(bid, [Draft("user_input", text, {"kind": "user", "principal": ALICE.as_dict()})])
    other = new_uuid7()
    if moved_away:  # the route names another thread by now: the target is created without it
        item = ChannelRoute("acme", "slack", "T1", "C1", thread_id=other, branch_id=other).to_item()
        aws.ddb.put_item(TableName=aws.resources.state_table, Item=item)
    run(ctx, bid)
    to_thread, target = target_of(ctx, bid)
    moved = ctx.stores.channel_threads.get("acme", "slack", "T1", "C1")
    assert moved is not None
    assert (moved.thread_id, moved.branch_id) == ((other, other) if moved_away else (to_thread, target))
    assert [e["type"] for e in events(ctx, target)] == ["thread_started", "user_input"]
