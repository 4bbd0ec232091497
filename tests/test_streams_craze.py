"""The log → craze mapper over recorded runs (tests/data/streams, made by our own engine) and
synthetic events: every output validates against the closed seed schema, the order rules hold,
deltas and the committed response never double or drop text, and a resume at any cursor has no
gap and no duplicate."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.streams import (
    assert_asks_paired,
    assert_tool_rows,
    check_craze,
    ev,
    received_until,
    recorded,
    recorded_names,
    run_of,
    use,
)
from threads_aws.streams import CrazeMapper, Cursor, parse_cursor
from threads_aws.streams.frames import Out, rfc3339


def mapped(events: list[dict[str, Any]], **kw: Any) -> list[Out]:
    m = CrazeMapper(**kw)
    return [o for ev in events for o in m.event(ev)]


def types(outs: list[Out]) -> list[str]:
    return [o.data["type"] for o in outs]


@pytest.mark.parametrize("name", recorded_names())
def test_recorded_runs_validate_and_follow_the_order_rules(name: str) -> None:
    events = recorded(name)
    for k in range(sum(e["type"] == "user_input" for e in events)):
        run = run_of(events, k)
        outs = mapped(run)
        data = check_craze(outs)
        prompt = run[0]["data"]["text"]
        assert data[0]["type"] == "turn" and data[0]["turn"] == {
            "id": f"turn-{run[0]['seq']}",
            "phase": "started",
            "text": prompt,
            "origin": "submit",
        }
        # ends with done|error, then turn{ended}; exactly one ending
        assert data[-1]["type"] == "turn" and data[-1]["turn"]["phase"] == "ended"
        assert data[-2]["type"] in ("done", "error")
        assert sum(d["type"] in ("done", "error") for d in data) == 1
        assert_asks_paired(data)
        assert_tool_rows(data)
        # every committed output carries the seq of its event; the last of a group its plain id
        for o in outs:
            assert o.seq is not None
            assert o.id is None or o.id == str(o.seq) or o.id.startswith(f"{o.seq}.")
        assert outs[-1].id == str(run[-1]["seq"])


def test_approval_granted_with_mode_and_model_changes() -> None:
    data = check_craze(mapped(run_of(recorded("approval_granted"))))
    perm = next(d["permission"] for d in data if d["type"] == "permission")
    assert perm["tool"] == "note: buy milk"
    assert [o["optionId"] for o in perm["options"]] == ["grant", "remember:note", "deny"]
    assert [o["kind"] for o in perm["options"]] == ["allow_once", "allow_always", "reject_once"]
    metas = [d for d in data if d["type"] == "meta" and "usage" not in d["state"]]
    assert metas[0] == {"type": "meta", "state": {"mode": "accept_edits"}, "at": metas[0]["at"]}
    assert metas[1]["state"]["model"] == "demo/demo-2"
    assert metas[1]["state"]["config"] == {
        "options": [{"id": "max_tokens", "name": "max_tokens", "current": "1024"}]
    }
    (ask,) = [d["ask"] for d in data if d["type"] == "ask"]
    assert ask == {
        "id": perm["id"],
        "kind": "permission",
        "outcome": "answered",
        "by": "client",
        "optionId": "remember:note",
        "label": "Always allow note",
    }
    statuses = [d["tool"]["status"] for d in data if d["type"] == "tool"]
    assert statuses == ["pending", "in_progress", "completed"]


def test_denials_fail_the_row() -> None:
    data = check_craze(mapped(run_of(recorded("approval_denied"))))
    (ask,) = [d["ask"] for d in data if d["type"] == "ask"]
    assert (ask["optionId"], ask["label"]) == ("deny", "Deny")
    last = [d["tool"] for d in data if d["type"] == "tool"][-1]
    assert last["status"] == "failed" and last["output"]["content"] == "The approver denied this call."
    data = check_craze(mapped(run_of(recorded("policy_denied"))))
    rows = [d["tool"] for d in data if d["type"] == "tool"]
    assert rows[-1]["status"] == "failed" and rows[-1]["contentText"] == "denied by mode"
    assert not any(d["type"] in ("permission", "ask") for d in data)


def test_question_answered_names_the_option() -> None:
    data = check_craze(mapped(run_of(recorded("question"))))
    q = next(d["question"] for d in data if d["type"] == "question")
    assert q["id"] == "call_q1" and q["title"] == "Which colour?"
    assert q["questions"] == [
        {
            "id": "q1",
            "prompt": "Which colour?",
            "options": [{"id": "o1", "label": "Red"}, {"id": "o2", "label": "Blue"}],
        }
    ]
    i = types_of(data).index("ask")
    assert data[i]["ask"] == {
        "id": "call_q1",
        "kind": "question",
        "outcome": "answered",
        "by": "client",
        "answers": {"q1": ["o2"]},
    }
    assert data[i + 1]["tool"]["status"] == "completed"
    assert data[i + 1]["tool"]["output"] == {"content": "Blue"}


def types_of(data: list[dict[str, Any]]) -> list[str]:
    return [d["type"] for d in data]


def test_cancel_while_parked_cancels_the_ask_and_the_row() -> None:
    data = check_craze(mapped(run_of(recorded("cancel_parked"))))
    (ask,) = [d["ask"] for d in data if d["type"] == "ask"]
    assert (ask["outcome"], ask["by"]) == ("cancelled", "cancel")
    assert [d["tool"]["status"] for d in data if d["type"] == "tool"][-1] == "cancelled"
    assert data[-2] == {"type": "done", "stopReason": "cancelled", "at": data[-2]["at"]}
    data = check_craze(mapped(run_of(recorded("cancel_in_flight"))))
    assert [d["tool"]["status"] for d in data if d["type"] == "tool"] == ["pending", "cancelled"]


def test_failed_turns_end_with_error() -> None:
    data = check_craze(mapped(run_of(recorded("failed_turn"))))
    assert data[-2]["err"] == {"message": "turn ended: model_unavailable", "class": "provider", "code": 529}
    assert data[-1]["turn"] == {
        "id": data[0]["turn"]["id"],
        "phase": "ended",
        "errClass": "provider",
        "err": "turn ended: model_unavailable",
    }
    data = check_craze(mapped(run_of(recorded("model_error"))))
    assert data[-2]["err"]["class"] == "provider"


def test_todos_thinking_and_the_second_run() -> None:
    data = check_craze(mapped(run_of(recorded("todos"))))
    todos = [d["todos"] for d in data if d["type"] == "todos"]
    assert todos[-1] == [
        {"id": "t1", "content": "wash", "status": "completed"},
        {"id": "t2", "content": "dry", "status": "in_progress"},
    ]
    data = check_craze(mapped(run_of(recorded("thinking"))))
    assert [(d["type"], d.get("text")) for d in data[1:3]] == [
        ("thought", "The user wants a haiku."),
        ("text", "Old pond / a frog."),
    ]
    events = recorded("two_runs")
    second = check_craze(mapped(run_of(events, 1)))
    assert second[0]["turn"]["id"] == f"turn-{run_of(events, 1)[0]['seq']}"


# ------------------------------------------------------------------ deltas and the committed text
def test_deltas_stream_then_the_response_sends_only_the_rest() -> None:
    run = run_of(recorded("tool_allowed"))  # response 1: text "Let me check the clock." + a call
    m = CrazeMapper()
    outs: list[Out] = []
    rid = run[2]["data"]["request_event_id"]
    for e in run[:2]:
        outs += m.event(e)
    for chunk in ("Let me ", "check"):
        outs += m.feed({"kind": "delta", "request_event_id": rid, "text": chunk})
    outs += m.feed({"kind": "delta", "request_event_id": rid, "text": "it", "thinking": True})
    for e in run[2:]:
        outs += m.event(e)
    data = check_craze(outs)
    live = [o for o in outs if o.seq is None]
    assert [o.data for o in live] == [
        {"type": "text", "text": "Let me "},
        {"type": "text", "text": "check"},
        {"type": "thought", "text": "it"},
    ]
    texts = "".join(d.get("text", "") for d in data if d["type"] == "text")
    assert texts.startswith("Let me check the clock.")  # exactly once
    commit = next(o for o in outs if o.seq == run[2]["seq"] and o.data["type"] == "text")
    assert commit.data["text"] == " the clock." and commit.stable and commit.id == f"{run[2]['seq']}.0"
    # a late delta of the answered request, and one for a request never seen, send nothing
    assert m.feed({"kind": "delta", "request_event_id": rid, "text": "x"}) == []


def test_fully_streamed_text_still_commits_a_marker() -> None:
    run = run_of(recorded("text_only"))
    m = CrazeMapper()
    for e in run[:2]:
        m.event(e)
    rid = run[2]["data"]["request_event_id"]
    text = run[2]["data"]["content"][0]["text"]
    assert [o.data for o in m.delta(rid, text)] == [{"type": "text", "text": text}]
    group = m.event(run[2])
    assert group[0].data == {"type": "text", "at": rfc3339(run[2]["time"])}  # empty: the marker
    assert group[0].stable


def test_offsets_trim_repeats_and_stop_at_a_gap() -> None:
    run = run_of(recorded("text_only"))
    m = CrazeMapper()
    for e in run[:2]:
        m.event(e)
    rid = run[2]["data"]["request_event_id"]
    got = [m.delta(rid, "Hello", offset=0), m.delta(rid, "lo! St", offset=3), m.delta(rid, "on", offset=20)]
    got.append(m.delta(rid, "x", offset=11))  # after a gap nothing more streams
    assert [[o.data.get("text") for o in g] for g in got] == [["Hello"], ["! St"], [], []]
    assert m.event(run[2])[0].data["text"] == "reams are **on**."


def test_deltas_before_their_request_are_held_and_lost_ones_resend_the_whole_text() -> None:
    run = run_of(recorded("text_only"))
    m = CrazeMapper()
    m.event(run[0])
    rid = run[2]["data"]["request_event_id"]
    assert m.delta(rid, "Hel") == []  # raced ahead of model_request
    assert [o.data.get("text") for o in m.event(run[1])] == ["Hel"]
    m.delta(rid, "XX")  # not what the model said: a lost or foreign chunk
    assert m.event(run[2])[0].data["text"] == "Hello! Streams are **on**."


def test_deltas_of_an_abandoned_attempt_never_come_back() -> None:
    run = run_of(recorded("failed_turn"))
    m = CrazeMapper()
    for e in run[:2]:
        m.event(e)
    rid = run[1]["event_id"]
    assert m.delta(rid, "par")
    m.event(run[2])  # abandoned
    assert m.delta(rid, "tial") == []


# ------------------------------------------------------------------ resume
@pytest.mark.parametrize("name", recorded_names())
def test_resume_at_every_cursor_has_no_gap_and_no_duplicate(name: str) -> None:
    run = run_of(recorded(name))
    full = mapped(run)
    cursors = [parse_cursor(o.id) for o in full if o.id is not None]
    for cursor in [None, Cursor(0), *cursors]:
        seen = [] if cursor is None else received_until(full, cursor)
        _, rest = CrazeMapper.resumed(run, cursor)
        assert [o.data for o in seen + rest] == [o.data for o in full], cursor
        assert [o.id for o in seen + rest] == [o.id for o in full]


def test_resume_is_idempotent_on_overlapping_feeds() -> None:
    run = run_of(recorded("question"))
    m, rest = CrazeMapper.resumed(run[:5], "4.0")
    assert [o.id for o in rest][0] == "4.1"
    assert all(m.event(ev) == [] for ev in run[:5])  # a re-read of fed events emits nothing
    assert m.event(run[5])


def test_cursor_parsing() -> None:
    assert parse_cursor("17") == Cursor(17)
    assert parse_cursor(" 17.2 ") == Cursor(17, 2)
    assert str(Cursor(17, 2)) == "17.2"
    for bad in ("", "x", "1.2.3", "-1", "²", "9" * 17, "1." + "9" * 10):
        assert parse_cursor(bad) is None
    assert rfc3339(1_700_000_000_120) == "2023-11-14T22:13:20.12Z"
    assert rfc3339(1_700_000_000_000) == "2023-11-14T22:13:20Z"
    assert rfc3339(0) is None


# ------------------------------------------------------------------ synthetic events


def test_subagents_compaction_effects_budget_steer_and_hosted_tools() -> None:
    spawn = {"type": "tool_use", "call_id": "c1", "name": "spawn_agent", "input": {"prompt": "dig"}}
    hosted = {
        "type": "hosted_tool",
        "provider": "anthropic",
        "model": "m",
        "format": "f",
        "name": "web_search",
        "ref": {},
    }
    events = [
        ev(1, "user_input", {"source": "api", "content": [{"type": "text", "text": "go"}]}),
        ev(2, "model_request", {"attempt": 1, "purpose": "compaction"}),
        ev(3, "compacted", {"trigger": "reactive", "from_seq": 1, "to_seq": 1}),
        ev(4, "model_request", {"attempt": 1}),
        use(5, "e4", spawn, hosted),
        ev(
            6,
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
            7,
            "agent_finished",
            {
                "child_thread_id": "kid",
                "status": "budget_exhausted",
                "usage": {"input_tokens": 5, "output_tokens": 7},
            },
        ),
        ev(
            8,
            "tool_result",
            {
                "call_id": "c1",
                "is_error": False,
                "completeness": "complete",
                "preview": "found",
                "origin": "executed",
            },
        ),
        ev(9, "steer", {"source": "api", "text": "faster"}, actor={"kind": "user"}),
        ev(10, "model_request", {"attempt": 1}),
        use(
            11,
            "e10",
            {"type": "tool_use", "call_id": "c2", "name": "bash", "input": {"command": "rm -rf /tmp/x"}},
        ),
        ev(12, "permission_decision", {"call_id": "c2", "decision": "allow", "source": "policy"}),
        ev(13, "effect_begin", {"call_id": "c2", "attempt": 1}),
        ev(14, "effect_unknown", {"call_id": "c2", "reason": "timeout"}),
        ev(15, "parked", {"address": {"kind": "effect", "id": "b:c2"}, "reason": "effect_unknown"}),
        ev(16, "mode_changed", {"from": "plan", "to": "default"}, actor={"kind": "tool"}),
        ev(17, "effect_resolved", {"call_id": "c2", "outcome": "assume_done", "by": "human"}),
        ev(18, "resumed", {"address": {"kind": "effect", "id": "b:c2"}, "cause_event_id": "e17"}),
        ev(
            19,
            "tool_result",
            {
                "call_id": "c2",
                "is_error": False,
                "completeness": "partial",
                "preview": "x" * 9000,
                "origin": "materialized_from_commit",
            },
        ),
        ev(20, "compaction_failed", {"stage": "summary", "reason": "model_error"}),
        ev(
            21,
            "budget_exceeded",
            {
                "scope": "run",
                "limit": "max_turns",
                "limit_value": 1,
                "observed": 1,
                "observed_is_upper_bound": False,
            },
        ),
        ev(22, "turn_completed", {"reason": "budget_exhausted"}),
    ]
    outs = mapped(events, suggested_rules=lambda tool, args: [tool])
    data = check_craze(outs)
    assert data[0]["turn"]["text"] == "go"
    assert data[1]["compaction"] == {"phase": "started", "reason": "auto"}
    assert data[2]["compaction"] == {"phase": "ended", "reason": "overflow"}
    spawn_row = next(d["tool"] for d in data if d["type"] == "tool" and d["tool"]["id"] == "c1")
    assert spawn_row["kind"] == "task" and "task" in spawn_row
    hosted_row = next(d["tool"] for d in data if d["type"] == "tool" and d["tool"]["id"] == "e4#1")
    assert (hosted_row["kind"], hosted_row["status"]) == ("search", "completed")
    subs = [d for d in data if d["type"] == "subagent"]
    assert [s["subagentChange"] for s in subs] == ["spawned", "finished"]
    assert subs[0]["subagent"]["toolCallId"] == "c1" and subs[0]["subagent"]["status"] == "running"
    assert subs[1]["subagent"]["status"] == "failed" and subs[1]["subagent"]["tokensUsed"] == 12
    assert subs[1]["subagent"]["durationMs"] == 1
    task = [d["tool"] for d in data if d["type"] == "tool" and d["tool"]["id"] == "c1"][-2]["task"]
    assert task == {
        "agentId": "kid",
        "subagentType": "digger",
        "status": "failed",
        "durationMs": 1,
        "receipt": True,
    }
    assert {"type": "user", "text": "faster", "interjection": True, "at": rfc3339(events[8]["time"])} in data
    perm = next(d["permission"] for d in data if d["type"] == "permission")
    assert perm["id"] == "b:c2" and [o["optionId"] for o in perm["options"]] == [
        "assume_done",
        "assume_not_done",
    ]
    ask = next(d["ask"] for d in data if d["type"] == "ask")
    assert ask == {
        "id": "b:c2",
        "kind": "permission",
        "outcome": "answered",
        "by": "client",
        "optionId": "assume_done",
        "label": "It took effect",
    }
    mode = next(d for d in data if d["type"] == "meta" and "mode" in d["state"])
    assert mode["mode"] == "default"  # agent-initiated: top-level mode too
    c2 = [d["tool"] for d in data if d["type"] == "tool" and d["tool"]["id"] == "c2"][-1]
    assert c2["status"] == "completed" and c2["output"]["truncated"] is True
    assert len(c2["output"]["content"].encode()) == 8192
    assert data[-3]["compaction"] == {"phase": "ended", "err": "summary: model_error"}
    assert data[-2]["err"] == {"message": "budget exceeded: max_turns 1/1", "class": "other", "code": 0}
    usage = next(d["state"]["usage"] for d in data if d["type"] == "meta" and "usage" in d["state"])
    assert usage["turn"]["unpriced"] is True and usage["turn"]["output"] == 3


def test_open_rows_and_asks_end_with_the_turn() -> None:
    events = [
        ev(1, "user_input", {"source": "api", "text": "x"}),
        ev(2, "model_request", {"attempt": 1}),
        use(3, "e2", {"type": "tool_use", "call_id": "q", "name": "ask_user", "input": {"question": "why?"}}),
        ev(4, "parked", {"address": {"kind": "input", "id": "q"}, "reason": "awaiting_input"}),
        ev(5, "turn_completed", {"reason": "interrupted"}),
    ]
    data = check_craze(mapped(events))
    assert types_of(data)[-5:] == ["question", "ask", "tool", "done", "turn"]
    assert data[-4]["ask"] == {"id": "q", "kind": "question", "outcome": "turn_ended", "by": "turn"}
    assert data[-3]["tool"]["status"] == "cancelled"


def test_result_and_status_messages_are_transient() -> None:
    events = [ev(1, "user_input", {"source": "api", "text": "x"}), ev(2, "model_request", {"attempt": 1})]
    m = CrazeMapper()
    for e in events:
        m.event(e)
    (wait,) = m.feed({"kind": "status", "status": "retry_wait", "until": 1_700_000_005_000})
    assert wait.id is None and wait.data == {
        "type": "meta",
        "state": {"reason": "retry_wait", "detail": "retrying at 2023-11-14T22:13:25Z"},
    }
    outcome = {
        "status": "failed",
        "thread_id": "t",
        "branch_id": "b",
        "error": {"code": "branch_not_runnable", "message": "no"},
    }
    outs = m.feed({"kind": "result", "run_id": "e1", "result": outcome})
    data = check_craze(outs)
    assert [d["type"] for d in data] == ["error", "turn"] and all(o.id is None for o in outs)
    assert m.feed({"kind": "result", "run_id": "e1", "result": outcome}) == []  # ended once
    assert m.feed({"kind": "nonsense"}) == []


def test_a_compaction_open_when_its_turn_ends_is_ended_first() -> None:
    events = [
        ev(1, "user_input", {"source": "api", "text": "x"}),
        ev(2, "model_request", {"attempt": 1, "purpose": "compaction"}),
        ev(3, "model_attempt_abandoned", {"request_event_id": "e2", "reason": "error"}),
        ev(4, "model_request", {"attempt": 2, "purpose": "compaction"}),  # its retry: no second start
        ev(5, "turn_completed", {"reason": "cancelled"}),
    ]
    data = check_craze(mapped(events))
    assert types_of(data) == ["turn", "compaction", "compaction", "done", "turn"]
    assert data[2]["compaction"] == {"phase": "ended", "err": "the turn ended first"}
