"""Clearing old tool results (`context_edited{reason: threshold}`, `policy.context.clear_results`,
`engine.context_edits`): on the demo model with the bundled `demo-tidy` agent (every result but
the latest cleared before each request). The request after the edit renders the cleared result
as the fixed placeholder and the kept one as recorded; each result is cleared once; excluded
tools and a trigger not reached clear nothing. Every log exports, re-imports and re-renders
(`render.verify_requests`)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from helpers.engine import make_ctx, of_type, run, say, types, verify_export
from helpers.host import ALICE as ALICE_P
from threads_aws.agents import load_agents
from threads_aws.core.canonical import new_uuid7
from threads_aws.core.errors import LogError
from threads_aws.core.lines import StoredLine, header_line
from threads_aws.core.render.texts import CLEARED_RESULT_TEXT
from threads_aws.engine.step import EngineContext
from threads_aws.store import NewBranch
from threads_aws.writer import Draft


def tidy_thread(ctx: EngineContext, **clear: Any) -> str:
    thread_id, branch_id = new_uuid7(), new_uuid7()
    header = StoredLine.of_header(header_line(thread_id, branch_id, ctx.clock()))
    ctx.store.create_branch(
        NewBranch(thread_id=thread_id, tenant="acme", branch_id=branch_id, header=header, create_thread=True)
    )
    started = copy.deepcopy(load_agents()["demo-tidy"].thread_started())  # never the loaded agent's
    started["policy"]["context"]["clear_results"].update(clear)
    ctx.writer.append(branch_id, [Draft("thread_started", started, {"kind": "host"})])
    return branch_id


def turn(ctx: EngineContext, b: str, text: str) -> None:
    say(ctx, b, text)
    assert run(ctx, b).state == "idle"


def tool_lines(ctx: EngineContext, request: dict[str, Any]) -> dict[str, Any]:
    body = ctx.artifacts.get_ref(request["data"]["request_ref"])
    lines = [json.loads(raw) for raw in body.split(b"\n") if raw.strip()]
    return {ln["call_id"]: ln["content"] for ln in lines if ln.get("role") == "tool"}


def test_old_results_are_cleared_before_the_request_and_render_as_the_placeholder(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = tidy_thread(ctx)
    turn(ctx, b, "time")
    assert not of_type(ctx, b, "context_edited")  # one result: it is the latest, kept
    turn(ctx, b, "time")
    (edit,) = of_type(ctx, b, "context_edited")
    first, second = (c["data"]["call_id"] for c in of_type(ctx, b, "tool_call"))
    assert edit["data"] == {"edits": [{"action": "clear", "call_id": first}], "reason": "threshold"}
    assert edit["actor"]["kind"] == "host"
    kinds = types(ctx, b)
    at = kinds.index("context_edited")
    assert kinds[at - 1] == "tool_result" and kinds[at + 1] == "model_request"
    last = of_type(ctx, b, "model_request")[-1]
    shown = tool_lines(ctx, last)
    assert shown[first] == [{"text": CLEARED_RESULT_TEXT, "type": "text"}]
    kept = next(e for e in of_type(ctx, b, "tool_result") if e["data"]["call_id"] == second)
    assert shown[second] == [{"text": kept["data"]["preview"], "type": "text"}]
    turn(ctx, b, "time")  # the third turn clears the second result only: each is cleared once
    edits = [e["data"]["edits"] for e in of_type(ctx, b, "context_edited")]
    assert edits == [[{"action": "clear", "call_id": first}], [{"action": "clear", "call_id": second}]]
    assert ctx.writer.load(b).fold.cleared == {first, second}
    verify_export(ctx, b)


def test_excluded_tools_and_an_unreached_trigger_clear_nothing(aws: Any) -> None:
    ctx = make_ctx(aws)
    excluded = tidy_thread(ctx, exclude_tools=["time"])
    high = tidy_thread(ctx, trigger={"tokens": 1_000_000})
    for b in (excluded, high):
        turn(ctx, b, "time")
        turn(ctx, b, "time")
        assert not of_type(ctx, b, "context_edited")
        assert types(ctx, b)[-1] == "turn_completed"
        verify_export(ctx, b)


def test_keep_recent_zero_clears_every_result_and_the_turn_still_answers(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = tidy_thread(ctx, keep_recent=0)
    turn(ctx, b, "time")
    (call,) = of_type(ctx, b, "tool_call")
    (edit,) = of_type(ctx, b, "context_edited")
    assert edit["data"]["edits"] == [{"action": "clear", "call_id": call["data"]["call_id"]}]
    assert (
        of_type(ctx, b, "model_response")[-1]["data"]["content"][0]["text"] == f"Done: {CLEARED_RESULT_TEXT}"
    )
    verify_export(ctx, b)


def test_an_edit_naming_a_call_without_a_result_is_refused(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = tidy_thread(ctx)
    edit = {"edits": [{"action": "clear", "call_id": "call_nope"}], "reason": "manual"}
    with pytest.raises(LogError) as refused:
        ctx.writer.append(b, [Draft("context_edited", edit, {"kind": "host"})])
    assert refused.value.code == "invalid_transition" and "without a recorded result" in str(refused.value)
    assert not of_type(ctx, b, "context_edited")


# ------------------------------------------------------------------ POST …/redactions (ours)


def http(aws: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The handler's path: the container's Services from the environment, `api(event, op)`."""
    from threads_aws.host import runtime
    from threads_aws.host.runtime import api

    for k, v in aws.resources.env().items():
        monkeypatch.setenv(k, v)
    runtime.reset()

    def call(tid: str, body: Any, tenant: str = "acme") -> tuple[int, dict[str, Any]]:
        ev = {
            "httpMethod": "POST",
            "path": f"/v1/threads/{tid}/redactions",
            "pathParameters": {"thread_id": tid},
            "queryStringParameters": None,
            "headers": {"Content-Type": "application/json"},
            "body": body if isinstance(body, str) else json.dumps(body),
            "requestContext": {"authorizer": {"issuer": "api", "tenant": tenant, "subject": "alice"}},
        }
        out = api(ev, "redactResult")
        return out["statusCode"], json.loads(out["body"])

    return runtime, call


