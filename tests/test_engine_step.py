"""The run-step worker on moto: the demo model through every built-in tool, approvals,
exactly-once effects across a crash, the cancel barrier, and clean exports."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers.engine import (
    USER,
    Crash,
    events,
    grant,
    make_ctx,
    new_thread,
    of_type,
    run,
    say,
    scripted,
    types,
    verify_export,
)
from threads_aws.core import projections
from threads_aws.engine.models import ScriptedModel
from threads_aws.engine.tools import BUILTIN_EXECUTORS, ToolContext, ToolOutput, ToolUncertain, run_note
from threads_aws.store.approvals import approval_key
from threads_aws.store.questions import question_key
from threads_aws.writer import Draft, Writer


def notes(aws: Any) -> list[dict[str, Any]]:
    out = aws.ddb.query(
        TableName=aws.resources.state_table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": "NOTE#acme"}},
    )
    return list(out["Items"])


def test_time_is_read_only_and_completes(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    say(ctx, b, "time")
    out = run(ctx, b)
    assert out.state == "idle"
    assert types(ctx, b, 2) == [
        "model_request",
        "model_response",
        "tool_call",
        "permission_decision",
        "tool_result",
        "model_request",
        "model_response",
        "turn_completed",
    ]
    decision = of_type(ctx, b, "permission_decision")[0]["data"]
    assert decision["decision"] == "allow" and decision["source"] == "policy"
    result = of_type(ctx, b, "tool_result")[0]["data"]
    assert result["origin"] == "executed" and result["preview"] == "2023-11-14T22:13:20.000Z"
    assert of_type(ctx, b, "model_response")[-1]["data"]["content"][0]["text"].startswith("Done: 2023")
    assert of_type(ctx, b, "turn_completed")[0]["data"] == {"reason": "end_turn"}
    assert out.appended == 8
    verify_export(ctx, b)


def test_plain_text_quotes_the_line(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    run_id = say(ctx, b, "hello there")
    run(ctx, b)
    resp = of_type(ctx, b, "model_response")[0]["data"]
    assert resp["content"] == [{"type": "text", "text": 'You said: "hello there"'}]
    outcome = projections.run_outcome(events(ctx, b), run_id, thread_id="t", branch_id=b)
    assert outcome is not None and outcome["status"] == "completed"
    assert run(ctx, b).appended == 0  # a duplicate step appends nothing
    verify_export(ctx, b)


def test_note_needs_approval_then_runs_exactly_once(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    say(ctx, b, "note: buy milk")
    assert run(ctx, b).state == "parked"
    req = of_type(ctx, b, "approval_requested")[0]["data"]
    assert of_type(ctx, b, "permission_decision")[0]["data"]["decision"] == "ask"
    row = aws.ddb.get_item(
        TableName=aws.resources.state_table, Key=approval_key(req["challenge_id"])
    )["Item"]
    assert row["state"]["S"] == "open" and row["tool"]["S"] == "note"
    assert row["args_hash"]["S"] == req["args_hash"] and row["branch_id"]["S"] == b
    assert json.loads(row["input"]["S"]) == {"text": "buy milk"}
    assert json.loads(row["suggested_rules"]["S"]) == ["note"]
    assert run(ctx, b).state == "parked"  # nothing to do while parked
    assert "effect_begin" not in types(ctx, b)

    grant(ctx, b)
    assert run(ctx, b).state == "idle"
    tail = types(ctx, b)[types(ctx, b).index("resumed") + 1 :]
    assert tail == [
        "effect_begin",
        "effect_commit",
        "tool_result",
        "model_request",
        "model_response",
        "turn_completed",
    ]
    assert of_type(ctx, b, "tool_result")[0]["data"]["preview"] == "stored note 1"
    assert of_type(ctx, b, "model_response")[-1]["data"]["content"][0]["text"] == "Done: stored note 1"
    assert run(ctx, b).appended == 0
    assert len(notes(aws)) == 1
    verify_export(ctx, b)


def test_approval_denied_returns_denied_result(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    say(ctx, b, "note: secret")
    run(ctx, b)
    grant(ctx, b, deny=True)
    assert run(ctx, b).state == "idle"
    result = of_type(ctx, b, "tool_result")[0]["data"]
    assert result["origin"] == "denied" and result["is_error"] is True
    assert "effect_begin" not in types(ctx, b) and notes(aws) == []
    verify_export(ctx, b)


def test_policy_deny_rule(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx, deny=["note"])
    say(ctx, b, "note: x")
    assert run(ctx, b).state == "idle"
    d = of_type(ctx, b, "permission_decision")[0]["data"]
    assert (d["decision"], d["source"], d.get("rule_id")) == ("deny", "policy", "note")
    assert of_type(ctx, b, "tool_result")[0]["data"]["origin"] == "denied"
    verify_export(ctx, b)


def test_ask_user_parks_awaiting_input_with_a_question_row(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    say(ctx, b, "ask: which colour?")
    assert run(ctx, b).state == "parked"
    park = of_type(ctx, b, "parked")[0]["data"]
    call_id = of_type(ctx, b, "tool_call")[0]["data"]["call_id"]
    assert park["address"] == {"id": call_id, "kind": "input"} and park["reason"] == "awaiting_input"
    row = aws.ddb.get_item(TableName=aws.resources.state_table, Key=question_key(b, call_id))["Item"]
    assert row["state"]["S"] == "open" and row["question"]["S"] == "which colour?"
    assert json.loads(row["asked_by"]["S"]) == USER["principal"]
    # the answer route appends the answered result and resumes
    ctx.writer.append(
        b,
        [
            Draft(
                "tool_result",
                {
                    "call_id": call_id,
                    "completeness": "complete",
                    "is_error": False,
                    "origin": "answered",
                    "preview": "blue",
                },
                USER,
            )
        ],
    )
    cause = events(ctx, b)[-1]["event_id"]
    ctx.writer.append(
        b, [Draft("resumed", {"address": park["address"], "cause_event_id": cause}, {"kind": "host"})]
    )
    assert run(ctx, b).state == "idle"
    assert of_type(ctx, b, "model_response")[-1]["data"]["content"][0]["text"] == "Done: blue"
    verify_export(ctx, b)


def test_todo_write_appends_todos_updated(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    say(ctx, b, "todo: wash; dry ;fold")
    assert run(ctx, b).state == "idle"
    todos = of_type(ctx, b, "todos_updated")[0]["data"]["todos"]
    assert [t["id"] for t in todos] == ["t1", "t2", "t3"]
    assert [t["content"] for t in todos] == ["wash", "dry", "fold"]
    assert projections.todos(events(ctx, b)) == todos
    i = types(ctx, b).index("todos_updated")
    assert types(ctx, b)[i + 1] == "tool_result"
    verify_export(ctx, b)


def test_crash_between_begin_and_commit_dedups_by_effect_key(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    say(ctx, b, "note: once")
    run(ctx, b)
    grant(ctx, b)

    def note_then_crash(args: dict[str, Any], tc: ToolContext) -> ToolOutput:
        run_note(args, tc)  # the effect happens ...
        raise Crash  # ... and the worker dies before effect_commit

    ctx.tools["note"] = note_then_crash
    with pytest.raises(Crash):
        run(ctx, b)
    assert types(ctx, b)[-1] == "effect_begin" and len(notes(aws)) == 1

    aws.clock.advance(120_000)  # the dead worker's lease lapses
    fresh = make_ctx(aws)  # a new container
    assert run(fresh, b, holder="worker-2").state == "idle"
    tail = types(fresh, b)[types(fresh, b).index("effect_begin") :]
    assert tail[:6] == [
        "effect_begin",
        "effect_unknown",
        "effect_resolved",
        "effect_begin",
        "effect_commit",
        "tool_result",
    ]
    assert of_type(fresh, b, "effect_unknown")[0]["data"]["reason"] == "crash_after_begin"
    resolved = of_type(fresh, b, "effect_resolved")[0]["data"]
    assert resolved["outcome"] == "safe_to_retry" and resolved["by"] == "provider_dedup"
    assert [e["data"]["attempt"] for e in of_type(fresh, b, "effect_begin")] == [1, 2]
    assert of_type(fresh, b, "tool_result")[0]["data"]["preview"] == "stored note 1"
    assert len(notes(aws)) == 1  # stored exactly once
    verify_export(fresh, b)


def test_timeout_after_dispatch_parks_effect_unknown_then_human_resolves(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    say(ctx, b, "note: maybe")
    run(ctx, b)
    grant(ctx, b)

    def timeout(args: dict[str, Any], tc: ToolContext) -> ToolOutput:
        raise ToolUncertain("timeout")

    ctx.tools["note"] = timeout
    assert run(ctx, b).state == "parked"
    assert types(ctx, b)[-3:] == ["effect_begin", "effect_unknown", "parked"]
    park = of_type(ctx, b, "parked")[-1]["data"]
    call_id = of_type(ctx, b, "tool_call")[0]["data"]["call_id"]
    assert park == {"address": {"id": f"{b}:{call_id}", "kind": "effect"}, "reason": "effect_unknown"}
    # the parked-resolve route: assume_not_done re-dispatches under the same key
    ctx.tools["note"] = BUILTIN_EXECUTORS["note"]
    data = {"by": "human", "call_id": call_id, "outcome": "assume_not_done"}
    ctx.writer.append(
        b, [Draft("effect_resolved", data, {"kind": "approver", "principal": USER["principal"]})]
    )
    assert run(ctx, b).state == "idle"
    # note is idempotent: the worker re-sent it inside the dedup window (attempts 2, 3) before it
    # parked; the human's assume_not_done re-dispatched it (attempt 4)
    assert [e["data"]["attempt"] for e in of_type(ctx, b, "effect_begin")] == [1, 2, 3, 4]
    assert "resumed" in types(ctx, b)[-8:]  # the worker closed the settled park itself
    assert len(notes(aws)) == 1
    verify_export(ctx, b)


def test_assume_done_materializes_result(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    say(ctx, b, "note: maybe")
    run(ctx, b)
    grant(ctx, b)
    ctx.tools["note"] = lambda a, tc: (_ for _ in ()).throw(ToolUncertain("transport_error"))
    assert run(ctx, b).state == "parked"
    call_id = of_type(ctx, b, "tool_call")[0]["data"]["call_id"]
    data = {"by": "human", "call_id": call_id, "outcome": "assume_done"}
    ctx.writer.append(
        b, [Draft("effect_resolved", data, {"kind": "approver", "principal": USER["principal"]})]
    )
    assert run(ctx, b).state == "idle"
    result = of_type(ctx, b, "tool_result")[0]["data"]
    assert result["origin"] == "materialized_from_commit" and result["is_error"] is False
    assert len(of_type(ctx, b, "effect_begin")) == 3  # idempotent: two re-sends before the park
    verify_export(ctx, b)


def test_cancel_while_model_in_flight(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx, "scripted")
    api = Writer(aws.events(), clock=aws.clock)  # the cancel route: another process

    def cancel_now(request: bytes, request_event_id: str) -> None:
        api.append(b, [Draft("cancel_requested", {"scope": "turn"}, USER)])

    model = ScriptedModel(
        [
            {
                "content": [{"type": "tool_use", "call_id": "c1", "name": "note", "input": {"text": "x"}}],
                "stop_reason": "tool_use",
            }
        ],
        hook=cancel_now,
    )
    ctx.models = scripted(model)
    b2 = b
    say(ctx, b2, "please note x")
    assert run(ctx, b2).state == "idle"
    assert types(ctx, b2)[2:] == [
        "model_request",
        "cancel_requested",
        "model_response",
        "tool_call",
        "permission_decision",
        "tool_result",
        "cancelled",
        "turn_completed",
    ]
    result = of_type(ctx, b2, "tool_result")[0]["data"]
    assert result["origin"] == "not_executed" and result["is_error"] is True
    assert of_type(ctx, b2, "turn_completed")[0]["data"] == {"reason": "cancelled"}
    assert "effect_begin" not in types(ctx, b2) and len(model.requests) == 1
    verify_export(ctx, b2)


def test_cancel_while_parked_on_approval(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    run_id = say(ctx, b, "note: never")
    run(ctx, b)
    ctx.writer.append(b, [Draft("cancel_requested", {"scope": "turn"}, USER)])
    assert run(ctx, b).state == "idle"
    assert types(ctx, b)[-4:] == ["tool_result", "resumed", "cancelled", "turn_completed"]
    outcome = projections.run_outcome(events(ctx, b), run_id, thread_id="t", branch_id=b)
    assert outcome is not None and outcome["status"] == "cancelled"
    verify_export(ctx, b)


def test_crashed_model_request_is_abandoned_and_resent(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx, "scripted")

    def die(request: bytes, rid: str) -> None:
        raise Crash

    ctx.models = scripted(ScriptedModel(hook=die))
    say(ctx, b, "hi")
    with pytest.raises(Crash):
        run(ctx, b)
    assert types(ctx, b)[-1] == "model_request"
    aws.clock.advance(120_000)
    fresh = make_ctx(aws, models=scripted(ScriptedModel()))
    assert run(fresh, b, holder="worker-2").state == "idle"
    assert types(fresh, b)[2:] == [
        "model_request",
        "model_attempt_abandoned",
        "model_request",
        "model_response",
        "turn_completed",
    ]
    ab = of_type(fresh, b, "model_attempt_abandoned")[0]["data"]
    assert (ab["provider_outcome"], ab["reason"]) == ("unknown", "crash")
    assert [e["data"]["attempt"] for e in of_type(fresh, b, "model_request")] == [1, 2]
    verify_export(fresh, b)


def test_provider_errors_retry_then_model_unavailable(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx, "scripted")  # no fallback models: policy.retry.max_retries (3) re-sends
    err = {"error": {"reason": "overloaded", "http_status": 529}}
    ctx.models = scripted(ScriptedModel([err] * 4))
    say(ctx, b, "hi")
    while (out := run(ctx, b)).state == "wait":
        assert out.not_before is not None
        aws.clock.advance(out.not_before - aws.clock())
    assert out.state == "idle"
    assert of_type(ctx, b, "turn_completed")[0]["data"] == {"reason": "model_unavailable"}
    assert len(of_type(ctx, b, "model_attempt_abandoned")) == 4
    assert len(of_type(ctx, b, "retry_scheduled")) == 3
    verify_export(ctx, b)


def test_busy_when_another_worker_holds_the_lease(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    say(ctx, b, "hi")
    ctx.store.acquire_lease(b, "other", ttl_ms=60_000, now_ms=aws.clock())
    out = run(ctx, b)
    assert (out.state, out.appended) == ("busy", 0)


def test_deadline_returns_more(aws: Any) -> None:
    from threads_aws.engine.step import advance

    ctx = make_ctx(aws)
    b = new_thread(ctx)
    say(ctx, b, "hi")
    assert advance(ctx, b, holder_id="w", deadline_ms=aws.clock() + 1000).state == "more"
    assert run(ctx, b).state == "idle"


def test_thread_rule_and_mode_reach_the_worker(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    say(ctx, b, "note: first")
    run(ctx, b)
    challenge_id = of_type(ctx, b, "approval_requested")[0]["data"]["challenge_id"]
    rule = {"challenge_id": challenge_id, "decision": "allow", "rule": "note"}
    ctx.writer.append(
        b, [Draft("permission_rule_added", rule, {"kind": "approver", "principal": USER["principal"]})]
    )
    grant(ctx, b)
    assert run(ctx, b).state == "idle"
    say(ctx, b, "note: second")  # remembered for this thread: no approval
    assert run(ctx, b).state == "idle"
    d = of_type(ctx, b, "permission_decision")[-1]["data"]
    assert (d["decision"], d["source"], d["rule_id"]) == ("allow", "thread_rule", "note")
    assert len(notes(aws)) == 2
    ctx.writer.append(b, [Draft("mode_changed", {"from": "default", "to": "plan"}, USER)])
    say(ctx, b, "note: third")
    assert run(ctx, b).state == "idle"
    d = of_type(ctx, b, "permission_decision")[-1]["data"]
    assert (d["decision"], d["source"], d["mode"]) == ("deny", "mode", "plan")
    assert len(notes(aws)) == 2
    verify_export(ctx, b)


class _ApiAfter(Writer):
    """The worker's writer; right after it commits a batch holding `typ`, another process (the
    API) appends `then` — a control landing exactly at that point."""

    def __init__(self, base: Writer, typ: str, then: Draft, api: Writer) -> None:
        super().__init__(base.store, clock=base.clock)
        self.typ, self.then, self.api, self.fired = typ, then, api, False

    def append(self, branch_id: str, drafts: Any, **kw: Any) -> Any:
        out = super().append(branch_id, drafts, **kw)
        if not self.fired and any(d.type == self.typ for d in drafts):
            self.fired = True
            self.api.append(branch_id, [self.then])
        return out


def test_cancel_between_effect_begin_and_dispatch_never_dispatches(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    run_id = say(ctx, b, "note: too late")
    run(ctx, b)
    grant(ctx, b)
    api = Writer(aws.events(), clock=aws.clock)
    ctx.writer = _ApiAfter(
        ctx.writer, "effect_begin", Draft("cancel_requested", {"scope": "thread"}, USER), api
    )
    dispatched: list[str] = []

    def spy(args: dict[str, Any], tc: ToolContext) -> ToolOutput:
        dispatched.append(tc.call_id)
        return run_note(args, tc)

    ctx.tools["note"] = spy
    assert run(ctx, b).state == "idle"
    assert dispatched == [] and notes(aws) == []
    tail = types(ctx, b)[types(ctx, b).index("effect_begin") :]
    assert tail == [
        "effect_begin",
        "cancel_requested",
        "effect_resolved",
        "tool_result",
        "cancelled",
        "turn_completed",
    ]
    resolved = of_type(ctx, b, "effect_resolved")[0]["data"]
    assert (resolved["outcome"], resolved["by"]) == ("not_sent", "adapter")
    assert of_type(ctx, b, "tool_result")[0]["data"]["origin"] == "not_executed"
    outcome = projections.run_outcome(events(ctx, b), run_id, thread_id="t", branch_id=b)
    assert outcome is not None and outcome["status"] == "cancelled"
    verify_export(ctx, b)


def test_cancel_after_safe_to_retry_reports_interrupted_not_not_executed(aws: Any) -> None:
    """The call began (the note may be stored): closing it under the barrier must not claim it
    never ran."""
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    say(ctx, b, "note: maybe twice")
    run(ctx, b)
    grant(ctx, b)

    def note_then_crash(args: dict[str, Any], tc: ToolContext) -> ToolOutput:
        run_note(args, tc)
        raise Crash

    ctx.tools["note"] = note_then_crash
    with pytest.raises(Crash):
        run(ctx, b)
    aws.clock.advance(120_000)
    fresh = make_ctx(aws)
    api = Writer(aws.events(), clock=aws.clock)
    cancel = Draft("cancel_requested", {"scope": "thread"}, USER)
    fresh.writer = _ApiAfter(fresh.writer, "effect_resolved", cancel, api)
    assert run(fresh, b, holder="worker-2").state == "idle"
    assert len(of_type(fresh, b, "effect_begin")) == 1 and len(notes(aws)) == 1
    result = of_type(fresh, b, "tool_result")[0]["data"]
    assert result["origin"] == "interrupted" and result["is_error"] is True
    assert types(fresh, b)[-2:] == ["cancelled", "turn_completed"]
    verify_export(fresh, b)


def test_steer_after_the_response_gets_another_request(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx, "scripted")
    api = Writer(aws.events(), clock=aws.clock)

    def steer_now(request: bytes, request_event_id: str) -> None:
        if b"also this" not in request:
            api.append(b, [Draft("steer", {"source": "api", "text": "also this"}, USER)])

    model = ScriptedModel(
        [
            {"content": [{"type": "text", "text": "first"}], "stop_reason": "end_turn"},
            {"content": [{"type": "text", "text": "second"}], "stop_reason": "end_turn"},
        ],
        hook=steer_now,
    )
    ctx.models = scripted(model)
    run_id = say(ctx, b, "hi")
    assert run(ctx, b).state == "idle"
    assert len(model.requests) == 2 and b"also this" in model.requests[1]
    assert types(ctx, b)[-3:] == ["model_request", "model_response", "turn_completed"]
    outcome = projections.run_outcome(events(ctx, b), run_id, thread_id="t", branch_id=b)
    assert outcome is not None and outcome["output"] == "second"
    verify_export(ctx, b)


def test_tool_use_stop_without_calls_ends_the_turn(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx, "scripted")
    odd = {"content": [{"type": "text", "text": "calling…"}], "stop_reason": "tool_use"}
    model = ScriptedModel([odd] * 20)
    ctx.models = scripted(model)
    say(ctx, b, "hi")
    assert run(ctx, b).state == "idle"
    assert len(model.requests) == 1
    assert of_type(ctx, b, "turn_completed")[0]["data"] == {"reason": "error"}
    verify_export(ctx, b)


def test_stop_when_idle_finishes_in_flight_work_then_stops(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx, "scripted")
    api = Writer(aws.events(), clock=aws.clock)

    def stop_now(request: bytes, request_event_id: str) -> None:
        api.append(b, [Draft("stop_when_idle", {}, USER)])

    use = {"type": "tool_use", "call_id": "c1", "name": "time", "input": {}}
    model = ScriptedModel([{"content": [use], "stop_reason": "tool_use"}], hook=stop_now)
    ctx.models = scripted(model)
    say(ctx, b, "what time is it")
    assert run(ctx, b).state == "idle"
    assert len(model.requests) == 1  # nothing new after the barrier ...
    assert types(ctx, b)[-5:] == [  # ... but the in-flight attempt and its call finish
        "model_response",
        "tool_call",
        "permission_decision",
        "tool_result",
        "turn_completed",
    ]
    assert of_type(ctx, b, "tool_result")[0]["data"]["origin"] == "executed"
    assert of_type(ctx, b, "turn_completed")[0]["data"] == {"reason": "interrupted"}
    verify_export(ctx, b)
