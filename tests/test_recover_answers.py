"""Recovering a model answer whose worker died in flight (`engine.recovery`), in process: the
OpenAI adapter over the SDK with a recorded transport (an httpx MockTransport playing the
Responses API: a stream that dies after `response.created`, then `GET /v1/responses/{id}`).
The worker's death is a `Crash` raised inside the stream (nothing catches it); a second worker
takes the branch. Found with finality → `model_response_recovered` and the turn goes on (a
recovered tool call dispatches); a response of another request, one still running past the
wait (cancelled), a 404 or no recorded id → `model_attempt_abandoned{unknown, crash}` and the
retry policy's crash re-send. Every log exports, re-imports and re-renders."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from typing import Any

import httpx2
import openai
import pytest
from helpers.engine import Crash, make_ctx, of_type, run, say, types, verify_export
from helpers.providers import sse
from threads_aws.agents import load_agents
from threads_aws.core.canonical import new_uuid7
from threads_aws.core.lines import StoredLine, header_line
from threads_aws.engine.providers.openai import OpenAIAdapter
from threads_aws.engine.step import EngineContext
from threads_aws.store import NewBranch
from threads_aws.writer import Draft

SSE = {"content-type": "text/event-stream"}


class Responses:
    """The Responses API as the adapter meets it. `die` > 0: the next streamed POSTs die after
    `response.created` (the worker's death); `status`: what a stored response reports."""

    def __init__(self, answers: list[dict[str, Any]]) -> None:
        self.answers = answers  # output items per POST, in order
        self.posts: list[dict[str, Any]] = []
        self.gets: list[str] = []
        self.cancels: list[str] = []
        self.stored: dict[str, dict[str, Any]] = {}
        self.die = 0
        self.status = "completed"
        self.metadata: dict[str, Any] | None = None  # overrides what the request sent
        self.silent = False  # the dying stream dies before `response.created`

    def __call__(self, req: httpx2.Request) -> httpx2.Response:
        path = req.url.path
        if m := re.fullmatch(r"/v1/responses/([^/]+)/cancel", path):
            self.cancels.append(m.group(1))
            return httpx2.Response(200, json={**self.stored[m.group(1)], "status": "cancelled"})
        if m := re.fullmatch(r"/v1/responses/([^/]+)", path):
            self.gets.append(m.group(1))
            resp = self.stored.get(m.group(1))
            if resp is None:
                err = {"code": None, "message": "not found", "param": None, "type": "invalid_request_error"}
                return httpx2.Response(404, json={"error": err})
            return httpx2.Response(200, json={**resp, "status": self.status})
        body = json.loads(req.content)
        self.posts.append(body)
        rid = f"resp_{len(self.posts)}"
        resp = {
            "created_at": 1,
            "id": rid,
            "metadata": self.metadata if self.metadata is not None else body.get("metadata", {}),
            "model": body["model"],
            "object": "response",
            "output": self.answers[len(self.posts) - 1],
            "parallel_tool_calls": True,
            "status": "completed",
            "tool_choice": "auto",
            "tools": [],
            "usage": {"input_tokens": 50, "output_tokens": 7},
        }
        self.stored[rid] = resp
        created = {"response": {**resp, "output": [], "status": "in_progress"}, "type": "response.created"}
        done = {"response": resp, "type": "response.completed"}
        if self.die:
            self.die -= 1
            return httpx2.Response(200, headers=SSE, stream=_dying(created, self.silent))
        events = [(e["type"], {**e, "sequence_number": i}) for i, e in enumerate([created, done])]
        return httpx2.Response(200, headers=SSE, content=sse(events))


class _dying(httpx2.SyncByteStream):
    def __init__(self, created: dict[str, Any], silent: bool) -> None:
        self.created, self.silent = created, silent

    def __iter__(self) -> Iterator[bytes]:
        if not self.silent:
            yield sse([("response.created", {**self.created, "sequence_number": 0})])
        raise Crash  # the worker dies with the answer in flight


def text(t: str) -> list[dict[str, Any]]:
    part = {"annotations": [], "text": t, "type": "output_text"}
    return [{"content": [part], "id": "m", "role": "assistant", "status": "completed", "type": "message"}]


CALL = [
    {
        "arguments": "{}",
        "call_id": "call_t1",
        "id": "fc_1",
        "name": "time",
        "status": "completed",
        "type": "function_call",
    }
]


def engine(aws: Any, api: Responses) -> EngineContext:
    client = openai.OpenAI(
        api_key="sk-test",
        base_url="http://openai.test/v1",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(api)),
    )
    return make_ctx(aws, models=lambda _m, _a: OpenAIAdapter(client))


