"""Deferred (non-blocking) calls: the demo agent's `later` tool returns a placeholder at once
(`tool_result{origin: deferred}`), the turn goes on and stays open while the call runs
(heartbeats wake the model with the running ids, heartbeat_ms and then doubling waits apart),
the runner records the real result as `tool_result_late` exactly once (signed per call), and
the turn then completes.
A runner killed mid-completion and redelivered neither loses nor repeats the late result."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from helpers.engine import (
    Crash,
    CrashingWriter,
    make_ctx,
    new_thread,
    of_type,
    run,
    say,
    types,
    verify_export,
)
from threads_aws.core.errors import LogError
from threads_aws.core.projections import run as run_projection
from threads_aws.engine import deferred_runner
from threads_aws.store.deletion import ThreadDeletion
from threads_aws.store.records import NotFound
from threads_aws.writer import Draft, Writer

HEARTBEAT_MS = 20_000  # the default policy.retry.heartbeat_ms


def messages(aws: Any, ctx: Any, *, delete: bool = False) -> list[dict[str, Any]]:
    """The deferred-call queue's messages (left in flight unless `delete`)."""
    url = ctx.deferred_calls.url
    out = aws.sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"], WaitTimeSeconds=3
    )
    got = out.get("Messages", [])
    if delete:
        for m in got:
            aws.sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    return got


def started(aws: Any, text: str = "later 0: hello") -> tuple[Any, str, dict[str, Any]]:
    ctx = make_ctx(aws)
    assert ctx.deferred_calls is not None  # template.yaml's DeferredCallQueue
    b = new_thread(ctx)
    say(ctx, b, text)
    out = run(ctx, b)
    assert out.state == "wait" and out.armed  # held open for the running call, its heartbeat armed
    got = messages(aws, ctx, delete=True)
    assert len(got) == 1
    return ctx, b, json.loads(got[0]["Body"])


def test_deferred_call_placeholder_late_result_and_completion(aws: Any) -> None:
    ctx, b, message = started(aws)
    assert types(ctx, b)[1:] == [
        "user_input",
        "model_request",
        "model_response",
        "tool_call",
        "permission_decision",
        "tool_result",
        "model_request",
        "model_response",
    ]
    (placeholder,) = of_type(ctx, b, "tool_result")
    assert placeholder["data"]["origin"] == "deferred"
    f = ctx.writer.load(b).fold
    assert f.turn_open and list(f.running) == [placeholder["data"]["call_id"]]
    assert run_projection(f.events)["status"] == "running"  # background work unfinished

    assert deferred_runner.run_one(ctx, message) == "appended"
    (late,) = of_type(ctx, b, "tool_result_late")
    assert late["data"]["preview"] == "later: hello" and late["actor"] == {"kind": "tool"}
    assert run(ctx, b).state == "idle"
    assert types(ctx, b)[-3:] == ["model_request", "model_response", "turn_completed"]
    last = of_type(ctx, b, "model_response")[-1]["data"]["content"][0]["text"]
    assert last == "Done: later: hello"
    f = ctx.writer.load(b).fold
    assert run_projection(f.events)["status"] == "completed"
    # a redelivered message, or a second one for the same call, records nothing more
    assert deferred_runner.run_one(ctx, message) == "done"
    assert len(of_type(ctx, b, "tool_result_late")) == 1
    verify_export(ctx, b)


def test_heartbeat_wakes_the_model_while_the_call_runs(aws: Any) -> None:
    ctx, b, message = started(aws, "later 0: slow")
    assert run(ctx, b).state == "wait"  # not due yet: nothing appended
    n = len(types(ctx, b))
    aws.clock.advance(HEARTBEAT_MS)
    assert run(ctx, b).state == "wait"
    (hb,) = of_type(ctx, b, "heartbeat")
    call_id = message["call_id"]
    assert hb["data"] == {"running_call_ids": [call_id]}
    assert types(ctx, b)[n:] == ["heartbeat", "model_request", "model_response"]
    assert of_type(ctx, b, "model_response")[-1]["data"]["content"][0]["text"] == f"Still running: {call_id}"
    assert deferred_runner.run_one(ctx, message) == "appended"
    assert run(ctx, b).state == "idle"
    assert types(ctx, b)[-1] == "turn_completed"
    verify_export(ctx, b)