def expected(raw: bytes, spans: list[dict[str, int]]) -> str:
    """The text with every redacted byte's run (overlapping or touching spans: one run) as one
    [redacted], computed apart from the renderer."""
    hidden = {i for s in spans for i in range(s["start"], s["end"])}
    out, i = b"", 0
    while i < len(raw):
        if i in hidden:
            while i in hidden:
                i += 1
            out += b"[redacted]"
        else:
            out += raw[i : i + 1]
            i += 1
    return out.decode()


def test_a_redacted_span_renders_as_redacted_from_the_next_request_on(aws: Any, monkeypatch: Any) -> None:
    runtime, call = http(aws, monkeypatch)
    host = runtime.host()
    started = host.start_run(ALICE_P, {"agent": "demo", "input": "time"}, "k-redact")
    tid, b = started["thread_id"], started["branch_id"]
    ctx = make_ctx(aws)
    assert run(ctx, b).state == "idle"
    (result,) = of_type(ctx, b, "tool_result")
    cid, preview = result["data"]["call_id"], result["data"]["preview"]
    secret = preview[2:6]
    raw = preview.encode()
    status, body = call(tid, {"call_id": cid, "match": secret})
    assert status == 200 and set(body) == {"event_id"}, body
    (edit,) = of_type(ctx, b, "context_edited")
    spans, at = [], raw.find(secret.encode())
    while at != -1:
        spans.append({"end": at + len(secret.encode()), "start": at})
        at = raw.find(secret.encode(), at + len(secret.encode()))
    assert edit["data"] == {
        "edits": [{"action": "redact", "call_id": cid, "part": 0, "spans": spans}],
        "reason": "manual",
    }
    assert edit["actor"] == {"kind": "user", "principal": ALICE_P.as_dict()}
    status, _ = call(tid, {"call_id": cid, "spans": [{"start": 0, "end": 2}, {"start": 1, "end": 3}]})
    assert status == 200  # overlapping spans merge in the render
    host.start_run(ALICE_P, {"agent": "demo", "input": "hi", "thread_id": tid}, "k-redact-2")
    assert run(ctx, b).state == "idle"
    shown = tool_lines(ctx, of_type(ctx, b, "model_request")[-1])[cid][0]["text"]
    assert shown == expected(raw, [*spans, {"start": 0, "end": 2}, {"start": 1, "end": 3}])
    assert secret not in shown
    assert of_type(ctx, b, "tool_result")[0]["data"]["preview"] == preview  # the log keeps the result
    verify_export(ctx, b)
    runtime.reset()


def test_a_bad_redaction_is_refused_before_anything_is_written(aws: Any, monkeypatch: Any) -> None:
    runtime, call = http(aws, monkeypatch)
    host = runtime.host()
    started = host.start_run(ALICE_P, {"agent": "demo", "input": "time"}, "k-redact-bad")
    tid, b = started["thread_id"], started["branch_id"]
    ctx = make_ctx(aws)
    assert run(ctx, b).state == "idle"
    (result,) = of_type(ctx, b, "tool_result")
    cid, size = result["data"]["call_id"], len(result["data"]["preview"].encode())
    head = ctx.writer.load(b).fold.head_seq
    for body, code in [
        ({"call_id": "call_unknown", "match": "x"}, "invalid_request"),  # no recorded result
        ({"call_id": cid, "part": 1, "match": "x"}, "invalid_request"),  # no such text part
        ({"call_id": cid, "spans": [{"start": 0, "end": size + 1}]}, "invalid_request"),  # outside
        ({"call_id": cid, "match": "never in a time result"}, "invalid_request"),
        ({"call_id": cid}, "invalid_request"),  # neither spans nor match
        ({"call_id": cid, "match": "x", "spans": [{"start": 0, "end": 1}]}, "invalid_request"),
        ("not json", "invalid_request"),
    ]:
        status, err = call(tid, body)
        assert (status, err["error"]["code"]) == (400, code), (body, err)
    status, err = call(tid, {"call_id": cid, "match": "x"}, tenant="other")
    assert (status, err["error"]["code"]) == (404, "not_found")
    assert ctx.writer.load(b).fold.head_seq == head  # nothing appended
    runtime.reset()
