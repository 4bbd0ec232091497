"""Budgets enforced by the worker on moto (semantics §Budgets): every model_request reserves its
bound against each covering budget in the request's own transaction, the answer settles it, and
a refusal is `budget_exceeded` + `turn_completed{budget_exhausted}` with no request after it.
Each limit kind, a thread budget, an ancestor's budget across a child, and two children racing
for the last unit of one budget (two workers, real transactions)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from helpers.engine import make_ctx, of_type, run, scripted, types
from helpers.limits import MODEL_ENTRY, ask, child, done, round_trip, spawn, thread, use
from threads_aws.engine.models import ScriptedModel


def ledger(ctx: Any, budget_id: str) -> list[tuple[str, int, str]]:
    return sorted((r.limit, r.amount, r.state) for r in ctx.stores.budget_ledger.rows(budget_id))


def exceeded(ctx: Any, b: str) -> dict[str, Any]:
    (ev,) = of_type(ctx, b, "budget_exceeded")
    return dict(ev["data"])


def test_max_model_requests_one_then_refused(aws: Any) -> None:
    model = ScriptedModel([use("time"), done()])
    ctx = make_ctx(aws, scripted(model))
    b = thread(ctx)
    run_id = ask(ctx, b, budget={"max_model_requests": 1})
    assert run(ctx, b).state == "idle"
    assert types(ctx, b, 2) == [
        "model_request",
        "model_response",
        "tool_call",
        "permission_decision",
        "tool_result",
        "budget_exceeded",
        "turn_completed",
    ]
    assert len(model.requests) == 1
    assert exceeded(ctx, b) == {
        "limit": "max_model_requests",
        "limit_value": 1,
        "observed": 2,
        "observed_is_upper_bound": False,
        "scope": "run",
    }
    assert of_type(ctx, b, "turn_completed")[-1]["data"] == {"reason": "budget_exhausted"}
    rec = ctx.writer.record(b)
    bid = f"run:{rec.thread_id}:{run_id}"
    assert ledger(ctx, bid) == [("max_model_requests", 1, "settled")]
    assert ctx.stores.budget_ledger.used(bid, "max_model_requests") == 1
    out = round_trip(ctx, b, run_id)
    assert out["outcome"] == {
        "status": "budget_exhausted",
        "thread_id": rec.thread_id,
        "branch_id": b,
        "budget": exceeded(ctx, b),
    }
    assert out["run"] == {"status": "budget_exhausted", "output_event_id": None}
    # nothing more happens until a new user_input (rule 21); then the next run has its own budget
    assert run(ctx, b).appended == 0
    model.script = [*model.script, done("again")]  # type: ignore[misc]
    ask(ctx, b, "again")
    assert run(ctx, b).state == "idle"
    assert of_type(ctx, b, "turn_completed")[-1]["data"] == {"reason": "end_turn"}


# Each limit: (budget, policy, usage of the first answer, expected refusal of the second request).
# Under MODEL_ENTRY (window 1000, price in 3 / out 15) and max_tokens 1024: the input bound is
# 1000, the output bound 1024, the cost bound 1000*3 + 1024*15 = 18360.
COST_BOUND = 1000 * 3 + 1024 * 15
LIMIT_CASES = {
    "max_output_tokens": (
        {"max_output_tokens": 1030},  # 1024 reserved, settled at 10; then 10 + 1024 > 1030
        {"input_tokens": 50, "output_tokens": 10},
        {"observed": 10 + 1024, "observed_is_upper_bound": True},
    ),
    "max_input_tokens": (
        {"max_input_tokens": 1200},
        {"input_tokens": 300, "output_tokens": 5},
        {"observed": 300 + 1000, "observed_is_upper_bound": True},
    ),
    "max_cost_nanos": (
        {"max_cost_nanos": COST_BOUND + 100},
        {"input_tokens": 20, "output_tokens": 4},  # 20*3 + 4*15 = 120
        {"observed": 120 + COST_BOUND, "observed_is_upper_bound": True},
    ),
}


@pytest.mark.parametrize("limit", sorted(LIMIT_CASES))
def test_each_token_and_cost_limit_reserves_the_bound_and_settles_the_usage(aws: Any, limit: str) -> None:
    budget, usage, refusal = LIMIT_CASES[limit]
    model = ScriptedModel([use("time", **usage), done()])
    ctx = make_ctx(aws, scripted(model))
    b = thread(ctx, models=[MODEL_ENTRY], currency="USD")
    run_id = ask(ctx, b, budget=budget)
    assert run(ctx, b).state == "idle"
    assert len(model.requests) == 1 and len(of_type(ctx, b, "model_request")) == 1
    assert exceeded(ctx, b) == {"limit": limit, "limit_value": budget[limit], "scope": "run", **refusal}
    rec = ctx.writer.record(b)
    settled = {"max_output_tokens": 10, "max_input_tokens": 300, "max_cost_nanos": 120}[limit]
    assert ledger(ctx, f"run:{rec.thread_id}:{run_id}") == [(limit, settled, "settled")]
    out = round_trip(ctx, b, run_id)
    assert out["outcome"]["status"] == "budget_exhausted"
    if limit == "max_cost_nanos":  # the budget and the cost projection price alike
        assert out["cost"]["known_nanos"] == settled


def test_max_turns_thread_budget_holds_one_unit_per_turn(aws: Any) -> None:
    model = ScriptedModel([use("time"), done(), done("never")])
    ctx = make_ctx(aws, scripted(model))
    b = thread(ctx, budget={"max_turns": 1})
    ask(ctx, b)
    assert run(ctx, b).state == "idle"  # one turn, two requests: the turn's unit is held once
    assert of_type(ctx, b, "turn_completed")[-1]["data"] == {"reason": "end_turn"}
    second = ask(ctx, b, "again")
    assert run(ctx, b).state == "idle"
    assert len(model.requests) == 2
    assert exceeded(ctx, b) == {
        "limit": "max_turns",
        "limit_value": 1,
        "observed": 2,
        "observed_is_upper_bound": False,
        "scope": "thread",
    }
    rec = ctx.writer.record(b)
    assert ledger(ctx, f"thread:{rec.thread_id}") == [("max_turns", 1, "settled")]
    assert round_trip(ctx, b, second)["outcome"]["status"] == "budget_exhausted"


def test_thread_budget_spans_runs(aws: Any) -> None:
    model = ScriptedModel([use("time"), done(), done("never")])
    ctx = make_ctx(aws, scripted(model))
    b = thread(ctx, budget={"max_model_requests": 2})
    ask(ctx, b)
    run(ctx, b)
    ask(ctx, b, "again")
    run(ctx, b)
    assert len(model.requests) == 2
    assert exceeded(ctx, b)["scope"] == "thread" and exceeded(ctx, b)["observed"] == 3
    round_trip(ctx, b)


def test_max_wall_ms_is_elapsed_time_since_the_run_began(aws: Any) -> None:
    def slow(request: bytes, rid: str) -> None:
        aws.clock.advance(6_000)  # the model takes six seconds

    model = ScriptedModel([use("time"), done()], hook=slow)
    ctx = make_ctx(aws, scripted(model))
    b = thread(ctx)
    run_id = ask(ctx, b, budget={"max_wall_ms": 5_000})
    assert run(ctx, b).state == "idle"
    assert len(model.requests) == 1
    got = exceeded(ctx, b)
    assert (got["limit"], got["limit_value"], got["observed_is_upper_bound"]) == ("max_wall_ms", 5_000, False)
    assert got["observed"] >= 6_000
    assert round_trip(ctx, b, run_id)["outcome"]["budget"] == got


def test_a_missing_bound_counts_as_exceeding(aws: Any) -> None:
    # max_input_tokens without policy.models: no window bounds the input. Setup refuses such a
    # budget (budget_unenforceable); built directly here, the run stops before any request.
    model = ScriptedModel([done()])
    ctx = make_ctx(aws, scripted(model))
    b = thread(ctx)
    ask(ctx, b, budget={"max_input_tokens": 10_000})
    assert run(ctx, b).state == "idle"
    assert model.requests == [] and "model_request" not in types(ctx, b)
    assert exceeded(ctx, b) == {
        "limit": "max_input_tokens",
        "limit_value": 10_000,
        "observed": 0,
        "observed_is_upper_bound": False,
        "scope": "run",
    }


def test_a_pinned_zero_max_tokens_is_no_output_bound(aws: Any) -> None:
    model = ScriptedModel([done()])
    ctx = make_ctx(aws, scripted(model))
    b = thread(ctx, models=[MODEL_ENTRY], model_params={"max_tokens": 0})
    ask(ctx, b, budget={"max_output_tokens": 10_000})
    run(ctx, b)
    assert model.requests == [] and exceeded(ctx, b)["limit"] == "max_output_tokens"


def test_ancestor_budget_covers_a_child(aws: Any) -> None:
    ctx = make_ctx(aws, scripted(ScriptedModel([done("parent")])))
    parent = thread(ctx)
    ask(ctx, parent, budget={"max_model_requests": 1})
    run(ctx, parent)  # the parent's own request takes the run's only unit
    (link,) = spawn(ctx, parent)
    kid_model = ScriptedModel([done("child")])
    kid_ctx = make_ctx(aws, scripted(kid_model))
    kid = child(kid_ctx, link)
    assert run(kid_ctx, kid).state == "idle"
    assert kid_model.requests == []
    rec = ctx.writer.record(parent)
    assert exceeded(kid_ctx, kid) == {
        "limit": "max_model_requests",
        "limit_value": 1,
        "observed": 2,
        "observed_is_upper_bound": False,
        "owner_thread_id": rec.thread_id,
        "scope": "ancestor",
    }
    assert of_type(kid_ctx, kid, "turn_completed")[-1]["data"] == {"reason": "budget_exhausted"}
    round_trip(kid_ctx, kid)


def test_a_grandchild_is_covered_by_every_ancestor(aws: Any) -> None:
    ctx = make_ctx(aws, scripted(ScriptedModel()))  # answers Done. forever
    root = thread(ctx, budget={"max_model_requests": 3})  # a thread budget on the root
    ask(ctx, root)
    run(ctx, root)  # 1 of 3
    (link,) = spawn(ctx, root)
    mid = child(ctx, link)
    run(ctx, mid)  # 2 of 3
    (link2,) = spawn(ctx, mid)
    leaf = child(ctx, link2)
    run(ctx, leaf)  # 3 of 3
    (link3,) = spawn(ctx, leaf)
    last = child(ctx, link3)
    run(ctx, last)
    rec = ctx.writer.record(root)
    assert exceeded(ctx, last)["owner_thread_id"] == rec.thread_id
    assert ctx.stores.budget_ledger.used(f"thread:{rec.thread_id}", "max_model_requests") == 3


def test_two_children_race_for_the_last_unit_and_exactly_one_gets_it(aws: Any) -> None:
    ctx = make_ctx(aws, scripted(ScriptedModel([done("parent")])))
    parent = thread(ctx)
    run_id = ask(ctx, parent, budget={"max_model_requests": 2})
    run(ctx, parent)  # one unit left
    links = spawn(ctx, parent, 2)
    workers = []
    for link in links:
        m = ScriptedModel([done("child")])
        wctx = make_ctx(aws, scripted(m))  # two workers: their own writer, views and plans
        workers.append((wctx, child(wctx, link), m))

    # Both workers reach their reservation transaction before either commits.
    gate = threading.Barrier(2, timeout=20)
    held: set[int] = set()

    def hold(params: dict[str, Any], **_: Any) -> None:
        me = threading.get_ident()
        budget_txn = any("TOTAL#" in str(i.get("Update", {}).get("Key")) for i in params["TransactItems"])
        if budget_txn and me not in held:
            held.add(me)
            gate.wait()

    aws.ddb.meta.events.register("before-parameter-build.dynamodb.TransactWriteItems", hold)
    outcomes: list[Any] = []
    threads = [
        threading.Thread(target=lambda w=w: outcomes.append(run(w[0], w[1], f"worker-{w[1]}")))
        for w in workers
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    aws.ddb.meta.events.unregister("before-parameter-build.dynamodb.TransactWriteItems", hold)
    assert len(held) == 2 and len(outcomes) == 2
    requested = [w for w in workers if "model_request" in types(w[0], w[1])]
    refused = [w for w in workers if "budget_exceeded" in types(w[0], w[1])]
    assert len(requested) == 1 and len(refused) == 1
    assert sum(len(w[2].requests) for w in workers) == 1
    wctx, kid, _ = refused[0]
    assert exceeded(wctx, kid)["scope"] == "ancestor" and exceeded(wctx, kid)["observed"] == 3
    rec = ctx.writer.record(parent)
    assert ctx.stores.budget_ledger.used(f"run:{rec.thread_id}:{run_id}", "max_model_requests") == 2
    for wctx, kid, _ in workers:
        round_trip(wctx, kid)


def test_setup_refuses_an_unenforceable_budget_before_writing(aws: Any) -> None:
    from helpers.host import ALICE, append, make_host, start
    from threads_aws.host.errors import ApiError

    host = make_host(aws)
    # the scripted agent pins max_tokens (an output bound) but lists no policy.models: no window
    # bounds the input, no price the cost
    for limit in ("max_input_tokens", "max_cost_nanos"):
        with pytest.raises(ApiError) as exc:
            start(host, budget={limit: 10_000})
        assert exc.value.code == "invalid_request"
        assert exc.value.message.startswith(f"budget_unenforceable: {limit}")
    assert host.index.list_threads(ALICE.tenant)[0] == []  # nothing was written
    ok = start(host, budget={"max_output_tokens": 10_000, "max_model_requests": 3, "max_wall_ms": 60_000})
    append(host, ok["branch_id"], ("turn_completed", {"reason": "end_turn"}))
    # a continuing run is checked against the branch's pinned policy alike
    head = host.writer.load(ok["branch_id"]).head_seq
    with pytest.raises(ApiError) as exc:
        start(host, thread_id=ok["thread_id"], budget={"max_input_tokens": 5})
    assert exc.value.message.startswith("budget_unenforceable")
    assert host.writer.load(ok["branch_id"]).head_seq == head


def test_unenforceable_limits_as_data() -> None:
    from threads_aws.core.budgets import unenforceable

    pinned = {"model": {"provider": "scripted", "name": "scripted-1"}, "model_params": {"max_tokens": 1024}}
    unpinned = {**pinned, "model_params": {}}
    every = {"max_cost_nanos": 1, "max_input_tokens": 1, "max_output_tokens": 1, "max_model_requests": 1}
    assert unenforceable(every, {}, [pinned]) == ["max_cost_nanos", "max_input_tokens"]
    assert unenforceable(every, {"models": [MODEL_ENTRY]}, [pinned, unpinned]) == []
    # a fallback outside policy.models can't bound what the thread may run under
    other = {**pinned, "model": {"provider": "demo", "name": "demo-2"}}
    assert unenforceable(every, {"models": [MODEL_ENTRY]}, [pinned, other]) == [
        "max_cost_nanos",
        "max_input_tokens",
    ]
    # a pinned non-positive max_tokens is no output bound, and the model's cap doesn't replace it
    zero = {**pinned, "model_params": {"max_tokens": 0}}
    assert unenforceable(every, {"models": [MODEL_ENTRY]}, [zero]) == ["max_cost_nanos", "max_output_tokens"]
    assert unenforceable(every, {"on_unknown_usage": "stop"}, [pinned]) == []


def test_an_agents_file_thread_budget_must_be_enforceable() -> None:
    import json

    from threads_aws.agents import parse_agents
    from threads_aws.config.agents_file import AgentsFileError

    agent = {
        "adapter": {"name": "demo", "version": "1"},
        "instructions": "x",
        "model": {"name": "demo-1", "provider": "demo"},
        "model_params": {"max_tokens": 64},
        "policy": {"budget": {"max_cost_nanos": 1000, "max_model_requests": 5}},
    }
    with pytest.raises(AgentsFileError, match="budget_unenforceable: policy.budget max_cost_nanos"):
        parse_agents(json.dumps({"a": agent}))
    entry = {**MODEL_ENTRY, "provider": "demo", "name": "demo-1"}
    agent["policy"] = {**agent["policy"], "models": [entry]}  # type: ignore[dict-item]
    (a,) = parse_agents(json.dumps({"a": agent})).values()
    assert a.policy()["budget"] == {"max_cost_nanos": 1000, "max_model_requests": 5}