def test_forged_or_foreign_messages_are_dropped(aws: Any) -> None:
    ctx, b, message = started(aws)
    assert deferred_runner.run_one(ctx, {**message, "token": "0" * 64}) == "dropped"
    other = {**message, "tenant": "other"}
    assert deferred_runner.run_one(ctx, other) == "dropped"  # its token is for acme's call
    resigned = {**other, "token": deferred_runner_token(ctx, other)}
    assert deferred_runner.run_one(ctx, resigned) == "dropped"  # signed, but not that tenant's branch
    assert of_type(ctx, b, "tool_result_late") == []


def deferred_runner_token(ctx: Any, coords: dict[str, str]) -> str:
    from threads_aws.store.deferred_calls import token

    return token(ctx.deferred_calls.key.get(), coords)


def test_late_result_needs_a_deferred_placeholder(aws: Any) -> None:
    """Rule 7: the writer refuses a tool_result_late without an earlier deferred result."""
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    say(ctx, b, "time")
    run(ctx, b)
    (res,) = of_type(ctx, b, "tool_result")
    data = {"call_id": res["data"]["call_id"], "completeness": "complete", "is_error": False, "preview": "x"}
    with pytest.raises(LogError) as err:
        ctx.writer.append(b, [Draft("tool_result_late", data, {"kind": "tool"})])
    assert err.value.code == "invalid_transition"


def test_a_message_before_its_placeholder_waits(aws: Any) -> None:
    """The worker sends before it appends: a message whose call is still pending is retried."""
    ctx, b, message = started(aws)
    msg = {**message, "call_id": "nope"}
    msg["token"] = deferred_runner_token(ctx, msg)
    assert deferred_runner.run_one(ctx, msg) == "dropped"  # no such call


def test_cancel_before_the_runner_starts_settles_it_not_executed(aws: Any) -> None:
    ctx, b, message = started(aws)
    principal = {"issuer": "api", "subject": "alice", "tenant": "acme"}
    ctx.writer.append(
        b, [Draft("cancel_requested", {"scope": "turn"}, {"kind": "user", "principal": principal})]
    )
    assert run(ctx, b).state == "idle"
    assert types(ctx, b)[-2:] == ["cancelled", "turn_completed"]  # a read-only call holds nothing
    assert deferred_runner.run_one(ctx, message) == "appended"
    (late,) = of_type(ctx, b, "tool_result_late")
    assert late["data"]["is_error"] and "cancelled" in late["data"]["preview"]
    verify_export(ctx, b)


@pytest.mark.parametrize("when", ["before", "after"])
def test_runner_killed_during_completion_then_redelivered(aws: Any, when: str) -> None:
    """Killed as it appends the late result (before: the tool ran, nothing recorded; after:
    recorded, the message never acknowledged): the redelivered message records it exactly once."""
    ctx, b, message = started(aws)
    dying = dataclasses.replace(ctx, writer=CrashingWriter(ctx.writer, at=1, when=when))
    with pytest.raises(Crash):
        deferred_runner.run_one(dying, message)
    assert len(of_type(ctx, b, "tool_result_late")) == (1 if when == "after" else 0)
    fresh = make_ctx(aws)  # a new container: its own writer and view cache
    expected = "done" if when == "after" else "appended"
    assert deferred_runner.run_one(fresh, message, receive_count=2) == expected
    assert len(of_type(ctx, b, "tool_result_late")) == 1
    assert run(ctx, b).state == "idle"
    assert types(ctx, b)[-1] == "turn_completed"
    verify_export(ctx, b)


