"""Every craze kind in the situation this host has for it, driven through the engine on moto (the
Host's routes and the run-step worker) and read back through the run stream's craze window
(`host/sse_formats`, what `GET …/events?format=craze` serves), each event validated against the
closed seed schema: a free-text answer kept, the session's usage over a thread's runs, `user`
(a steer, a sub-agent's task prompt, a replayed prompt), `plan` (a todo list in plan mode),
`thought` (a reasoning summary), `compaction` and `replay` (a fresh connection to a continuing
thread's run). `command` and `queue` have no situation here (no plugin commands or skills
expand a prompt; no input is queued: a busy thread refuses a second run)."""

from __future__ import annotations

from typing import Any

from helpers.engine import make_ctx, of_type, scripted
from helpers.engine import run as advance
from helpers.host import ALICE
from helpers.shared import needs
from helpers.streams import SCENARIOS, Runs, _text, _use, assert_asks_paired, craze_validator
from threads_aws.engine.models import ScriptedModel
from threads_aws.host import sse, sse_formats
from threads_aws.host.live import mapper_kwargs
from threads_aws.streams import CrazeMapper
from threads_aws.streams.craze_replay import replay

pytestmark = needs  # the craze seed schema

NOW = sse.Window(wait_ms=0, poll_ms=50, retry_ms=1500)


def stream(r: Runs, run_id: str | None = None, cursor: str | None = None) -> list[dict[str, Any]]:
    """The run's craze stream as the route serves it, every event checked against the schema."""
    body = sse_formats.subscribe(
        r.host, ALICE, r.thread_id, run_id or r.run_id, fmt="craze", raw_cursor=cursor, window=NOW
    )
    msgs = sse.parse_messages(body)
    assert "retry" not in msgs[-1]  # the run's stream is over
    v = craze_validator()
    data = [m["data"] for m in msgs if "data" in m]
    for d in data:
        assert not [e.message for e in v.iter_errors(d)], d
        assert "undefined" not in repr(d)
    return data


def of(data: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in data if d["type"] == kind]


def test_a_free_text_answer_is_kept_in_answers(aws: Any) -> None:
    ask = {"question": "Tea or coffee?"}
    r = Runs(aws, [_use("ask_user", ask, "call_q1"), _text("Tea it is.")])
    r.start("a drink?")
    assert r.step() == "parked"
    r.answer("tea, please")
    assert r.step() == "idle"
    data = stream(r)
    (q,) = of(data, "question")
    assert q["question"]["questions"] == [{"id": "q1", "prompt": "Tea or coffee?"}]
    (ended,) = of(data, "ask")
    assert ended["ask"] == {
        "id": "call_q1",
        "kind": "question",
        "outcome": "answered",
        "by": "client",
        "answers": {"q1": ["tea, please"]},
    }
    assert_asks_paired(data)


def test_usage_session_is_the_thread_s_on_its_second_run(aws: Any) -> None:
    r = SCENARIOS["two_runs"](aws)
    runs = [e for e in r.events() if e["type"] == "user_input"]
    usages = [e["data"]["usage"] for e in r.events() if e["type"] == "model_response"]
    first = stream(r, runs[0]["event_id"])
    second = stream(r, runs[1]["event_id"])
    last1 = of(first, "meta")[-1]["state"]["usage"]
    assert last1["session"] == last1["turn"]  # the thread's first run: the session is the turn
    assert last1["turn"]["input"] == usages[0]["input_tokens"]
    last2 = [d for d in of(second, "meta") if "usage" in d["state"] and not d.get("replayed")][-1]
    usage = last2["state"]["usage"]
    assert usage["turn"]["input"] == sum(u["input_tokens"] for u in usages[1:])
    assert usage["session"]["input"] == sum(u["input_tokens"] for u in usages)
    assert usage["session"]["output"] == sum(u["output_tokens"] for u in usages)
    fold = r.ctx.writer.load(r.branch_id).fold
    assert (usage["session"]["input"], usage["session"]["output"]) == (fold.usage_in, fold.usage_out)


