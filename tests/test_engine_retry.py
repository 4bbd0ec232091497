"""Retries, fallback and the capability pre-check (semantics §4): the pure decisions of
`engine.retry` / `engine.fallback` over a fold, then the worker on moto with the scripted model
(waits end the step; the clock moves to `not_before`), the run-step timer and the queue handler."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from helpers.engine import USER, Crash, make_ctx, of_type, run, say, scripted, types, verify_export
from threads_aws.agents import load_agents
from threads_aws.core import projections
from threads_aws.core.canonical import new_uuid7
from threads_aws.core.fold import Fold, Turn
from threads_aws.core.lines import StoredLine, header_line
from threads_aws.engine import fallback, retry
from threads_aws.engine.models import ScriptedModel, preflight
from threads_aws.engine.providers.anthropic import AnthropicAdapter
from threads_aws.engine.queue import handle_batch
from threads_aws.engine.step import EngineContext, advance
from threads_aws.store import NewBranch
from threads_aws.store.step_timer import delay_s
from threads_aws.writer import Draft

P = dict(retry.DEFAULTS)
PRIMARY = {
    "adapter": {"name": "scripted", "settings": {}, "version": "1"},
    "model": {"name": "scripted-1", "provider": "scripted"},
    "model_params": {"max_tokens": 1024},
    "reasoning_carryover": "keep",
}
SECOND = {**PRIMARY, "model": {"name": "scripted-2", "provider": "scripted"}}
THIRD = {
    **PRIMARY,
    "model": {"name": "scripted-3", "provider": "scripted"},
    "reasoning_carryover": "omit_prior",
}
OK = {"content": [{"text": "ok", "type": "text"}], "stop_reason": "end_turn"}
OVERLOADED = {"error": {"reason": "overloaded", "http_status": 529}}


def fold(*, chain: list[dict[str, Any]] | None = None, **retry_policy: Any) -> Fold:
    f = Fold()
    f.started = {
        "adapter": PRIMARY["adapter"],
        "model": PRIMARY["model"],
        "model_params": PRIMARY["model_params"],
    }
    f.settings = dict(PRIMARY)
    f.policy = {"retry": {**P, **retry_policy}}
    if chain is not None:
        f.policy["fallback"] = chain
    f.turn_open = True
    f.turn = Turn()
    return f


def failure(
    reason: str = "overloaded", *, retryable: bool = True, after: int | None = None, code: str | None = None
) -> retry.Failure:
    data = {"provider_outcome": "failed", "reason": reason, "request_event_id": "req-1"}
    return retry.Failure(data, retryable, after, code)


# ------------------------------------------------------------------ the schedule


def test_backoff_is_exponential_capped_and_deterministic() -> None:
    p = {**P, "base_delay_ms": 1000, "max_delay_ms": 5000}
    for n, full in enumerate([1000, 2000, 4000, 5000, 5000]):
        d = retry.backoff_ms(p, "req-1", n)
        assert full // 2 <= d <= full, (n, d)
        assert d == retry.backoff_ms(p, "req-1", n)  # the same failure waits the same
    # the jitter differs between requests (not every request waits the same)
    assert len({retry.backoff_ms(p, f"req-{i}", 2) for i in range(20)}) > 10


def test_retry_after_is_honoured_and_capped() -> None:
    f = fold(max_retry_after_ms=3000)
    assert retry.schedule(f.policy["retry"], f, failure(after=1500), 100) == retry.Retry(
        1500, 1600, "retry_after"
    )
    assert retry.schedule(f.policy["retry"], f, failure(after=9000), 100) == retry.Retry(
        3000, 3100, "retry_after"
    )
    r = retry.schedule(f.policy["retry"], f, failure(), 100)
    assert r is not None and r.basis == "backoff" and r.not_before == 100 + r.delay_ms


def test_no_retry_past_max_retries_or_the_turns_wait_budget() -> None:
    f = fold(max_retries=2, max_total_wait_ms=5000)
    f.turn.retries = 2
    assert retry.schedule(f.policy["retry"], f, failure(after=10), 0) is None
    f.turn.retries, f.turn.waited_ms = 0, 4000
    assert retry.schedule(f.policy["retry"], f, failure(after=1000), 0) is not None  # 5000: fits
    assert retry.schedule(f.policy["retry"], f, failure(after=1001), 0) is None


# ------------------------------------------------------------------ decisions


def test_decide_order() -> None:
    f = fold(chain=[SECOND], fallback_after=2)
    assert retry.decide(f, failure(code="content_unsupported"), 0) == retry.End(
        "error", "content_unsupported"
    )
    assert retry.decide(f, failure(code="artifact_missing"), 0) == retry.End("error", None)
    # prompt_too_long: undecided when it happens (compaction first), context_exhausted from the log
    assert retry.decide(f, failure("prompt_too_long", retryable=False), 0) == retry.Defer()
    too_long = failure("prompt_too_long", retryable=False)
    assert retry.decide(f, too_long, 0, recorded=True) == retry.End("context_exhausted")
    assert isinstance(retry.decide(f, failure(), 0), retry.Retry)  # failure 1 of 2
    f.turn.failures = 1
    assert retry.decide(f, failure(), 0) == retry.Fallback(SECOND)  # failure 2: fall back
    f.turn.failures = 0
    assert retry.decide(f, failure("provider_error", retryable=False), 0) == retry.Fallback(SECOND)
    f.turn.retries = P["max_retries"]
    assert retry.decide(f, failure(), 0) == retry.Fallback(SECOND)  # no retry left


def test_decide_without_a_fallback_retries_then_gives_up() -> None:
    f = fold(chain=[])
    f.turn.failures = 5
    assert isinstance(retry.decide(f, failure(), 0), retry.Retry)
    assert retry.decide(f, failure("provider_error", retryable=False), 0) == retry.End("model_unavailable")
    f.turn.retries = P["max_retries"]
    assert retry.decide(f, failure(), 0) == retry.End("model_unavailable")


def abandoned(f: Fold, reason: str, seq: int = 10, outcome: str = "failed") -> None:
    req = {"data": {"attempt": 2}, "event_id": "req-1", "seq": seq - 1, "type": "model_request"}
    data = {"provider_outcome": outcome, "reason": reason, "request_event_id": "req-1"}
    f.last_request = req
    f.turn.last_model = {"data": data, "event_id": "ab-1", "seq": seq, "type": "model_attempt_abandoned"}


def test_after_abandoned_waits_until_not_before_then_resends() -> None:
    f = fold()
    abandoned(f, "rate_limited")
    f.turn.failures, f.turn.retries = 1, 1
    f.turn.retry = {"basis": "retry_after", "delay_ms": 500, "not_before": 1500, "request_event_id": "req-1"}
    assert retry.after_abandoned(f, 1499) == retry.Wait(1500)
    assert retry.after_abandoned(f, 1500) == retry.Resend(3)


def test_after_abandoned_settings_change_resends_at_once() -> None:
    f = fold()
    abandoned(f, "overloaded", seq=10)
    f.turn.failures = 2
    f.turn.epoch_seq = 11  # settings_changed{fallback} after it
    assert retry.after_abandoned(f, 0) == retry.Resend(1)


def test_after_abandoned_crash_resends_then_fails() -> None:
    f = fold(chain=[SECOND], crash_resends=1)
    abandoned(f, "crash", outcome="unknown")
    f.turn.crashes = 1
    assert retry.after_abandoned(f, 0) == retry.Resend(3)
    f.turn.crashes = 2
    assert retry.after_abandoned(f, 0) == retry.Fallback(SECOND)
    f.policy["fallback"] = []
    assert retry.after_abandoned(f, 0) == retry.End("model_unavailable")


def test_after_abandoned_preempted_and_recorded_failures() -> None:
    f = fold(chain=[])
    abandoned(f, "steered")
    assert retry.after_abandoned(f, 0) == retry.Resend(3)
    abandoned(f, "server_error")  # recorded without a decision: decided from the log
    f.turn.failures = 1
    assert isinstance(retry.after_abandoned(f, 0), retry.Retry)
    abandoned(f, "provider_error")
    assert retry.after_abandoned(f, 0) == retry.End("model_unavailable")
    abandoned(f, "provider_error", outcome="not_sent")  # a connect failure: retryable
    assert isinstance(retry.after_abandoned(f, 0), retry.Retry)


# ------------------------------------------------------------------ fallback chain, revert


def test_next_settings_walks_the_chain() -> None:
    f = fold(chain=[SECOND, THIRD])
    assert fallback.next_settings(f) == SECOND
    f.settings = dict(SECOND)
    assert fallback.next_settings(f) == THIRD
    f.settings = dict(THIRD)
    assert fallback.next_settings(f) is None
    f.settings = {**SECOND, "model_params": {"max_tokens": 5}}  # a user's params on that model
    assert fallback.next_settings(f) == THIRD
    f.settings = dict(PRIMARY)
    f.policy["models"] = [
        {"context_window": 1000, "input_billing_bound": "none", "max_output_tokens": 100, **m}
        for m in (PRIMARY["model"], THIRD["model"])
    ]
    assert fallback.next_settings(f) == THIRD  # SECOND is not in policy.models (rule 18)


def test_revert_only_after_the_turn_that_fell_back() -> None:
    f = fold(chain=[SECOND])
    f.fallback_from, f.fallback_event_id, f.fallback_turn = dict(PRIMARY), "fb-1", 0
    assert fallback.revert_data(f) is None  # its turn is still open
    f.turn_open, f.turns_completed = False, 1
    assert fallback.revert_data(f) == {"cause_event_id": "fb-1", "reason": "revert", "settings": PRIMARY}
    f.turn_open = True  # a new turn opened before the revert: revert before its first request
    assert fallback.revert_data(f) is not None
    f.awaiting = {"req": 1}
    assert fallback.revert_data(f) is None  # rule 18
    f.awaiting = {}
    f.policy["retry"]["fallback_scope"] = "thread"
    assert fallback.revert_data(f) is None


def test_settings_for_takes_the_factory_adapter() -> None:
    other = {
        "adapter": {"name": "openai", "settings": {"api": "responses"}, "version": "1"},
        "model": {"name": "gpt-x", "provider": "openai"},
        "model_params": {"max_tokens": 99},
        "reasoning_carryover": "omit_prior",
    }
    f = fold(chain=[other])
    s = fallback.settings_for(f, {"name": "gpt-x", "provider": "openai"})
    assert s == {**other, "reasoning_carryover": "keep"}  # the contract's default carryover
    s = fallback.settings_for(
        f, other["model"], model_params={"max_tokens": 1}, reasoning_carryover="omit_prior"
    )
    assert (
        s is not None and s["model_params"] == {"max_tokens": 1} and s["reasoning_carryover"] == "omit_prior"
    )
    assert fallback.settings_for(f, PRIMARY["model"])["adapter"] == PRIMARY["adapter"]  # type: ignore[index]
    assert fallback.settings_for(f, {"name": "nope", "provider": "openai"}) is None


def test_timer_delay_rounds_up_and_caps() -> None:
    assert delay_s(1000, 1000) == 0
    assert delay_s(1001, 1000) == 1
    assert delay_s(2500, 1000) == 2
    assert delay_s(10**9, 0) == 900


# ------------------------------------------------------------------ the worker


def test_agent_policy_retry_is_completed_and_checked() -> None:
    """An agent's policy.retry is pinned complete (its values over the defaults), with its
    fallback chain; a malformed section is refused when the agents file is read."""
    from threads_aws.agents import __file__ as agents_py
    from threads_aws.agents import parse_agents
    from threads_aws.config.agents_file import validate

    bundled = json.loads((Path(agents_py).parent / "data" / "agents.json").read_text())
    spec = {
        "a": {**bundled["anthropic"], "policy": {"retry": {"max_retries": 5, "fallback_scope": "thread"}}}
    }
    pinned = parse_agents(json.dumps(spec))["a"].policy()
    assert pinned["retry"] == {**retry.DEFAULTS, "max_retries": 5, "fallback_scope": "thread"}
    assert [s["model"]["provider"] for s in pinned["fallback"]] == ["bedrock"]
    spec["a"]["policy"] = {"retry": {"max_retries": -1, "fallback_scope": "run", "nope": 1}}
    errs = validate(spec)
    assert any("policy.retry.max_retries" in e for e in errs), errs
    assert any("policy.retry.fallback_scope" in e for e in errs), errs
    assert any("unknown policy.retry key 'nope'" in e for e in errs), errs


def thread_with(ctx: EngineContext, chain: list[dict[str, Any]], **retry_policy: Any) -> str:
    thread_id, branch_id = new_uuid7(), new_uuid7()
    header = StoredLine.of_header(header_line(thread_id, branch_id, ctx.clock()))
    ctx.store.create_branch(
        NewBranch(thread_id=thread_id, tenant="acme", branch_id=branch_id, header=header, create_thread=True)
    )
    started = load_agents()["scripted"].thread_started()
    started["policy"]["retry"] = {**P, **retry_policy}
    started["policy"]["fallback"] = chain
    ctx.writer.append(branch_id, [Draft("thread_started", started, {"kind": "host"})])
    return branch_id


def by_model(**models: ScriptedModel) -> Any:
    return lambda model, adapter: models[model["name"].replace("-", "_")]


def drive(aws: Any, ctx: EngineContext, b: str, *, max_steps: int = 20) -> list[int]:
    """Run steps until idle, moving the clock to each wait's not_before; returns the waits."""
    waits = []
    for _ in range(max_steps):
        out = run(ctx, b)
        if out.state != "wait":
            assert out.state == "idle", out
            return waits
        assert out.not_before is not None and out.armed
        waits.append(out.not_before - aws.clock())
        aws.clock.advance(out.not_before - aws.clock())
    raise AssertionError("never idle")