def test_handler_batch_runs_each_record(aws: Any) -> None:
    ctx, b, message = started(aws)
    record = {
        "messageId": "m1",
        "body": json.dumps(message),
        "attributes": {"ApproximateReceiveCount": "1"},
    }
    assert deferred_runner.handle_batch({"Records": [record]}, None, engine=ctx) == {"batchItemFailures": []}
    assert len(of_type(ctx, b, "tool_result_late")) == 1


# ------------------------------------------------------------------ an effectful deferred tool

BG_AGENT = {
    "model": {"provider": "scripted", "name": "scripted-1"},
    "adapter": {"name": "scripted", "version": "1"},
    "instructions": "Book things in the background.",
    "tools": [
        {
            "name": "book",
            "description": "Book a slot (an idempotent effect, in the background).",
            "effect_class": "idempotent",
            "dedup_window_ms": 86_400_000,
            "input_schema": {"type": "object", "properties": {"slot": {"type": "string"}}},
            "deferred": True,
        }
    ],
    "permissions": {"allow": ["book"]},
}


class Book:
    def __init__(self, fail: bool = False) -> None:
        self.keys: list[str | None] = []
        self.fail = fail

    def __call__(self, args: dict[str, Any], tc: Any) -> Any:
        from threads_aws.engine.tools import ToolOutput, ToolUncertain

        self.keys.append(tc.effect_key)
        if self.fail:
            raise ToolUncertain("timeout")
        return ToolOutput(f"booked {args['slot']}")


def bg_setup(aws: Any, book: Book) -> tuple[Any, str]:
    from helpers.engine import scripted
    from threads_aws.agents import parse_agents
    from threads_aws.engine.models import ScriptedModel
    from threads_aws.engine.tools import BUILTIN_EXECUTORS

    done = {"content": [{"type": "text", "text": "Done."}], "stop_reason": "end_turn"}
    use = {"type": "tool_use", "call_id": "call_book_1", "name": "book", "input": {"slot": "9am"}}
    model = ScriptedModel([{"content": [use], "stop_reason": "tool_use"}, done, done, done])
    agents = parse_agents(json.dumps({"bg": BG_AGENT}))
    ctx = make_ctx(aws, models=scripted(model), tools={**BUILTIN_EXECUTORS, "book": book})
    ctx.agents = agents
    b = new_thread_of(ctx, agents["bg"])
    say(ctx, b, "book 9am")
    assert run(ctx, b).state == "wait"
    return ctx, b


def new_thread_of(ctx: Any, agent: Any) -> str:
    from threads_aws.core.canonical import new_uuid7
    from threads_aws.core.lines import StoredLine, header_line
    from threads_aws.store import NewBranch

    thread_id, branch_id = new_uuid7(), new_uuid7()
    header = StoredLine.of_header(header_line(thread_id, branch_id, ctx.clock()))
    ctx.store.create_branch(
        NewBranch(thread_id=thread_id, tenant="acme", branch_id=branch_id, header=header, create_thread=True)
    )
    ctx.writer.append(branch_id, [Draft("thread_started", agent.thread_started(), {"kind": "host"})])
    return branch_id


def test_effectful_deferred_call_is_begun_until_its_runner_commits(aws: Any) -> None:
    book = Book()
    ctx, b = bg_setup(aws, book)
    evs = ctx.writer.load(b).fold.events
    begin = next(e for e in evs if e["type"] == "effect_begin")
    placeholder = next(e for e in evs if e["type"] == "tool_result")
    assert placeholder["seq"] == begin["seq"] + 1  # one append: begun, then its placeholder
    assert run(ctx, b).state == "wait"  # the runner's begun effect is no crashed worker's
    assert of_type(ctx, b, "effect_unknown") == []
    # a cancel waits for the running effect (rule 11), then ends the turn
    principal = {"issuer": "api", "subject": "alice", "tenant": "acme"}
    ctx.writer.append(
        b, [Draft("cancel_requested", {"scope": "turn"}, {"kind": "user", "principal": principal})]
    )
    assert run(ctx, b).state == "wait"
    assert of_type(ctx, b, "cancelled") == []
    (message,) = [json.loads(m["Body"]) for m in messages(aws, ctx, delete=True)]
    # the barrier came before the body started: nothing runs, the effect is settled not_sent
    assert deferred_runner.run_one(ctx, message) == "appended"
    assert book.keys == []
    assert types(ctx, b)[-2:] == ["effect_resolved", "tool_result_late"]
    assert run(ctx, b).state == "idle"
    assert types(ctx, b)[-2:] == ["cancelled", "turn_completed"]
    verify_export(ctx, b)