def test_a_fresh_connection_to_a_continuing_thread_opens_with_the_replay(aws: Any) -> None:
    r = SCENARIOS["two_runs"](aws)
    second = [e for e in r.events() if e["type"] == "user_input"][1]["event_id"]
    data = stream(r, second)
    end = next(i for i, d in enumerate(data) if d["type"] == "replay" and d["replay"]["phase"] == "end")
    bracket, rest = data[: end + 1], data[end + 1 :]
    assert bracket[0] == {"type": "replay", "replay": {"phase": "start"}}
    inside = bracket[1:-1]
    assert [(d["type"], d.get("text")) for d in inside[:2]] == [("user", "first"), ("text", "First answer.")]
    assert all(d.get("replayed") is True for d in inside[:-1])
    install = inside[-1]  # the load's install delta: the session's usage, not marked replayed
    assert install["type"] == "meta" and "replayed" not in install
    assert install["state"]["usage"]["session"] == install["state"]["usage"]["turn"]  # one turn before
    assert not {d["type"] for d in inside} & {"turn", "done", "error", "ask", "permission"}
    assert rest[0]["type"] == "turn" and rest[0]["turn"]["text"] == "second"
    assert "replayed" not in repr(rest)
    # a protocol cursor resume is not a replay: the rest only, no bracket
    ids = [m["id"] for m in sse.parse_messages(_body(r, second, None)) if "id" in m]
    resumed = stream(r, second, ids[0])
    assert resumed == rest[1:]
    assert of(stream(r, [e for e in r.events() if e["type"] == "user_input"][0]["event_id"]), "replay") == []


def _body(r: Runs, run_id: str, cursor: str | None) -> bytes:
    return sse_formats.subscribe(
        r.host, ALICE, r.thread_id, run_id, fmt="craze", raw_cursor=cursor, window=NOW
    )


def test_a_steer_is_a_user_interjection_before_the_turn_ends(aws: Any) -> None:
    r = Runs(aws, [_use("ask_user", {"question": "Which?", "options": ["A", "B"]}, "call_q1"), _text("B.")])
    r.start("pick one")
    assert r.step() == "parked"
    r.host.steer(ALICE, r.thread_id, r.branch_id, {"text": "be quick"})
    r.answer("B")
    assert r.step() == "idle"
    data = stream(r)
    (user,) = of(data, "user")
    assert (user["text"], user["interjection"]) == ("be quick", True)
    assert data.index(user) < data.index(of(data, "done")[0])


def test_a_todo_list_in_plan_mode_is_a_plan_accepted_by_leaving_plan_mode(aws: Any) -> None:
    items = [
        {"id": "t1", "content": "wash", "status": "pending"},
        {"id": "t2", "content": "dry", "status": "pending"},
    ]
    script = [
        _use("todo_write", {"todos": items}, "call_w1", text="# Laundry\nWash, then dry."),
        _use("ask_user", {"question": "Shall I start?", "options": ["yes", "no"]}, "call_q1"),
        _text("Starting."),
    ]
    r = Runs(aws, script)
    r.start("plan the laundry")
    r.set_mode("plan")
    assert r.step() == "parked"
    r.set_mode("default")  # the operator accepts the plan
    r.answer("yes")
    assert r.step() == "idle"
    data = stream(r)
    (plan,) = of(data, "plan")
    todos_seq = next(e["seq"] for e in r.events() if e["type"] == "todos_updated")
    assert plan["plan"] == {
        "id": f"plan-{todos_seq}",
        "name": "Laundry",
        "overview": "# Laundry\nWash, then dry.",
        "plan": "- [ ] wash\n- [ ] dry",
        "todos": items,
    }
    ends = [d["ask"] for d in of(data, "ask") if d["ask"]["kind"] == "plan"]
    assert ends == [
        {"id": plan["plan"]["id"], "kind": "plan", "outcome": "answered", "by": "client", "accepted": True}
    ]
    mode = next(d for d in of(data, "meta") if d["state"].get("mode") == "default")
    assert data.index(of(data, "plan")[0]) < data.index(mode)
    assert_asks_paired(data)


def test_a_plan_still_open_ends_with_its_turn(aws: Any) -> None:
    items = [{"id": "t1", "content": "think", "status": "pending"}]
    r = Runs(aws, [_use("todo_write", {"todos": items}, "call_w1"), _text("That is the plan.")])
    r.start("plan only")
    r.set_mode("plan")
    assert r.step() == "idle"
    data = stream(r)
    (plan,) = of(data, "plan")
    assert plan["plan"]["name"] == "Plan" and "overview" not in plan["plan"]
    (end,) = of(data, "ask")
    assert end["ask"] == {"id": plan["plan"]["id"], "kind": "plan", "outcome": "turn_ended", "by": "turn"}
    assert_asks_paired(data)
    # outside plan mode a todo list is only a todo list
    plain = stream(SCENARIOS["todos"](aws))
    assert of(plain, "todos") and not of(plain, "plan")