def timer_messages(aws: Any) -> dict[str, str]:
    url = aws.resources.run_step_timer_url
    return aws.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]


def test_rate_limit_waits_for_retry_after_then_succeeds(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = thread_with(ctx, [])
    limited = {"error": {"http_status": 429, "reason": "rate_limited", "retry_after_ms": 7000}}
    model = ScriptedModel([limited, OK])
    ctx.models = scripted(model)
    say(ctx, b, "hi")
    first = run(ctx, b)
    assert (first.state, first.not_before, first.armed) == ("wait", aws.clock() + 7000, True)
    assert types(ctx, b)[-3:] == ["model_request", "model_attempt_abandoned", "retry_scheduled"]
    wait = of_type(ctx, b, "retry_scheduled")[0]["data"]
    request = of_type(ctx, b, "model_request")[0]
    assert wait == {
        "basis": "retry_after",
        "delay_ms": 7000,
        "not_before": first.not_before,
        "request_event_id": request["event_id"],
    }
    # The wake-up waits in the timer queue (a delayed message), not in a Lambda.
    assert timer_messages(aws)["ApproximateNumberOfMessagesDelayed"] == "1"
    # Woken early (a duplicate, a control): not due, nothing appended, armed again.
    aws.clock.advance(3000)
    early = run(ctx, b)
    assert (early.state, early.appended, early.not_before) == ("wait", 0, first.not_before)
    assert len(model.requests) == 1
    aws.clock.advance(4000)
    assert run(ctx, b).state == "idle"
    assert [e["data"]["attempt"] for e in of_type(ctx, b, "model_request")] == [1, 2]
    assert of_type(ctx, b, "model_request")[1]["time"] >= wait["not_before"]
    assert of_type(ctx, b, "turn_completed")[0]["data"] == {"reason": "end_turn"}
    verify_export(ctx, b)


def test_fallback_after_failures_then_turn_scope_reverts(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = thread_with(ctx, [SECOND], fallback_after=2)
    primary = ScriptedModel([OVERLOADED, OVERLOADED, OK])
    second = ScriptedModel([OK])
    ctx.models = by_model(scripted_1=primary, scripted_2=second)
    say(ctx, b, "hi")
    waits = drive(aws, ctx, b)
    assert len(waits) == 1  # failure 1: a backoff wait; failure 2: fall back
    assert types(ctx, b)[2:] == [
        "model_request",
        "model_attempt_abandoned",
        "retry_scheduled",
        "model_request",
        "model_attempt_abandoned",
        "settings_changed",
        "model_request",
        "model_response",
        "turn_completed",
        "settings_changed",
    ]
    fb, revert = (e for e in of_type(ctx, b, "settings_changed"))
    second_abandon = of_type(ctx, b, "model_attempt_abandoned")[1]
    assert fb["actor"] == {"kind": "host"}
    assert fb["data"] == {
        "cause_event_id": second_abandon["event_id"],
        "reason": "fallback",
        "settings": SECOND,
    }
    assert revert["data"] == {"cause_event_id": fb["event_id"], "reason": "revert", "settings": PRIMARY}
    assert [e["data"]["attempt"] for e in of_type(ctx, b, "model_request")] == [1, 2, 1]
    # The fallback's request renders line 0 of the new epoch (its declared prefix too: C7).
    assert json.loads(second.requests[0].split(b"\n")[0])["model"] == SECOND["model"]
    assert ctx.writer.load(b).fold.settings == PRIMARY
    verify_export(ctx, b)
    # The next turn runs on the primary again.
    primary.script = [*primary.script, OK]  # type: ignore[misc]
    say(ctx, b, "again")
    assert run(ctx, b).state == "idle" and len(primary.requests) == 3


def test_thread_scope_keeps_the_fallback(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = thread_with(ctx, [SECOND, THIRD], fallback_after=1, fallback_scope="thread")
    primary = ScriptedModel([OVERLOADED])
    second = ScriptedModel([OVERLOADED])
    third = ScriptedModel([OK, OK])
    ctx.models = by_model(scripted_1=primary, scripted_2=second, scripted_3=third)
    say(ctx, b, "hi")
    assert drive(aws, ctx, b) == []  # fallback_after 1: no waits, straight down the chain
    reasons = [e["data"]["reason"] for e in of_type(ctx, b, "settings_changed")]
    assert reasons == ["fallback", "fallback"]
    assert ctx.writer.load(b).fold.settings == THIRD
    say(ctx, b, "again")
    assert run(ctx, b).state == "idle" and len(third.requests) == 2
    verify_export(ctx, b)


def test_not_retryable_falls_back_at_once_and_prompt_too_long_ends(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = thread_with(ctx, [SECOND])
    auth = {"error": {"reason": "provider_error", "http_status": 401, "retryable": False}}
    too_long = {"error": {"reason": "prompt_too_long", "http_status": 400, "retryable": False}}
    ctx.models = by_model(scripted_1=ScriptedModel([auth]), scripted_2=ScriptedModel([too_long]))
    say(ctx, b, "hi")
    assert drive(aws, ctx, b) == []
    assert "retry_scheduled" not in types(ctx, b)
    assert of_type(ctx, b, "turn_completed")[0]["data"] == {"reason": "context_exhausted"}
    verify_export(ctx, b)


def test_retry_budget_of_the_turn_holds(aws: Any) -> None:
    ctx = make_ctx(aws)
    budget = {"base_delay_ms": 4000, "max_delay_ms": 4000, "max_retries": 10, "max_total_wait_ms": 9000}
    b = thread_with(ctx, [], **budget)
    ctx.models = scripted(ScriptedModel([OVERLOADED] * 6))
    say(ctx, b, "hi")
    waits = drive(aws, ctx, b)
    assert 2 <= len(waits) <= 4 and sum(waits) <= 9000  # each wait is 2000..4000 ms (jitter)
    # the next wait would have passed the turn's budget: the turn ended, retries left unused
    last = of_type(ctx, b, "model_request")[-1]["event_id"]
    assert sum(waits) + retry.backoff_ms({**P, **budget}, last, len(waits)) > 9000
    assert of_type(ctx, b, "turn_completed")[0]["data"] == {"reason": "model_unavailable"}
    assert sum(e["data"]["delay_ms"] for e in of_type(ctx, b, "retry_scheduled")) == sum(waits)
    verify_export(ctx, b)


def test_crash_resends_hold(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = thread_with(ctx, [], crash_resends=1)

    def die(request: bytes, rid: str) -> None:
        raise Crash

    say(ctx, b, "hi")
    for holder in ("w1", "w2"):
        ctx.models = scripted(ScriptedModel(hook=die))
        with pytest.raises(Crash):
            advance(ctx, b, holder_id=holder, deadline_ms=ctx.clock() + 10**9)
        aws.clock.advance(120_000)  # the dead worker's lease lapses
    fresh = make_ctx(aws, models=scripted(ScriptedModel()))
    assert run(fresh, b, holder="w3").state == "idle"
    crashes = [e["data"] for e in of_type(fresh, b, "model_attempt_abandoned")]
    assert [(c["reason"], c["provider_outcome"]) for c in crashes] == [("crash", "unknown")] * 2
    # one re-send after the first crash; the second crash used the budget up
    assert of_type(fresh, b, "turn_completed")[0]["data"] == {"reason": "model_unavailable"}
    assert len(of_type(fresh, b, "model_request")) == 2
    verify_export(fresh, b)


def test_heartbeat_keeps_a_long_attempt_leased(aws: Any) -> None:
    ctx = make_ctx(aws, lease_ttl_ms=60_000)
    b = thread_with(ctx, [], heartbeat_ms=50)
    seen: list[str] = []

    def long_call(request: bytes, rid: str) -> None:
        aws.clock.advance(50_000)
        time.sleep(0.3)  # heartbeats renew the lease from now (+50 s) for another 60 s
        aws.clock.advance(50_000)  # past the lease taken before the call
        try:
            ctx.store.acquire_lease(b, "other", ttl_ms=60_000, now_ms=aws.clock())
            seen.append("taken")
        except Exception as exc:  # noqa: BLE001
            seen.append(getattr(exc, "code", repr(exc)))

    ctx.models = scripted(ScriptedModel([OK], hook=long_call))
    say(ctx, b, "hi")
    assert run(ctx, b).state == "idle"
    assert seen == ["branch_busy"]
    assert "model_attempt_abandoned" not in types(ctx, b)


def test_settings_change_during_a_wait_resends_on_the_new_settings(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = thread_with(ctx, [SECOND])
    limited = {"error": {"http_status": 429, "reason": "rate_limited", "retry_after_ms": 60_000}}
    second = ScriptedModel([OK])
    ctx.models = by_model(scripted_1=ScriptedModel([limited]), scripted_2=second)
    say(ctx, b, "hi")
    assert run(ctx, b).state == "wait"
    user_change = {"reason": "user", "settings": SECOND}
    ctx.writer.append(b, [Draft("settings_changed", user_change, USER)])
    assert run(ctx, b).state == "idle"  # no need to wait out the old provider's retry-after
    assert len(second.requests) == 1
    assert [e["data"]["attempt"] for e in of_type(ctx, b, "model_request")] == [1, 1]
    assert [e["data"]["reason"] for e in of_type(ctx, b, "settings_changed")] == ["user"]  # no revert
    verify_export(ctx, b)


def test_cancel_during_a_wait_ends_the_turn_without_the_retry(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = thread_with(ctx, [])
    model = ScriptedModel([{"error": {"reason": "overloaded", "http_status": 529}}])
    ctx.models = scripted(model)
    run_id = say(ctx, b, "hi")
    assert run(ctx, b).state == "wait"
    ctx.writer.append(b, [Draft("cancel_requested", {"scope": "turn"}, USER)])
    assert run(ctx, b).state == "idle"
    assert types(ctx, b)[-2:] == ["cancelled", "turn_completed"] and len(model.requests) == 1
    outcome = projections.run_outcome(ctx.writer.load(b).fold.events, run_id, thread_id="t", branch_id=b)
    assert outcome is not None and outcome["status"] == "cancelled"


# ------------------------------------------------------------------ capability pre-check


def test_preflight_refusal_appends_no_request(aws: Any) -> None:
    """A history holding another provider's reasoning, switched to Anthropic with `keep`: the
    pre-check refuses (continuation_unsupported) before anything is stored; with `omit_prior`
    the same history renders without it and passes."""
    ctx = make_ctx(aws)
    b = thread_with(ctx, [])
    ref = ctx.artifacts.put(b'{"type":"reasoning","id":"rs_1"}', "application/json")
    reasoning = {
        "format": "openai_reasoning",
        "model": "gpt-x",
        "provider": "openai",
        "ref": ref,
        "type": "reasoning",
    }
    answer = {"content": [reasoning, {"text": "ok", "type": "text"}], "stop_reason": "end_turn"}
    ctx.models = scripted(ScriptedModel([answer]))
    say(ctx, b, "hi")
    assert run(ctx, b).state == "idle"
    claude = {
        "adapter": {"name": "anthropic", "settings": {}, "version": "1"},
        "model": {"name": "claude-x", "provider": "anthropic"},
        "model_params": {"max_tokens": 100},
        "reasoning_carryover": "keep",
    }
    ctx.writer.append(b, [Draft("settings_changed", {"reason": "user", "settings": claude}, USER)])
    ctx.models = lambda m, a: AnthropicAdapter()  # never reached the network: refused first
    run_id = say(ctx, b, "again")
    assert run(ctx, b).state == "idle"
    assert types(ctx, b)[-2:] == ["user_input", "turn_completed"]
    assert of_type(ctx, b, "turn_completed")[-1]["data"] == {
        "code": "continuation_unsupported",
        "reason": "error",
    }
    outcome = projections.run_outcome(ctx.writer.load(b).fold.events, run_id, thread_id="t", branch_id=b)
    assert outcome is not None and outcome["error"]["code"] == "continuation_unsupported"
    verify_export(ctx, b)
    # omit_prior: the reasoning part is dropped from the render, and the pre-check passes
    omit = {"reason": "user", "settings": {**claude, "reasoning_carryover": "omit_prior"}}
    ctx.writer.append(b, [Draft("settings_changed", omit, USER)])
    say(ctx, b, "third")
    body = ctx.renderer(ctx.writer.load(b)).request(ctx.artifacts.get_ref)
    assert b"openai_reasoning" not in body
    assert preflight(AnthropicAdapter(), body, ctx.artifacts) is None


# ------------------------------------------------------------------ the queue handler


def receive(aws: Any) -> list[dict[str, Any]]:
    out = aws.sqs.receive_message(QueueUrl=aws.resources.run_step_queue_url, AttributeNames=["All"])
    return list(out.get("Messages", []))


def as_event(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """A Lambda SQS event of received messages (as the event source mapping sends them)."""
    records = [
        {
            "messageId": m["MessageId"],
            "receiptHandle": m["ReceiptHandle"],
            "body": m["Body"],
            "attributes": m.get("Attributes", {}),
            "messageAttributes": {},
            "md5OfBody": m["MD5OfBody"],
            "eventSource": "aws:sqs",
            "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:run-step.fifo",
            "awsRegion": "us-east-1",
        }
        for m in messages
    ]
    return {"Records": records}


def step_event(aws: Any, ctx: EngineContext, b: str) -> dict[str, Any]:
    assert ctx.steps is not None
    ctx.steps.enqueue(b, reason="input")
    return as_event(receive(aws))


def test_queue_handler_acks_a_wait_and_forwards_the_wake_up(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = thread_with(ctx, [])
    ctx.models = scripted(ScriptedModel([OVERLOADED, OK]))
    say(ctx, b, "hi")
    event = step_event(aws, ctx, b)
    assert handle_batch(event, None, engine=ctx) == {"batchItemFailures": []}
    for r in event["Records"]:  # what Lambda does with the records that succeeded
        aws.sqs.delete_message(QueueUrl=aws.resources.run_step_queue_url, ReceiptHandle=r["receiptHandle"])
    url = aws.resources.run_step_timer_url
    got: list[dict[str, Any]] = []
    deadline = time.monotonic() + 5
    while not got and time.monotonic() < deadline:  # the delayed message becomes visible
        got = aws.sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1).get("Messages") or []
    assert got, "no wake-up in the timer queue"
    wake = json.loads(got[0]["Body"])
    assert wake == {"branch_id": b, "not_before": of_type(ctx, b, "retry_scheduled")[0]["data"]["not_before"]}
    timer = as_event(got)
    timer["Records"][0]["eventSourceARN"] = "arn:aws:sqs:us-east-1:123456789012:x-run-step-timer"
    assert handle_batch(timer, None, engine=ctx) == {"batchItemFailures": []}
    steps = receive(aws)
    assert [json.loads(m["Body"]) for m in steps] == [{"branch_id": b, "reason": "timer_due"}]


def test_a_wait_without_a_timer_fails_the_record_for_backoff(aws: Any) -> None:
    ctx = make_ctx(aws, timer=None)
    b = thread_with(ctx, [])
    ctx.models = scripted(ScriptedModel([OVERLOADED]))
    say(ctx, b, "hi")
    event = step_event(aws, ctx, b)
    out = handle_batch(event, None, engine=ctx)
    assert out == {"batchItemFailures": [{"itemIdentifier": event["Records"][0]["messageId"]}]}
    assert types(ctx, b)[-1] == "retry_scheduled"


def test_an_unreadable_key_secret_is_named_in_the_log_and_the_result(
    aws: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Known only at run time: the secret is declared but does not exist (start could not judge it).
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY_SECRET", "threads/no-such-secret")
    ctx = make_ctx(aws)
    b = thread_with(ctx, [])
    ctx.models = lambda m, a: AnthropicAdapter()
    run_id = say(ctx, b, "hi")
    drive(aws, ctx, b)
    assert of_type(ctx, b, "turn_completed")[-1]["data"] == {"reason": "model_unavailable"}
    (abandoned, *_) = of_type(ctx, b, "model_attempt_abandoned")
    assert abandoned["data"]["provider_outcome"] == "not_sent"
    rid = abandoned["data"]["request_event_id"]
    events = ctx.writer.load(b).fold.events
    result = projections.run_outcome(events, run_id, thread_id="t", branch_id=b)
    assert result is not None and result["status"] == "failed"
    message = result["error"]["message"]
    assert "missing or unreadable provider key or secret" in message and rid in message
    (entry,) = [r for r in caplog.records if getattr(r, "request_event_id", None) == rid]
    assert "threads/no-such-secret" in entry.detail