def test_effectful_deferred_call_commits_with_its_late_result(aws: Any) -> None:
    book = Book()
    ctx, b = bg_setup(aws, book)
    (message,) = [json.loads(m["Body"]) for m in messages(aws, ctx, delete=True)]
    assert deferred_runner.run_one(ctx, message) == "appended"
    assert book.keys == [f"{b}:call_book_1"]  # the effect key: its idempotency key
    assert types(ctx, b)[-2:] == ["effect_commit", "tool_result_late"]
    assert run(ctx, b).state == "idle"
    assert types(ctx, b)[-1] == "turn_completed"
    verify_export(ctx, b)


def test_deferred_call_without_an_answer_parks_until_a_human_settles_it(aws: Any) -> None:
    book = Book(fail=True)
    ctx, b = bg_setup(aws, book)
    (message,) = [json.loads(m["Body"]) for m in messages(aws, ctx, delete=True)]
    with pytest.raises(deferred_runner.RetryLater):
        deferred_runner.run_one(ctx, message, receive_count=1)  # redelivered: the same key again
    assert deferred_runner.run_one(ctx, message, receive_count=deferred_runner.MAX_RECEIVES) == "appended"
    assert types(ctx, b)[-2:] == ["effect_unknown", "parked"]
    assert run(ctx, b).state == "parked"
    key = f"{b}:call_book_1"
    principal = {"issuer": "api", "subject": "alice", "tenant": "acme"}
    data = {"by": "human", "call_id": "call_book_1", "outcome": "assume_done"}
    ctx.writer.append(b, [Draft("effect_resolved", data, {"kind": "approver", "principal": principal})])
    assert run(ctx, b).state == "idle"
    (late,) = of_type(ctx, b, "tool_result_late")
    assert not late["data"]["is_error"]
    assert of_type(ctx, b, "resumed")[-1]["data"]["address"] == {"id": key, "kind": "effect"}
    assert types(ctx, b)[-1] == "turn_completed"
    assert deferred_runner.run_one(ctx, message, receive_count=5) == "done"
    verify_export(ctx, b)


# ------------------------------------------------------------------ background subagents