def test_a_sub_agent_s_task_prompt_is_its_user_line(aws: Any) -> None:
    r = Runs(aws)
    r.start("spawn: demo: tell me a joke", agent="demo")
    assert r.step() == "parked"  # waiting on the child
    spawned = of_type(r.ctx, r.branch_id, "agent_spawned")[0]["data"]
    child = r.ctx.stores.threads.get_thread("acme", spawned["child_thread_id"])
    assert child is not None
    assert advance(r.ctx, child.main_branch_id).state == "idle"
    while (state := r.step()) != "idle":
        assert state in ("parked", "wait")
    data = stream(r)
    i = next(i for i, d in enumerate(data) if d.get("subagentChange") == "spawned")
    assert data[i + 1] == {
        "type": "user",
        "text": "tell me a joke",
        "agent": spawned["child_thread_id"],
        "at": data[i + 1]["at"],
    }
    assert [d["subagentChange"] for d in of(data, "subagent")] == ["spawned", "finished"]


def test_a_reasoning_summary_is_a_thought(aws: Any) -> None:
    data = stream(SCENARIOS["thinking"](aws))
    assert [d["text"] for d in of(data, "thought")] == ["The user wants a haiku."]
    assert data.index(of(data, "thought")[0]) < data.index(next(d for d in of(data, "text") if d.get("text")))


def test_a_compaction_in_the_worker_is_bracketed(aws: Any) -> None:
    from test_compaction import answers, history, windowed

    model = ScriptedModel([answers()] * 20)
    ctx = make_ctx(aws, scripted(model))
    b = windowed(ctx, 2000, {"tokens": 1}, keep_tail=200)  # any history is over the threshold
    history(ctx, b, 2)
    fold = ctx.writer.load(b).fold
    start = fold.inputs[-1]
    run = [e for e in fold.events if e["seq"] >= start]
    assert any(e["type"] == "compacted" for e in run)
    _, outs = CrazeMapper.resumed(run, None, **mapper_kwargs("craze", fold, start))
    v = craze_validator()
    data = [o.data for o in outs]
    for d in data:
        assert not [e.message for e in v.iter_errors(d)], d
    live = [d for d in data if not d.get("replayed")]
    phases = [d["compaction"] for d in live if d["type"] == "compaction"]
    # the threshold compacts before each request here, until the script runs out: every started
    # is ended (by `compacted`, by `compaction_failed`, or by the turn's end), in pairs
    assert len(phases) >= 2 and len(phases) % 2 == 0
    assert phases[0] == {"phase": "started", "reason": "auto"}
    assert phases[1] == {"phase": "ended", "reason": "auto"}
    assert [p["phase"] for p in phases] == ["started", "ended"] * (len(phases) // 2)
    assert sum("err" in p for p in phases) == sum(e["type"] == "compaction_failed" for e in run)
    # the replay a next run's fresh connection would open with holds only the ended halves
    bracket = replay(run, fold.usage_sums)
    for d in bracket:
        assert not [e.message for e in v.iter_errors(d)], d
    replayed = [d["compaction"] for d in bracket if d["type"] == "compaction"]
    assert len(replayed) == len(phases) // 2 and all(c["phase"] == "ended" for c in replayed)


def test_the_live_stream_serves_the_same_replay_and_session_usage(aws: Any) -> None:
    from threads_aws.host.live import LiveSettings, Subscription, options

    r = SCENARIOS["two_runs"](aws)
    second = [e for e in r.events() if e["type"] == "user_input"][1]["event_id"]
    sub = Subscription(
        r.host, ALICE, r.thread_id, second, options({"format": "craze"}, None), LiveSettings(poll_ms=20)
    )
    sub.open()
    live = [m["data"] for m in sse.parse_messages(b"".join(sub.frames())) if "data" in m]
    assert live == stream(r, second)  # the window fallback's, event for event
    assert live[0]["type"] == "replay"
