"""Parks that expire (semantics.md §4 Parking, §Approvals): a park with `expires_at` arms a
wake-up on the run-step timer when it is appended; once its TTL passes the branch's step appends
`park_escalated{address}` exactly once (also across a crash at every point of the escalation),
nothing is auto-resolved, and a decision after it is `approval_expired` (a denial). The agent's
`approval_ttl_ms` / `question_ttl_ms` set the TTL; a wake-up longer than the timer queue's
15-minute delay hops without a step."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from helpers.engine import (
    Crash,
    grant,
    make_ctx,
    new_thread,
    of_type,
    run,
    say,
    types,
    verify_export,
)
from helpers.host import ALICE, make_host
from threads_aws.engine.parks import DEFAULT_TTL_MS
from threads_aws.engine.queue import handle_batch
from threads_aws.host.errors import ApiError
from threads_aws.store.step_timer import StepTimer
from threads_aws.writer import Draft, Writer


def parked_on_note(aws: Any, agent: str = "demo") -> tuple[Any, str]:
    ctx = make_ctx(aws)
    b = new_thread(ctx, agent)
    say(ctx, b, "note: milk")
    assert run(ctx, b).state == "parked"
    return ctx, b


def test_an_expired_approval_is_escalated_once_and_not_resolved(aws: Any) -> None:
    ctx, b = parked_on_note(aws)
    (req,) = of_type(ctx, b, "approval_requested")
    expires = req["data"]["expires_at"]
    assert expires == req["time"] + DEFAULT_TTL_MS
    assert of_type(ctx, b, "parked")[0]["data"]["expires_at"] == expires
    aws.clock.advance(DEFAULT_TTL_MS - 1)  # not yet due: a step escalates nothing
    assert run(ctx, b).state == "parked"
    assert not of_type(ctx, b, "park_escalated")
    aws.clock.advance(1)  # at expires_at
    assert run(ctx, b).state == "parked"
    (esc,) = of_type(ctx, b, "park_escalated")
    cid = req["data"]["challenge_id"]
    assert esc["data"] == {"address": {"id": cid, "kind": "approval"}}
    assert esc["critical"] is False and esc["actor"] == {"kind": "host"}
    aws.clock.advance(3_600_000)
    assert run(ctx, b).state == "parked"  # a later step (a duplicate wake-up) adds nothing
    assert len(of_type(ctx, b, "park_escalated")) == 1
    assert ctx.writer.load(b).fold.status() == "parked"  # nothing auto-resolved
    # A grant now is approval_expired, recorded as a denial; the run then finishes.
    host = make_host(aws)
    tid = ctx.writer.load(b).thread_id
    with pytest.raises(ApiError) as err:
        host.decide_approval(ALICE, tid, cid, {"decision": "grant"})
    assert err.value.code == "approval_expired"
    assert run(ctx, b).state == "idle"
    (result,) = of_type(ctx, b, "tool_result")
    assert result["data"]["origin"] == "denied"
    assert ctx.writer.load(b).fold.escalated == set()
    verify_export(ctx, b)


def test_an_expired_question_is_escalated_once(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    say(ctx, b, "ask: tea or coffee?")
    assert run(ctx, b).state == "parked"
    (park,) = of_type(ctx, b, "parked")
    aws.clock.advance(DEFAULT_TTL_MS)
    assert run(ctx, b).state == "parked"
    assert run(ctx, b).state == "parked"
    (esc,) = of_type(ctx, b, "park_escalated")
    assert esc["data"]["address"] == park["data"]["address"]
    # The answer route names no approval_expired (its codes are the contract's): it still settles.
    host = make_host(aws)
    view = ctx.writer.load(b)
    host.answer_question(ALICE, view.thread_id, park["data"]["address"]["id"], b, {"answer": "tea"})
    assert run(ctx, b).state == "idle"
    assert types(ctx, b)[-1] == "turn_completed"
    verify_export(ctx, b)


def test_the_agent_sets_the_ttl_and_the_park_arms_its_wake_up(aws: Any) -> None:
    ctx, b = parked_on_note(aws, "demo-ttl")
    (req,) = of_type(ctx, b, "approval_requested")
    assert req["data"]["expires_at"] == req["time"] + 20_000
    aws.clock.advance(20_000)
    assert run(ctx, b).state == "parked"
    assert len(of_type(ctx, b, "park_escalated")) == 1
    verify_export(ctx, b)


class RecordingSqs:
    """The SQS client, recording what is sent to the timer queue (then sending it)."""

    def __init__(self, sqs: Any) -> None:
        self.sqs = sqs
        self.sent: list[tuple[dict[str, Any], int]] = []

    def send_message(self, **kw: Any) -> Any:
        self.sent.append((json.loads(kw["MessageBody"]), kw["DelaySeconds"]))
        return self.sqs.send_message(**kw)


def recording_ctx(aws: Any) -> tuple[Any, RecordingSqs]:
    sqs = RecordingSqs(aws.sqs)
    return make_ctx(aws, timer=StepTimer(sqs, aws.resources.run_step_timer_url)), sqs


class CrashAround(Writer):
    """The worker's writer, dying right before / after the append that holds a `type` event."""

    def __init__(self, base: Writer, type_: str, when: str) -> None:
        super().__init__(base.store, clock=base.clock)
        self.type, self.when = type_, when

    def append(self, branch_id: str, drafts: Sequence[Any], **kw: Any) -> Any:
        hit = any(isinstance(d, Draft) and d.type == self.type for d in drafts)
        if hit and self.when == "before":
            raise Crash
        out = super().append(branch_id, drafts, **kw)
        if hit:
            raise Crash
        return out