def test_background_subagent_returns_at_once_and_its_answer_arrives_late(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    say(ctx, b, "bg: demo: time")
    assert run(ctx, b).state == "wait"  # the turn goes on, held open while the child runs
    (spawned,) = of_type(ctx, b, "agent_spawned")
    assert spawned["data"]["mode"] == "background" and spawned["data"]["isolation"] == "none"
    (placeholder,) = of_type(ctx, b, "tool_result")
    assert placeholder["data"]["origin"] == "deferred"
    assert types(ctx, b)[-2:] == ["model_request", "model_response"]  # it answered meanwhile
    child = ctx.stores.threads.get_thread("acme", spawned["data"]["child_thread_id"])
    assert child is not None
    assert run(ctx, child.main_branch_id).state == "idle"
    assert run(ctx, b).state == "idle"
    assert types(ctx, b)[-5:] == [
        "agent_finished",
        "tool_result_late",
        "model_request",
        "model_response",
        "turn_completed",
    ]
    f = ctx.writer.load(b).fold
    assert run_projection(f.events)["status"] == "completed"
    verify_export(ctx, b)
    verify_export(ctx, child.main_branch_id)


def test_tree_cancel_reaches_a_background_child(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    say(ctx, b, "bg: demo: note: buy milk")  # the child parks on its approval
    assert run(ctx, b).state == "wait"
    (spawned,) = of_type(ctx, b, "agent_spawned")
    child = ctx.stores.threads.get_thread("acme", spawned["data"]["child_thread_id"])
    assert run(ctx, child.main_branch_id).state == "parked"
    assert run(ctx, b).state == "parked"  # a child that parks parks its parent
    principal = {"issuer": "api", "subject": "alice", "tenant": "acme"}
    ctx.writer.append(
        b, [Draft("cancel_requested", {"scope": "tree"}, {"kind": "user", "principal": principal})]
    )
    assert run(ctx, b).state == "parked"  # the barrier went to the child; the parent waits on it
    assert of_type(ctx, child.main_branch_id, "cancel_requested")[0]["data"]["scope"] == "tree"
    assert run(ctx, child.main_branch_id).state == "idle"
    assert run(ctx, b).state == "idle"
    tail = types(ctx, b)
    assert tail.index("agent_finished") < tail.index("tool_result_late") < tail.index("cancelled")
    assert tail[-1] == "turn_completed"
    (finished,) = of_type(ctx, b, "agent_finished")
    assert finished["data"]["status"] == "cancelled"
    verify_export(ctx, b)
    verify_export(ctx, child.main_branch_id)


def test_worker_killed_between_sending_and_its_placeholder(aws: Any) -> None:
    """The worker sends the call to its runner, then dies before the placeholder is appended:
    the spare message waits (the call is still pending); the recovered worker sends again and
    appends it; both messages together record one late result."""
    from helpers.engine import crashing

    at = 1
    while True:  # the first append after the send: the placeholder's
        ctx, _ = crashing(aws, at=at, when="before")
        b = new_thread(make_ctx(aws))
        say(make_ctx(aws), b, "later 0: once")
        try:
            run(ctx, b)
        except Crash:
            pass
        sent = messages(aws, ctx, delete=True)
        if sent:
            break
        at += 1
        assert at < 10
    assert of_type(ctx, b, "tool_result") == []
    spare = json.loads(sent[0]["Body"])
    fresh = make_ctx(aws)
    with pytest.raises(deferred_runner.RetryLater):
        deferred_runner.run_one(fresh, spare)  # no placeholder yet: it comes back later
    assert run(fresh, b).state == "wait"  # recovery: the call is dispatched again
    (again,) = [json.loads(m["Body"]) for m in messages(aws, fresh, delete=True)]
    assert again == spare  # the same call, the same token
    assert deferred_runner.run_one(fresh, spare, receive_count=2) == "appended"
    assert deferred_runner.run_one(fresh, again) == "done"
    assert len(of_type(fresh, b, "tool_result_late")) == 1
    assert run(fresh, b).state == "idle"
    verify_export(fresh, b)


def test_stop_when_idle_waits_for_the_deferred_result_then_stops(aws: Any) -> None:
    ctx, b, message = started(aws)
    principal = {"issuer": "api", "subject": "alice", "tenant": "acme"}
    ctx.writer.append(b, [Draft("stop_when_idle", {}, {"kind": "user", "principal": principal})])
    aws.clock.advance(HEARTBEAT_MS)
    assert run(ctx, b).state == "wait"  # no heartbeat, no new request: it waits for the result
    assert of_type(ctx, b, "heartbeat") == []
    assert deferred_runner.run_one(ctx, message) == "appended"
    n = len(of_type(ctx, b, "model_request"))
    assert run(ctx, b).state == "idle"
    assert len(of_type(ctx, b, "model_request")) == n  # nothing new started
    assert types(ctx, b)[-2:] == ["tool_result_late", "turn_completed"]
    verify_export(ctx, b)


def test_a_call_whose_runner_is_lost_is_given_up_after_max_heartbeats(aws: Any) -> None:
    from threads_aws.engine.deferred import GAVE_UP, MAX_HEARTBEAT_GAP_MS, MAX_HEARTBEATS

    ctx, b, message = started(aws)
    gaps = []
    for beat in range(MAX_HEARTBEATS):
        gap = min(HEARTBEAT_MS << beat, MAX_HEARTBEAT_GAP_MS)  # each wait twice the last
        aws.clock.advance(gap - 1)
        assert run(ctx, b).state == "wait"
        assert len(of_type(ctx, b, "heartbeat")) == beat  # not due a millisecond early
        aws.clock.advance(1)
        assert run(ctx, b).state == "wait"
        gaps.append(gap)
    assert len(of_type(ctx, b, "heartbeat")) == MAX_HEARTBEATS
    assert sum(gaps) == 1_220_000  # given up after about 20 minutes, as before the backoff
    aws.clock.advance(MAX_HEARTBEAT_GAP_MS)
    assert run(ctx, b).state == "idle"
    (late,) = of_type(ctx, b, "tool_result_late")
    assert late["data"] == {**late["data"], "is_error": True, "preview": GAVE_UP}
    assert deferred_runner.run_one(ctx, message) == "done"  # its runner, late: recorded already
    verify_export(ctx, b)


def test_background_child_runs_under_its_budget(aws: Any) -> None:
    """A background spawn's budget is the child run's (agent_spawned.budget): the child that
    exceeds it ends budget_exhausted, which is the parent's late (error) result."""
    from threads_aws.engine.demo_model import DemoModel
    from threads_aws.engine.models import ScriptedModel

    use = {
        "type": "tool_use",
        "call_id": "call_bg_1",
        "name": "spawn_agent",
        "input": {"agent": "demo", "background": True, "budget": {"max_model_requests": 1}, "prompt": "time"},
    }
    first = ScriptedModel([{"content": [use], "stop_reason": "tool_use"}])
    calls = []

    def models(_m: Any, _a: Any) -> Any:
        calls.append(1)
        return first if len(calls) == 1 else DemoModel()

    ctx = make_ctx(aws, models=models)
    b = new_thread(ctx)
    say(ctx, b, "go")
    assert run(ctx, b).state == "wait"
    (spawned,) = of_type(ctx, b, "agent_spawned")
    assert spawned["data"]["budget"] == {"max_model_requests": 1}
    child = ctx.stores.threads.get_thread("acme", spawned["data"]["child_thread_id"])
    assert run(ctx, child.main_branch_id).state == "idle"
    assert of_type(ctx, child.main_branch_id, "budget_exceeded")
    assert run(ctx, b).state == "idle"
    (finished,) = of_type(ctx, b, "agent_finished")
    assert finished["data"]["status"] == "budget_exhausted"
    (late,) = of_type(ctx, b, "tool_result_late")
    assert late["data"]["is_error"]
    verify_export(ctx, b)
    verify_export(ctx, child.main_branch_id)


class DeletedMidBody(Writer):
    """A deletion lands while the call's body runs: the runner's second load finds no thread."""

    def __init__(self, base: Writer, deletion: Any, tenant: str, thread_id: str) -> None:
        super().__init__(base.store, clock=base.clock)
        self.loads, self.deletion, self.tenant, self.thread_id = 0, deletion, tenant, thread_id

    def load(self, branch_id: str, **kw: Any) -> Any:
        self.loads += 1
        if self.loads == 2:
            assert self.deletion.delete(self.tenant, self.thread_id)
        return super().load(branch_id, **kw)


def test_a_thread_deleted_while_its_deferred_call_runs_drops_the_result(aws: Any) -> None:
    ctx, b, message = started(aws)
    deletion = ThreadDeletion(ctx.stores, clock=ctx.clock)
    racing = DeletedMidBody(ctx.writer, deletion, message["tenant"], message["thread_id"])
    assert deferred_runner.run_one(dataclasses.replace(ctx, writer=racing), message) == "dropped"
    assert racing.loads == 2  # the body ran; the deletion came before its result was recorded
    with pytest.raises(NotFound):
        ctx.writer.load(b)
    assert messages(aws, ctx) == []  # no wake-up for a thread that is gone