def recovering_thread(ctx: EngineContext, recover: bool = True) -> str:
    thread_id, branch_id = new_uuid7(), new_uuid7()
    header = StoredLine.of_header(header_line(thread_id, branch_id, ctx.clock()))
    ctx.store.create_branch(
        NewBranch(thread_id=thread_id, tenant="acme", branch_id=branch_id, header=header, create_thread=True)
    )
    started = copy.deepcopy(load_agents()["openai"].thread_started())  # never the loaded agent's
    settings = {"api": "responses", "recover": recover, "recover_wait_s": 1}
    started["adapter"] = {**started["adapter"], "settings": settings}
    started["policy"].pop("fallback", None)
    ctx.writer.append(branch_id, [Draft("thread_started", started, {"kind": "host"})])
    return branch_id


def crash_mid_answer(ctx: EngineContext, b: str) -> None:
    with pytest.raises(Crash):
        run(ctx, b, holder="worker-1")
    assert types(ctx, b)[-1] == "model_request"


def test_recovered_answer_continues_the_turn_and_its_call_dispatches(aws: Any) -> None:
    api = Responses([CALL, text("It is noon.")])
    ctx = engine(aws, api)
    b = recovering_thread(ctx)
    say(ctx, b, "What time is it?")
    api.die = 1
    crash_mid_answer(ctx, b)
    (req,) = of_type(ctx, b, "model_request")
    assert api.posts[0]["store"] is True and api.posts[0]["background"] is True
    assert api.posts[0]["metadata"] == {"client_request_id": f"{b}:{req['event_id']}"}
    assert ctx.stores.provider_requests is not None
    assert ctx.stores.provider_requests.get(b, req["event_id"]) == "resp_1"
    assert run(ctx, b, holder="worker-2").state == "idle"
    kinds = types(ctx, b)
    first = kinds.index("model_request")
    assert kinds[first : first + 3] == ["model_request", "model_response_recovered", "tool_call"]
    assert kinds[-2:] == ["model_response", "turn_completed"]
    assert "model_attempt_abandoned" not in kinds
    (rec,) = of_type(ctx, b, "model_response_recovered")
    assert rec["data"]["provider_request_id"] == "resp_1" and rec["data"]["stop_reason"] == "tool_use"
    assert rec["data"]["usage"] == {"input_tokens": 50, "output_tokens": 7}
    assert len(of_type(ctx, b, "tool_result")) == 1
    assert len(api.posts) == 2 and api.gets == ["resp_1"]  # the first answer was never re-sent
    verify_export(ctx, b)


@pytest.mark.parametrize("case", ["another_request", "still_running", "deleted", "no_id_recorded"])
def test_no_finality_is_abandoned_unknown_and_resent(aws: Any, case: str) -> None:
    api = Responses([text("lost"), text("again")])
    ctx = engine(aws, api)
    b = recovering_thread(ctx)
    say(ctx, b, "hello")
    api.die = 1
    if case == "another_request":
        api.metadata = {"client_request_id": "someone:else"}
    api.silent = case == "no_id_recorded"  # the worker died before the provider's id arrived
    crash_mid_answer(ctx, b)
    if case == "still_running":
        api.status = "in_progress"
    if case == "deleted":
        api.stored.clear()
    assert run(ctx, b, holder="worker-2").state == "idle"
    (gone,) = of_type(ctx, b, "model_attempt_abandoned")
    assert (gone["data"]["provider_outcome"], gone["data"]["reason"]) == ("unknown", "crash")
    assert gone["actor"]["kind"] == "recovery"
    assert not of_type(ctx, b, "model_response_recovered")
    assert types(ctx, b)[-2:] == ["model_response", "turn_completed"]  # the crash re-send answered
    assert len(api.posts) == 2
    assert api.cancels == (["resp_1"] if case == "still_running" else [])
    if case == "no_id_recorded":
        assert api.gets == []  # nothing to look up
    else:
        assert api.gets and set(api.gets) == {"resp_1"}
    verify_export(ctx, b)


def test_without_recover_the_request_is_not_stored_and_a_crash_abandons(aws: Any) -> None:
    api = Responses([text("lost"), text("again")])
    ctx = engine(aws, api)
    b = recovering_thread(ctx, recover=False)
    say(ctx, b, "hello")
    api.die = 1
    crash_mid_answer(ctx, b)
    assert api.posts[0]["store"] is False and "background" not in api.posts[0]
    assert "metadata" not in api.posts[0]
    assert run(ctx, b, holder="worker-2").state == "idle"
    assert [e["data"]["provider_outcome"] for e in of_type(ctx, b, "model_attempt_abandoned")] == ["unknown"]
    assert api.gets == []
    verify_export(ctx, b)
