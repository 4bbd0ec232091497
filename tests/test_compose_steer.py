"""Steer and stop when idle (ours, add-only routes): the host appends `steer` / `stop_when_idle`
under the same principal rule and typed errors as cancel, and the worker honours both: a steer
renders as a user line in the next request, a stop lets in-flight work finish and ends the turn
`interrupted` without a new model request."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers.engine import run, scripted, verify_export
from helpers.host import ALICE, MALLORY
from threads_aws.core.errors import LogError
from threads_aws.engine.models import ScriptedModel
from threads_aws.host.errors import ApiError


def code_of(fn: Any, *a: Any) -> str:
    with pytest.raises((ApiError, LogError)) as exc:
        fn(*a)
    return str(exc.value.code)


def _setup(aws: Any, model: ScriptedModel) -> tuple[Any, Any]:
    svc = aws.services()
    return svc.host(), svc.engine(models=scripted(model))


def _user_lines(request: bytes) -> list[str]:
    out = []
    for line in request.splitlines()[1:]:
        v = json.loads(line)
        if v.get("role") == "user":
            out.append("".join(p.get("text", "") for p in v["content"]))
    return out


def test_steer_lands_in_the_next_request(aws):
    host_box: dict[str, Any] = {}

    def steer_while_answering(request: bytes, rid: str) -> None:
        if len(model.requests) == 1:  # the first attempt is "in flight": a steer lands
            h, run_ = host_box["host"], host_box["run"]
            host_box["steer"] = h.steer(ALICE, run_["thread_id"], None, {"text": "and in French"})

    model = ScriptedModel(
        [
            {"content": [{"type": "text", "text": "Hello."}], "stop_reason": "end_turn"},
            {"content": [{"type": "text", "text": "Bonjour."}], "stop_reason": "end_turn"},
        ],
        hook=steer_while_answering,
    )
    host, ctx = _setup(aws, model)
    started = host.start_run(ALICE, {"agent": "scripted", "input": "say hello"}, "k-steer")
    host_box.update(host=host, run=started)
    assert run(ctx, started["branch_id"]).state == "idle"
    assert len(model.requests) == 2
    assert _user_lines(model.requests[0]) == ["say hello"]
    assert _user_lines(model.requests[1]) == ["say hello", "and in French"]
    f = ctx.writer.load(started["branch_id"]).fold
    steer = f.events[f.seq_of[host_box["steer"]["event_id"]] - 1]
    assert steer["type"] == "steer" and steer["data"] == {"source": "api", "text": "and in French"}
    assert steer["actor"] == {"kind": "user", "principal": ALICE.as_dict()}
    assert f.events[-1]["data"] == {"reason": "end_turn"}
    verify_export(ctx, started["branch_id"])


def test_steer_with_content_parts_and_its_errors(aws):
    host, ctx = _setup(aws, ScriptedModel())
    started = host.start_run(ALICE, {"agent": "scripted", "input": "x"}, "k-parts")
    tid = started["thread_id"]
    parts = [{"type": "text", "text": "look"}]
    out = host.steer(ALICE, tid, None, {"content": parts})
    ev = ctx.writer.load(started["branch_id"]).fold.events[-1]
    assert ev["event_id"] == out["event_id"] and ev["data"] == {"source": "api", "content": parts}
    assert code_of(host.steer, MALLORY, tid, None, {"text": "x"}) == "not_found"  # another tenant
    assert run(ctx, started["branch_id"]).state == "idle"
    # no open turn: a steer never opens one (rule 12); a stop has nothing to stop
    assert code_of(host.steer, ALICE, tid, None, {"text": "late"}) == "invalid_transition"
    assert code_of(host.stop, ALICE, tid, None, {}) == "invalid_transition"


def test_stop_finishes_in_flight_work_then_ends_interrupted(aws):
    box: dict[str, Any] = {}

    def stop_while_answering(request: bytes, rid: str) -> None:
        if len(model.requests) == 1:
            box["stop"] = box["host"].stop(ALICE, box["run"]["thread_id"], None, {"reason": "enough"})

    use = {"type": "tool_use", "call_id": "call_t1", "name": "time", "input": {}}
    model = ScriptedModel([{"content": [use], "stop_reason": "tool_use"}], hook=stop_while_answering)
    host, ctx = _setup(aws, model)
    started = host.start_run(ALICE, {"agent": "scripted", "input": "what time"}, "k-stop")
    box.update(host=host, run=started)
    assert run(ctx, started["branch_id"]).state == "idle"
    f = ctx.writer.load(started["branch_id"]).fold
    types = [e["type"] for e in f.events]
    # the answer in flight is recorded, its call runs and records its result, then nothing new
    assert types[types.index("stop_when_idle") :] == [
        "stop_when_idle",
        "model_response",
        "tool_call",
        "permission_decision",
        "tool_result",
        "turn_completed",
    ]
    assert f.events[-1]["data"] == {"reason": "interrupted"} and len(model.requests) == 1
    stop = f.events[types.index("stop_when_idle")]
    assert stop["data"] == {"reason": "enough"} and stop["actor"]["principal"] == ALICE.as_dict()
    verify_export(ctx, started["branch_id"])


def test_routes_over_http(aws, monkeypatch):
    """The handlers' path (the container's Services from the environment): the optional stop
    body, malformed steer bodies, the typed 409."""
    from threads_aws.host import runtime
    from threads_aws.host.runtime import api

    for k, v in aws.resources.env().items():
        monkeypatch.setenv(k, v)
    runtime.reset()
    host = runtime.host()
    started = host.start_run(ALICE, {"agent": "scripted", "input": "x"}, "k-http")
    tid = started["thread_id"]

    def call(op: str, body: str | None) -> tuple[int, dict[str, Any]]:
        ev = {
            "httpMethod": "POST",
            "path": f"/v1/threads/{tid}/{op}",
            "pathParameters": {"thread_id": tid},
            "queryStringParameters": None,
            "headers": {"Content-Type": "application/json"},
            "body": body,
            "requestContext": {"authorizer": {"issuer": "api", "tenant": "acme", "subject": "alice"}},
        }
        out = api(ev, op)
        return out["statusCode"], json.loads(out["body"])

    assert call("steer", '{"text": ""}')[0] == 400
    assert call("steer", '{"text": "a", "content": [{"type": "text", "text": "b"}]}')[0] == 400
    assert call("steer", '{"text": "more"}')[0] == 200
    status, body = call("stop", None)
    assert status == 200 and set(body) == {"event_id"}
    assert call("stop", '{"reason": 1}')[0] == 400
    host.cancel(ALICE, tid, None)
    runtime.reset()