@pytest.mark.parametrize("when", ["before", "after"])
def test_the_wake_up_is_armed_before_the_park(aws: Any, when: str) -> None:
    ctx, sqs = recording_ctx(aws)
    b = new_thread(ctx, "demo-ttl")
    say(ctx, b, "ask: tea?")
    ctx.writer = CrashAround(ctx.writer, "parked", when)
    with pytest.raises(Crash):
        run(ctx, b)
    ((body, delay),) = sqs.sent
    assert body["branch_id"] == b and delay == 20
    parks = of_type(make_ctx(aws), b, "parked")
    assert [p["data"]["expires_at"] for p in parks] == ([body["not_before"]] if when == "after" else [])


def timer_event(branch_id: str, not_before: int) -> dict[str, Any]:
    body = json.dumps({"branch_id": branch_id, "not_before": not_before})
    record = {
        "messageId": "m1",
        "receiptHandle": "r1",
        "body": body,
        "attributes": {},
        "messageAttributes": {},
        "md5OfBody": "",
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:x-run-step-timer",
        "awsRegion": "us-east-1",
    }
    return {"Records": [record]}


def step_messages(aws: Any) -> list[dict[str, Any]]:
    url = aws.resources.run_step_queue_url
    got = aws.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages") or []
    return [json.loads(m["Body"]) for m in got]


def test_a_wake_up_past_the_queue_delay_hops_without_a_step(aws: Any) -> None:
    ctx, sqs = recording_ctx(aws)
    now = aws.clock()
    far = now + 3 * 3_600_000
    assert handle_batch(timer_event("b-far", far), None, engine=ctx) == {"batchItemFailures": []}
    assert sqs.sent == [({"branch_id": "b-far", "not_before": far}, 900)]
    assert step_messages(aws) == []
    assert handle_batch(timer_event("b-due", now + 500), None, engine=ctx) == {"batchItemFailures": []}
    assert step_messages(aws) == [{"branch_id": "b-due", "reason": "timer_due"}]
    assert len(sqs.sent) == 1


def park_hop(branch_id: str, not_before: int) -> dict[str, Any]:
    event = timer_event(branch_id, not_before)
    event["Records"][0]["body"] = json.dumps({"branch_id": branch_id, "not_before": not_before, "park": True})
    return event


def test_a_park_answered_before_it_expires_stops_hopping(aws: Any) -> None:
    """The wake-up armed for the default 24 h TTL would hop 96 times; once the approval is
    decided, the next hop finds no open park and is not sent again."""
    ctx, b = parked_on_note(aws)
    (req,) = of_type(ctx, b, "approval_requested")
    expires = req["data"]["expires_at"]
    hopper, sqs = recording_ctx(aws)
    assert handle_batch(park_hop(b, expires), None, engine=hopper) == {"batchItemFailures": []}
    assert [body for body, _ in sqs.sent] == [{"branch_id": b, "not_before": expires, "park": True}]
    grant(ctx, b)
    assert handle_batch(park_hop(b, expires), None, engine=hopper) == {"batchItemFailures": []}
    assert len(sqs.sent) == 1 and step_messages(aws) == []  # dropped: nothing to escalate
    assert handle_batch(park_hop("no-such-branch", expires), None, engine=hopper)["batchItemFailures"] == []
    assert len(sqs.sent) == 1


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_crash_during_the_escalation_leaves_exactly_one(aws: Any, when: str) -> None:
    """The worker dies right before / right after appending park_escalated; the step is
    redelivered to a fresh worker once the lease lapses."""
    ctx, b = parked_on_note(aws)
    aws.clock.advance(DEFAULT_TTL_MS)
    dying = make_ctx(aws)
    dying.writer = CrashAround(dying.writer, "park_escalated", when)
    with pytest.raises(Crash):
        run(dying, b, holder="w1")
    assert len(of_type(ctx, b, "park_escalated")) == (1 if when == "after" else 0)
    aws.clock.advance(120_000)  # the dead worker's lease lapses
    fresh = make_ctx(aws)
    assert run(fresh, b, holder="w2").state == "parked"
    assert run(fresh, b, holder="w3").state == "parked"
    assert len(of_type(fresh, b, "park_escalated")) == 1
    verify_export(fresh, b)


def test_the_agents_file_checks_the_ttls() -> None:
    from threads_aws.agents import load_agents, parse_agents
    from threads_aws.config.agents_file import AgentsFileError

    raw = {"a": {k: v for k, v in load_agents()["demo-ttl"].resolved().items() if k in ("model", "adapter")}}
    raw["a"].update(
        instructions="x", model_params={"max_tokens": 8}, approval_ttl_ms=10, question_ttl_ms="1h"
    )
    with pytest.raises(AgentsFileError) as err:
        parse_agents(json.dumps(raw))
    assert "approval_ttl_ms must be an integer" in str(err.value)
    assert "question_ttl_ms must be an integer" in str(err.value)
    raw["a"].update(approval_ttl_ms=60_000, question_ttl_ms=120_000)
    agent = parse_agents(json.dumps(raw))["a"]
    assert (agent.approval_ttl_ms, agent.question_ttl_ms) == (60_000, 120_000)
    assert agent.resolved()["approval_ttl_ms"] == 60_000  # a thread keeps the TTL it started with
