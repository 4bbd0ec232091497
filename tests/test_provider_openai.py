"""The OpenAI adapter on recorded Responses and Chat Completions payloads (documented shapes:
typed SSE events, chat chunks, whole responses, error bodies), through the SDK's own transport
hook (an httpx MockTransport behind `http_client`)."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import openai
import pytest
from helpers.providers import MemoryArtifacts, complete, request, sse, tool, user
from threads_aws.engine.models import ModelError
from threads_aws.engine.providers.openai import OpenAIAdapter

SEEN: list[dict[str, Any]] = []


def adapter(handler: Any) -> OpenAIAdapter:
    def record(req: httpx2.Request) -> httpx2.Response:
        SEEN.append({"body": json.loads(req.content), "path": req.url.path})
        return handler(req)

    client = openai.OpenAI(
        api_key="sk-test",
        base_url="http://openai.test/v1",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(record)),
    )
    return OpenAIAdapter(client)


def stream_of(events: list[dict[str, Any]]) -> httpx2.Response:
    numbered = [(e["type"], {**e, "sequence_number": i}) for i, e in enumerate(events)]
    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=sse(numbered))


REASONING_ITEM = {
    "encrypted_content": "gAAAAABo-enc",
    "id": "rs_123",
    "summary": [{"text": "Need the clock.", "type": "summary_text"}],
    "type": "reasoning",
}
CALL_ITEM = {
    "arguments": '{"tz":"UTC"}',
    "call_id": "call_abc123",
    "id": "fc_1",
    "name": "time",
    "status": "completed",
    "type": "function_call",
}


def response(output: list[dict[str, Any]], status: str = "completed", **extra: Any) -> dict[str, Any]:
    return {
        "created_at": 1,
        "id": "resp_1",
        "model": "gpt-x",
        "object": "response",
        "output": output,
        "parallel_tool_calls": True,
        "status": status,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 2000,
            "input_tokens_details": {"cached_tokens": 1536},
            "output_tokens": 300,
            "output_tokens_details": {"reasoning_tokens": 256},
            "total_tokens": 2300,
        },
        **extra,
    }


def test_responses_stream_reasoning_function_call_usage() -> None:
    final = response([REASONING_ITEM, CALL_ITEM])
    events = [
        {
            "response": {**final, "output": [], "status": "in_progress", "usage": None},
            "type": "response.created",
        },
        {"item": {**REASONING_ITEM, "summary": []}, "output_index": 0, "type": "response.output_item.added"},
        {
            "delta": "Need the clock.",
            "item_id": "rs_123",
            "output_index": 0,
            "summary_index": 0,
            "type": "response.reasoning_summary_text.delta",
        },
        {"item": REASONING_ITEM, "output_index": 0, "type": "response.output_item.done"},
        {"item": {**CALL_ITEM, "arguments": ""}, "output_index": 1, "type": "response.output_item.added"},
        {
            "delta": '{"tz":"UTC"}',
            "item_id": "fc_1",
            "output_index": 1,
            "type": "response.function_call_arguments.delta",
        },
        {"item": CALL_ITEM, "output_index": 1, "type": "response.output_item.done"},
        {"response": final, "type": "response.completed"},
    ]
    arts = MemoryArtifacts()
    deltas: list[tuple[str, str]] = []
    res = complete(
        adapter(lambda r: stream_of(events)),
        request("openai", [user("time?")], params={"max_tokens": 50, "reasoning_effort": "low"}),
        arts,
        deltas,
    )
    reasoning, use = res.content
    assert reasoning["format"] == "openai_reasoning" and reasoning["summary"] == "Need the clock."
    assert arts.json(reasoning["ref"])["encrypted_content"] == "gAAAAABo-enc"
    assert use == {"call_id": "call_abc123", "input": {"tz": "UTC"}, "name": "time", "type": "tool_use"}
    assert res.stop_reason == "tool_use"
    # input excludes the cached part; reasoning tokens are inside output
    assert res.usage == {
        "cache_read_tokens": 1536,
        "input_tokens": 464,
        "output_tokens": 300,
        "reasoning_tokens": 256,
    }
    assert deltas == [("thinking", "Need the clock.")]
    sent = SEEN[-1]
    assert sent["path"] == "/v1/responses"
    b = sent["body"]
    assert (
        b["store"] is False
        and b["include"] == ["reasoning.encrypted_content"]
        and b["reasoning"]["effort"] == "low"
    )
    assert b["instructions"] == "Be brief." and b["max_output_tokens"] == 50
    assert b["tools"][0]["type"] == "function" and b["tools"][0]["name"] == "time"


def test_responses_history_sends_reasoning_items_and_outputs_back() -> None:
    arts = MemoryArtifacts()
    ref = arts.put(json.dumps(REASONING_ITEM).encode(), "application/json")
    lines = [
        user("time?"),
        {
            "content": [
                {
                    "format": "openai_reasoning",
                    "model": "gpt-x",
                    "provider": "openai",
                    "ref": ref,
                    "type": "reasoning",
                },
                {"call_id": "call_abc123", "input": {"tz": "UTC"}, "name": "time", "type": "tool_use"},
            ],
            "role": "assistant",
        },
        tool("call_abc123", "12:00Z"),
    ]
    done = response(
        [
            {
                "content": [{"annotations": [], "text": "It is 12:00Z.", "type": "output_text"}],
                "id": "m",
                "role": "assistant",
                "status": "completed",
                "type": "message",
            }
        ]
    )
    res = complete(
        adapter(lambda r: httpx2.Response(200, json=done)),
        request("openai", lines, settings={"stream": False}),
        arts,
    )
    assert res.content == [{"text": "It is 12:00Z.", "type": "text"}] and res.stop_reason == "end_turn"
    items = SEEN[-1]["body"]["input"]
    assert items[1] == REASONING_ITEM  # verbatim, before its call
    assert items[2] == {
        "arguments": '{"tz":"UTC"}',
        "call_id": "call_abc123",
        "name": "time",
        "type": "function_call",
    }
    assert items[3] == {"call_id": "call_abc123", "output": "12:00Z", "type": "function_call_output"}


@pytest.mark.parametrize(
    ("resp", "stop"),
    [
        (response([], "incomplete", incomplete_details={"reason": "max_output_tokens"}), "max_tokens"),
        (response([], "incomplete", incomplete_details={"reason": "content_filter"}), "refusal"),
        (
            response(
                [
                    {
                        "content": [{"refusal": "I can't help with that.", "type": "refusal"}],
                        "id": "m",
                        "role": "assistant",
                        "status": "completed",
                        "type": "message",
                    }
                ]
            ),
            "refusal",
        ),
        (response([CALL_ITEM]), "tool_use"),
    ],
)
def test_responses_stop_reasons(resp: dict[str, Any], stop: str) -> None:
    res = complete(
        adapter(lambda r: httpx2.Response(200, json=resp)),
        request("openai", [user("x")], settings={"stream": False}),
    )
    assert res.stop_reason == stop


def test_responses_failed_event_is_classified() -> None:
    failed = response([], "failed", error={"code": "server_error", "message": "The model failed"})
    events = [
        {"response": {**failed, "status": "in_progress"}, "type": "response.created"},
        {"response": failed, "type": "response.failed"},
    ]
    with pytest.raises(ModelError) as ei:
        complete(adapter(lambda r: stream_of(events)), request("openai", [user("x")]))
    assert ei.value.reason == "server_error" and ei.value.retryable


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> tuple[None, dict[str, Any]]:
    return None, {
        "choices": [{"delta": delta, "finish_reason": finish, "index": 0}],
        "created": 1,
        "id": "chatcmpl-1",
        "model": "m",
        "object": "chat.completion.chunk",
        **extra,
    }


def test_chat_stream_merges_tool_call_fragments_by_index() -> None:
    events = [
        chunk({"content": "", "role": "assistant"}),
        chunk({"content": "Let me check."}),
        chunk(
            {
                "tool_calls": [
                    {
                        "function": {"arguments": "", "name": "time"},
                        "id": "call_9",
                        "index": 0,
                        "type": "function",
                    }
                ]
            }
        ),
        chunk({"tool_calls": [{"function": {"arguments": '{"tz":'}, "index": 0}]}),
        chunk({"tool_calls": [{"function": {"arguments": '"UTC"}'}, "index": 0}]}),
        chunk({}, "tool_calls"),
        (
            None,
            {
                "choices": [],
                "created": 1,
                "id": "chatcmpl-1",
                "model": "m",
                "object": "chat.completion.chunk",
                "usage": {
                    "completion_tokens": 20,
                    "prompt_tokens": 100,
                    "prompt_tokens_details": {"cached_tokens": 64},
                    "total_tokens": 120,
                },
            },
        ),
        (None, b"[DONE]"),
    ]
    deltas: list[tuple[str, str]] = []
    resp = httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=sse(events))
    lines = [
        user("time?"),
        {
            "content": [{"call_id": "x" * 60, "input": {}, "name": "time", "type": "tool_use"}],
            "role": "assistant",
        },
        tool("x" * 60, "earlier"),
        user("again"),
    ]
    res = complete(
        adapter(lambda r: resp),
        request(
            "openai", lines, settings={"api": "chat"}, params={"max_tokens": 9, "stop_sequences": ["END"]}
        ),
        None,
        deltas,
    )
    assert res.content == [
        {"text": "Let me check.", "type": "text"},
        {"call_id": "call_9", "input": {"tz": "UTC"}, "name": "time", "type": "tool_use"},
    ]
    assert res.stop_reason == "tool_use" and deltas == [("text", "Let me check.")]
    assert res.usage == {"cache_read_tokens": 64, "input_tokens": 36, "output_tokens": 20}
    b = SEEN[-1]["body"]
    assert SEEN[-1]["path"] == "/v1/chat/completions" and b["stream_options"] == {"include_usage": True}
    assert b["stop"] == ["END"] and b["max_completion_tokens"] == 9
    sys_m, u0, a1, t2, u3 = b["messages"]
    assert sys_m == {"content": "Be brief.", "role": "system"} and u0 == {"content": "time?", "role": "user"}
    wire = a1["tool_calls"][0]["id"]
    assert len(wire) <= 40 and t2 == {"content": "earlier", "role": "tool", "tool_call_id": wire}  # paired
    assert u3 == {"content": "again", "role": "user"}


@pytest.mark.parametrize(
    ("finish", "stop"),
    [
        ("stop", "end_turn"),
        ("length", "max_tokens"),
        ("tool_calls", "tool_use"),
        ("content_filter", "refusal"),
        ("weird", "other"),
    ],
)
def test_chat_finish_reasons(finish: str, stop: str) -> None:
    body = {
        "choices": [{"finish_reason": finish, "index": 0, "message": {"content": "t", "role": "assistant"}}],
        "created": 1,
        "id": "c",
        "model": "m",
        "object": "chat.completion",
    }
    res = complete(
        adapter(lambda r: httpx2.Response(200, json=body)),
        request("openai", [user("x")], settings={"api": "chat", "stream": False}),
    )
    assert res.stop_reason == stop and res.usage == {"input_tokens": None, "output_tokens": None}


def _err(
    status: int, code: str | None, kind: str, msg: str, headers: dict[str, str] | None = None
) -> httpx2.Response:
    return httpx2.Response(
        status,
        json={"error": {"code": code, "message": msg, "param": None, "type": kind}},
        headers=headers or {},
    )


@pytest.mark.parametrize(
    ("resp", "reason", "after", "retryable"),
    [
        (
            _err(429, "rate_limit_exceeded", "requests", "Rate limit reached", {"retry-after": "2"}),
            "rate_limited",
            2000,
            True,
        ),
        (
            _err(429, "insufficient_quota", "insufficient_quota", "You exceeded your current quota"),
            "provider_error",
            None,
            False,
        ),
        (_err(500, None, "server_error", "The server had an error"), "server_error", None, True),
        (_err(503, None, "server_error", "overloaded"), "server_error", None, True),
        (
            _err(
                400,
                "context_length_exceeded",
                "invalid_request_error",
                "Your input exceeds the context window of this model.",
            ),
            "prompt_too_long",
            None,
            False,
        ),
        (
            _err(401, "invalid_api_key", "invalid_request_error", "Incorrect API key provided"),
            "provider_error",
            None,
            False,
        ),
    ],
)
def test_error_classes(resp: httpx2.Response, reason: str, after: int | None, retryable: bool) -> None:
    for settings in ({}, {"api": "chat"}):
        with pytest.raises(ModelError) as ei:
            complete(adapter(lambda r: resp), request("openai", [user("x")], settings=settings))
        e = ei.value
        assert (e.reason, e.retry_after_ms, e.retryable, e.outcome, e.http_status) == (
            reason,
            after,
            retryable,
            "failed",
            resp.status_code,
        )


def test_cannot_express_is_refused_before_sending() -> None:
    arts = MemoryArtifacts()
    n = len(SEEN)
    for req in (
        request("openai", [user("x")], params={"stop_sequences": ["x"]}),  # Responses has no stop
        request("openai", [user("x")], params={"thinking": {"budget_tokens": 5}}),
        request(
            "openai",
            [
                user("x"),
                {
                    "content": [
                        {
                            "format": "anthropic_thinking",
                            "model": "c",
                            "provider": "anthropic",
                            "ref": arts.put(b"{}", "application/json"),
                            "type": "reasoning",
                        }
                    ],
                    "role": "assistant",
                },
                user("y"),
            ],
        ),
    ):
        with pytest.raises(ModelError) as ei:
            complete(adapter(lambda r: httpx2.Response(500)), req, arts)
        assert ei.value.outcome == "not_sent" and not ei.value.retryable
    assert len(SEEN) == n


def test_recover_unstreamed_background_answers_after_polling_and_reports_its_id() -> None:
    """`recover: true` without streaming: the POST answers `queued` (background), the adapter
    hands the id to `on_accepted` and polls `GET /responses/{id}` until it is done."""
    seen: list[str] = []
    states = iter(["in_progress", "completed"])
    msg = {"content": [{"annotations": [], "text": "hi", "type": "output_text"}], "id": "m",
           "role": "assistant", "status": "completed", "type": "message"}  # fmt: skip

    def handler(req: httpx2.Request) -> httpx2.Response:
        seen.append(req.url.path)
        if req.method == "POST":
            SEEN.append({"body": json.loads(req.content), "path": req.url.path})
            return httpx2.Response(200, json=response([], "queued", metadata={"client_request_id": "b:r"}))
        status = next(states)
        return httpx2.Response(200, json=response([msg] if status == "completed" else [], status))

    accepted: list[str] = []
    req = request("openai", [user("hello")], settings={"recover": True, "stream": False})
    http = httpx2.Client(transport=httpx2.MockTransport(handler))
    client = openai.OpenAI(
        api_key="sk-test", base_url="http://openai.test/v1", max_retries=0, http_client=http
    )
    out = OpenAIAdapter(client).complete(
        req,
        settings={},
        request_event_id="r",
        branch_id="b",
        artifacts=MemoryArtifacts(),
        client_request_id="b:r",
        on_accepted=accepted.append,
    )
    assert (out.content, out.stop_reason) == ([{"text": "hi", "type": "text"}], "end_turn")
    assert accepted == ["resp_1"]
    sent = SEEN[-1]["body"]
    assert (sent["store"], sent["background"], sent["metadata"]) == (True, True, {"client_request_id": "b:r"})
    assert seen == ["/v1/responses", "/v1/responses/resp_1", "/v1/responses/resp_1"]
    assert OpenAIAdapter.recoverable({"adapter": {"settings": {"recover": True}}})
    assert not OpenAIAdapter.recoverable({"adapter": {"settings": {"recover": True, "api": "chat"}}})
    assert not OpenAIAdapter.recoverable({"adapter": {"settings": {}}})
