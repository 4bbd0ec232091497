"""The log → AG-UI mapper over recorded runs and synthetic events: every output parses with the
`ag-ui-protocol` package's own models (no unknown key, same wire dict back), the stream obeys
the protocol's order rules, parks are interrupts answered by continuation runs, and a resume at
any cursor is a valid stream that repeats no committed output."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.streams import (
    AgUiVerifier,
    check_agui,
    check_agui_event,
    ev,
    received_until,
    recorded,
    recorded_names,
    run_of,
    use,
)
from threads_aws.streams import AgUiMapper, Cursor, parse_cursor
from threads_aws.streams.frames import Out


def mapped(events: list[dict[str, Any]], **kw: Any) -> list[Out]:
    m = AgUiMapper(**kw)
    return [o for e in events for o in m.event(e)]


def types(data: list[dict[str, Any]]) -> list[str]:
    return [d["type"] for d in data]


@pytest.mark.parametrize("name", recorded_names())
def test_recorded_runs_are_valid_ag_ui_streams(name: str) -> None:
    events = recorded(name)
    for k in range(sum(e["type"] == "user_input" for e in events)):
        run = run_of(events, k)
        data = check_agui(mapped(run))
        assert data[0]["type"] == "RUN_STARTED" and data[0]["runId"] == run[0]["event_id"]
        assert data[0]["threadId"] == run[0]["thread_id"]
        assert data[0]["input"]["messages"] == [
            {"id": run[0]["event_id"], "role": "user", "content": run[0]["data"]["text"]}
        ]
        assert data[1]["type"] == "STATE_SNAPSHOT"
        assert data[-1]["type"] in ("RUN_FINISHED", "RUN_ERROR")
        # every tool call started is answered by one result
        started = [d["toolCallId"] for d in data if d["type"] == "TOOL_CALL_START"]
        results = [d["toolCallId"] for d in data if d["type"] == "TOOL_CALL_RESULT"]
        assert sorted(started) == sorted(results)


def test_text_only_finishes_with_the_answer_and_usage() -> None:
    run = run_of(recorded("text_only"))
    data = check_agui(mapped(run))
    rid = run[2]["data"]["request_event_id"]
    assert types(data) == [
        "RUN_STARTED",
        "STATE_SNAPSHOT",
        "STEP_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "STEP_FINISHED",
        "RUN_FINISHED",
    ]
    assert data[3]["messageId"] == rid and data[3]["role"] == "assistant"
    assert data[4]["delta"] == "Hello! Streams are **on**."
    fin = data[-1]
    assert fin["outcome"] == {"type": "success"} and fin["result"] == "Hello! Streams are **on**."
    u = run[2]["data"]["usage"]
    assert fin["usage"] == [
        {
            "inputTokens": u["input_tokens"],
            "outputTokens": u["output_tokens"],
            "totalTokens": u["input_tokens"] + u["output_tokens"],
        }
    ]
    assert all(d["timestamp"] == run[0]["time"] for d in data)


def test_an_approval_is_an_interrupt_answered_by_a_continuation() -> None:
    run = run_of(recorded("approval_granted"))
    data = check_agui(mapped(run))
    runs = [d for d in data if d["type"] == "RUN_STARTED"]
    finishes = [d for d in data if d["type"] == "RUN_FINISHED"]
    interrupt = finishes[0]["outcome"]["interrupts"][0]
    by_type = {e["type"]: e for e in run}
    cid = by_type["approval_requested"]["data"]["challenge_id"]
    assert interrupt["id"] == cid and interrupt["reason"] == "approval"
    assert (
        interrupt["toolCallId"] == by_type["tool_call"]["data"]["call_id"]
        and interrupt["message"] == "Allow note: buy milk?"
    )
    assert interrupt["responseSchema"]["properties"]["remember_rule"] == {"enum": ["note"]}
    assert interrupt["expiresAt"].endswith("Z")
    # the mode and the model changed while parked: each shown in a run that re-interrupts
    assert [f["outcome"]["type"] for f in finishes] == ["interrupt", "interrupt", "interrupt", "success"]
    deltas = [d["delta"][0] for d in data if d["type"] == "STATE_DELTA"]
    assert deltas[0] == {"op": "add", "path": "/mode", "value": "accept_edits"}
    assert deltas[1]["path"] == "/model" and deltas[1]["value"]["name"] == "demo-2"
    last = runs[-1]
    assert last["runId"] == f"{run[0]['event_id']}:{by_type['resumed']['seq']}"  # started by `resumed`
    assert last["input"]["resume"] == [
        {"interruptId": cid, "status": "resolved", "payload": {"decision": "grant", "remember_rule": "note"}}
    ]
    snapshot = data[data.index(last) + 1]["snapshot"]
    assert snapshot["mode"] == "accept_edits" and snapshot["model"]["name"] == "demo-2"
    assert finishes[-1]["result"] == "Done: stored note 1"


def test_question_denial_cancel_and_failures() -> None:
    data = check_agui(mapped(run_of(recorded("question"))))
    interrupt = next(d for d in data if d["type"] == "RUN_FINISHED")["outcome"]["interrupts"][0]
    assert (
        interrupt["id"] == "call_q1"
        and interrupt["reason"] == "input"
        and interrupt["message"] == "Which colour?"
    )
    assert interrupt["responseSchema"]["properties"]["answer"] == {"enum": ["Red", "Blue"]}
    cont = [d for d in data if d["type"] == "RUN_STARTED"][1]
    assert cont["input"]["resume"] == [
        {"interruptId": "call_q1", "status": "resolved", "payload": {"answer": "Blue"}}
    ]

    data = check_agui(mapped(run_of(recorded("approval_denied"))))
    cont = [d for d in data if d["type"] == "RUN_STARTED"][1]
    assert cont["input"]["resume"][0]["payload"] == {"decision": "deny", "reason": "not today"}

    data = check_agui(mapped(run_of(recorded("cancel_parked"))))
    cont = [d for d in data if d["type"] == "RUN_STARTED"][1]
    assert cont["input"]["resume"][0]["status"] == "cancelled"
    assert data[-1]["outcome"] == {"type": "cancelled"}

    data = check_agui(mapped(run_of(recorded("failed_turn"))))
    assert data[-1] == {
        "type": "RUN_ERROR",
        "message": "turn ended: model_unavailable",
        "code": "model_unavailable",
        "timestamp": data[-1]["timestamp"],
    }
    abandoned = [d for d in data if d["type"] == "CUSTOM"]
    assert [a["name"] for a in abandoned] == ["threads.attempt_abandoned"] * 3
    assert check_agui(mapped(run_of(recorded("model_error"))))[-1]["code"] == "model_error"


def test_thinking_and_todos() -> None:
    data = check_agui(mapped(run_of(recorded("thinking"))))
    assert types(data)[3:8] == [
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
    ]
    assert data[5]["delta"] == "The user wants a haiku."
    data = check_agui(mapped(run_of(recorded("todos"))))
    todos = [d["delta"] for d in data if d["type"] == "STATE_DELTA"]
    assert todos[-1] == [
        {
            "op": "add",
            "path": "/todos",
            "value": [
                {"id": "t1", "content": "wash", "status": "completed"},
                {"id": "t2", "content": "dry", "status": "in_progress"},
            ],
        }
    ]


def test_live_deltas_are_one_message_with_the_committed_text() -> None:
    run = run_of(recorded("question"))  # response: "One question first." + ask_user
    m = AgUiMapper()
    outs: list[Out] = []
    for e in run[:2]:
        outs += m.event(e)
    rid = run[2]["data"]["request_event_id"]
    outs += m.feed({"kind": "delta", "request_event_id": rid, "text": "One "})
    outs += m.feed({"kind": "delta", "request_event_id": rid, "text": "hm", "thinking": True})
    outs += m.feed({"kind": "status", "status": "retry_wait", "until": 1_700_000_001_000})
    for e in run[2:]:
        outs += m.event(e)
    data = check_agui(outs)
    text = "".join(d["delta"] for d in data if d["type"] == "TEXT_MESSAGE_CONTENT" and d["messageId"] == rid)
    assert text == "One question first."
    assert sum(d["type"] == "TEXT_MESSAGE_START" and d["messageId"] == rid for d in data) == 1
    live = [o.data for o in outs if o.seq is None]
    assert types(live) == [
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "CUSTOM",
    ]
    # the reasoning the deltas opened is closed when the response commits (no summary to add)
    i = types(data).index("TOOL_CALL_START")
    assert {"REASONING_MESSAGE_END", "REASONING_END", "TEXT_MESSAGE_END"} <= set(types(data)[i:])
    # deltas while no AG-UI run is open (parked) are dropped
    assert m.delta("other", "x") == []


@pytest.mark.parametrize("name", recorded_names())
def test_resume_at_every_cursor_is_a_valid_stream_without_duplicates(name: str) -> None:
    run = run_of(recorded(name))
    full = mapped(run)
    cursors = [parse_cursor(o.id) for o in full if o.id is not None]
    for cursor in [Cursor(0), *cursors]:
        seen = received_until(full, cursor)
        _, rest = AgUiMapper.resumed(run, cursor)
        preamble = [o for o in rest if o.seq is None]
        body = rest[len(preamble) :]
        assert all(o.seq is not None for o in body)
        # the committed outputs after the cursor are exactly the ones the client lacks
        assert [o.data for o in seen + body] == [o.data for o in full], cursor
        # and the new connection is a valid AG-UI stream on its own
        if rest:
            check_agui(rest)
        allowed = ("RUN_STARTED", "STATE_SNAPSHOT", "STEP_STARTED", "TEXT_MESSAGE_START", "TOOL_CALL_START")
        assert all(
            p.data["type"] in allowed + ("REASONING_START", "REASONING_MESSAGE_START") for p in preamble
        )


def test_subagents_steer_compaction_hosted_tools_and_a_late_result() -> None:
    spawn = {"type": "tool_use", "call_id": "c1", "name": "spawn_agent", "input": {}}
    hosted = {
        "type": "hosted_tool",
        "provider": "anthropic",
        "model": "m",
        "format": "f",
        "name": "web_search",
        "ref": {},
    }
    events = [
        ev(1, "user_input", {"source": "api", "text": "go"}),
        ev(2, "steer", {"source": "api", "text": "faster"}),
        ev(3, "model_request", {"attempt": 1, "purpose": "compaction"}),
        ev(
            4,
            "model_response",
            {
                "request_event_id": "e3",
                "content": [{"type": "text", "text": "summary"}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 1, "output_tokens": 1},
                "completeness": "complete",
            },
        ),
        ev(5, "compacted", {"trigger": "threshold", "from_seq": 1, "to_seq": 2}),
        ev(6, "model_request", {"attempt": 1}),
        use(7, "e6", spawn, hosted),
        ev(
            8,
            "agent_spawned",
            {
                "call_id": "c1",
                "child_thread_id": "kid",
                "agent_name": "digger",
                "mode": "foreground",
                "isolation": "none",
            },
        ),
        ev(
            9,
            "agent_finished",
            {
                "child_thread_id": "kid",
                "status": "failed",
                "usage": {"input_tokens": None, "output_tokens": None},
            },
        ),
        ev(
            10,
            "tool_result",
            {
                "call_id": "c1",
                "is_error": False,
                "completeness": "complete",
                "preview": "",
                "origin": "deferred",
            },
        ),
        ev(
            11,
            "tool_result_late",
            {"call_id": "c1", "is_error": True, "completeness": "complete", "preview": "child failed"},
        ),
        ev(
            12,
            "output_validated",
            {"source_event_id": "e7", "schema_sha256": "0" * 64, "outcome": "accepted", "value": {"ok": 1}},
        ),
        ev(13, "compaction_failed", {"stage": "hook", "reason": "hook_denied"}),
        ev(14, "turn_completed", {"reason": "end_turn"}),
    ]
    data = check_agui(mapped(events))
    assert types(data)[2:5] == ["TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"]
    assert data[2]["role"] == "user" and data[3]["delta"] == "faster"
    assert {"type": "STEP_STARTED", "stepName": "compaction", "timestamp": events[2]["time"]} in data
    assert not any(d.get("delta") == "summary" for d in data)  # a compaction's summary is not chat
    customs = {d["name"]: d["value"] for d in data if d["type"] == "CUSTOM"}
    assert customs["threads.compacted"] == {"trigger": "threshold", "from_seq": 1, "to_seq": 2}
    assert customs["threads.hosted_tool"]["name"] == "web_search"
    assert customs["threads.compaction_failed"] == {"stage": "hook", "reason": "hook_denied"}
    started = next(d for d in data if d["type"] == "SUBAGENT_STARTED")
    assert (started["subagentRunId"], started["name"], started["parentToolCallId"]) == ("kid", "digger", "c1")
    err = next(d for d in data if d["type"] == "SUBAGENT_ERROR")
    assert err["code"] == "failed"
    (result,) = [d for d in data if d["type"] == "TOOL_CALL_RESULT"]
    assert result["content"] == "child failed"
    assert data[-1]["result"] == {"ok": 1}


def test_effect_park_budget_and_host_failures() -> None:
    events = [
        ev(1, "user_input", {"source": "api", "text": "x"}),
        ev(2, "model_request", {"attempt": 1}),
        use(3, "e2", {"type": "tool_use", "call_id": "c2", "name": "bash", "input": {"command": "ls"}}),
        ev(4, "effect_begin", {"call_id": "c2", "attempt": 1}),
        ev(5, "effect_unknown", {"call_id": "c2", "reason": "timeout"}),
        ev(6, "parked", {"address": {"kind": "effect", "id": "b:c2"}, "reason": "effect_unknown"}),
        ev(7, "effect_resolved", {"call_id": "c2", "outcome": "assume_not_done", "by": "human"}),
        ev(8, "resumed", {"address": {"kind": "effect", "id": "b:c2"}, "cause_event_id": "e7"}),
        ev(
            9,
            "tool_result",
            {
                "call_id": "c2",
                "is_error": False,
                "completeness": "complete",
                "preview": "ok",
                "origin": "executed",
            },
        ),
        ev(
            10,
            "budget_exceeded",
            {
                "scope": "run",
                "limit": "max_turns",
                "limit_value": 1,
                "observed": 1,
                "observed_is_upper_bound": False,
            },
        ),
        ev(11, "turn_completed", {"reason": "budget_exhausted"}),
    ]
    data = check_agui(mapped(events, suggested_rules=lambda tool, args: [tool]))
    interrupt = next(d for d in data if d["type"] == "RUN_FINISHED")["outcome"]["interrupts"][0]
    assert interrupt["reason"] == "effect_unknown" and interrupt["toolCallId"] == "c2"
    cont = [d for d in data if d["type"] == "RUN_STARTED"][1]
    assert cont["input"]["resume"] == [
        {"interruptId": "b:c2", "status": "resolved", "payload": {"resolution": "assume_not_done"}}
    ]
    assert data[-1]["type"] == "RUN_ERROR" and data[-1]["code"] == "budget_exhausted"
    assert data[-1]["message"] == "budget exceeded: max_turns 1/1"

    m = AgUiMapper()
    outs = m.event(events[0]) + m.event(events[1])
    outcome = {
        "status": "failed",
        "thread_id": "t",
        "branch_id": "b",
        "error": {"code": "artifact_missing", "message": "gone"},
    }
    outs += m.feed({"kind": "result", "run_id": "e1", "result": outcome})
    data = check_agui(outs)
    assert types(data)[-2:] == ["STEP_FINISHED", "RUN_ERROR"] and data[-1]["code"] == "artifact_missing"
    assert m.feed({"kind": "result", "run_id": "e1", "result": outcome}) == []


def test_the_verifier_rejects_bad_orders() -> None:
    # the test's own order checker must be able to fail
    bad = [
        [{"type": "TEXT_MESSAGE_START", "messageId": "m"}],
        [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        ],
        [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
            {"type": "TEXT_MESSAGE_START", "messageId": "m"},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
        ],
        [{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}, {"type": "STEP_FINISHED", "stepName": "s"}],
    ]
    for events in bad:
        v = AgUiVerifier()
        with pytest.raises(AssertionError):
            for e in events:
                v.feed(e)
    with pytest.raises(AssertionError, match="unknown keys"):
        check_agui_event({"type": "RUN_STARTED", "threadId": "t", "runId": "r", "bogus": 1})


def test_an_answered_question_is_not_the_continuations_interrupt() -> None:
    """Issue 18: the run resumed by an `ask:` answer ended RUN_FINISHED{interrupt} for the very
    question its input.resume answered (the answer's result came before its `resumed`)."""
    data = check_agui(mapped(run_of(recorded("question"))))
    starts = [i for i, d in enumerate(data) if d["type"] == "RUN_STARTED"]
    cont = data[starts[1] :]
    assert cont[0]["input"]["resume"][0]["interruptId"] == "call_q1"
    ends = [d for d in cont if d["type"] in ("RUN_FINISHED", "RUN_ERROR")]
    assert len(ends) == 1 and ends[0].get("outcome", {}).get("type") != "interrupt"
    assert sum(d["type"] == "RUN_STARTED" for d in cont) == 1


def test_run_started_has_the_protocol_version_and_deltas_their_own_time() -> None:
    from ag_ui.core import PROTOCOL_VERSION

    run = run_of(recorded("question"))
    m = AgUiMapper()
    outs: list[Out] = []
    for e in run[:2]:
        outs += m.event(e)
    rid = run[2]["data"]["request_event_id"]
    t0 = run[1]["time"]
    outs += m.feed({"kind": "delta", "request_event_id": rid, "text": "One ", "time": t0 + 40})
    outs += m.feed({"kind": "delta", "request_event_id": rid, "text": "question ", "time": t0 + 75})
    for e in run[2:]:
        outs += m.event(e)
    data = check_agui(outs)
    assert all(d["protocolVersion"] == PROTOCOL_VERSION for d in data if d["type"] == "RUN_STARTED")
    live = [o.data for o in outs if o.seq is None and o.data["type"] == "TEXT_MESSAGE_CONTENT"]
    assert [d["timestamp"] for d in live] == [t0 + 40, t0 + 75]
