"""The Anthropic adapter on recorded Messages API payloads (documented shapes: streaming SSE
event sequences, whole messages, error bodies), served through the SDK's own transport hook
(an httpx MockTransport behind `http_client`): request mapping, answer mapping, every stop
reason and error class."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx2
import pytest
from helpers.providers import MemoryArtifacts, complete, request, sse, tool, user
from threads_aws.engine.models import ModelError
from threads_aws.engine.providers.anthropic import AnthropicAdapter

SEEN: list[dict[str, Any]] = []


def adapter(handler: Any) -> AnthropicAdapter:
    def record(req: httpx2.Request) -> httpx2.Response:
        SEEN.append(json.loads(req.content))
        return handler(req)

    client = anthropic.Anthropic(
        api_key="sk-test",
        base_url="http://anthropic.test",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(record)),
    )
    return AnthropicAdapter(client)


def message(content: list[dict[str, Any]], stop: str | None, **usage: Any) -> dict[str, Any]:
    return {
        "content": content,
        "id": "msg_01",
        "model": "claude-x",
        "role": "assistant",
        "stop_reason": stop,
        "stop_sequence": None,
        "type": "message",
        "usage": {"input_tokens": 10, "output_tokens": 5, **usage},
    }


# A recorded stream: thinking (with signature), text, then a tool_use with streamed JSON input.
STREAM = [
    (
        "message_start",
        {
            "message": message([], None, cache_read_input_tokens=1800, cache_creation_input_tokens=0),
            "type": "message_start",
        },
    ),
    (
        "content_block_start",
        {
            "content_block": {"signature": "", "thinking": "", "type": "thinking"},
            "index": 0,
            "type": "content_block_start",
        },
    ),
    (
        "content_block_delta",
        {
            "delta": {"thinking": "The user wants", "type": "thinking_delta"},
            "index": 0,
            "type": "content_block_delta",
        },
    ),
    (
        "content_block_delta",
        {
            "delta": {"thinking": " the time.", "type": "thinking_delta"},
            "index": 0,
            "type": "content_block_delta",
        },
    ),
    (
        "content_block_delta",
        {
            "delta": {"signature": "EqQBCgIYAhIM", "type": "signature_delta"},
            "index": 0,
            "type": "content_block_delta",
        },
    ),
    ("content_block_stop", {"index": 0, "type": "content_block_stop"}),
    ("ping", {"type": "ping"}),
    (
        "content_block_start",
        {"content_block": {"text": "", "type": "text"}, "index": 1, "type": "content_block_start"},
    ),
    (
        "content_block_delta",
        {"delta": {"text": "Checking.", "type": "text_delta"}, "index": 1, "type": "content_block_delta"},
    ),
    ("content_block_stop", {"index": 1, "type": "content_block_stop"}),
    (
        "content_block_start",
        {
            "content_block": {
                "id": "toolu_01A09q90qw90lq917835lq9",
                "input": {},
                "name": "time",
                "type": "tool_use",
            },
            "index": 2,
            "type": "content_block_start",
        },
    ),
    (
        "content_block_delta",
        {
            "delta": {"partial_json": '{"tz": ', "type": "input_json_delta"},
            "index": 2,
            "type": "content_block_delta",
        },
    ),
    (
        "content_block_delta",
        {
            "delta": {"partial_json": '"UTC"}', "type": "input_json_delta"},
            "index": 2,
            "type": "content_block_delta",
        },
    ),
    ("content_block_stop", {"index": 2, "type": "content_block_stop"}),
    (
        "message_delta",
        {
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "type": "message_delta",
            "usage": {"output_tokens": 87},
        },
    ),
    ("message_stop", {"type": "message_stop"}),
]


def test_stream_maps_thinking_text_tool_use_usage_and_deltas() -> None:
    arts = MemoryArtifacts()
    deltas: list[tuple[str, str]] = []
    ad = adapter(
        lambda r: httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=sse(STREAM))
    )
    res = complete(ad, request("anthropic", [user("what time is it?")]), arts, deltas)
    assert res.stop_reason == "tool_use"
    reasoning, text, use = res.content
    assert reasoning["type"] == "reasoning" and reasoning["format"] == "anthropic_thinking"
    assert reasoning["summary"] == "The user wants the time." and reasoning["provider"] == "anthropic"
    assert arts.json(reasoning["ref"]) == {
        "signature": "EqQBCgIYAhIM",
        "thinking": "The user wants the time.",
        "type": "thinking",
    }
    assert text == {"text": "Checking.", "type": "text"}
    assert use == {
        "call_id": "toolu_01A09q90qw90lq917835lq9",
        "input": {"tz": "UTC"},
        "name": "time",
        "type": "tool_use",
    }
    assert res.usage == {
        "cache_read_tokens": 1800,
        "cache_write_tokens": 0,
        "input_tokens": 10,
        "output_tokens": 87,
    }
    assert deltas == [("thinking", "The user wants"), ("thinking", " the time."), ("text", "Checking.")]
    sent = SEEN[-1]
    assert sent["stream"] is True and sent["max_tokens"] == 256 and sent["model"] == "m-1"
    # the declared prefix carries the cache breakpoint
    assert sent["system"] == [{"cache_control": {"type": "ephemeral"}, "text": "Be brief.", "type": "text"}]
    assert sent["tools"][0]["name"] == "time" and "input_schema" in sent["tools"][0]


def test_request_mapping_pairs_results_resolves_artifacts_and_sends_reasoning_back() -> None:
    arts = MemoryArtifacts()
    thinking = arts.put(
        json.dumps({"signature": "sig", "thinking": "hm", "type": "thinking"}).encode(), "application/json"
    )
    png = arts.put(b"\x89PNG fake", "image/png")
    doc = arts.put(b"plain words", "text/plain")
    lines = [
        {
            "content": [
                {"text": "look", "type": "text"},
                {"height": 1, "ref": png, "type": "image_ref", "width": 1},
                {"ref": doc, "title": "Notes", "type": "document_ref"},
            ],
            "role": "user",
        },
        {
            "content": [
                {
                    "format": "anthropic_thinking",
                    "model": "claude-x",
                    "provider": "anthropic",
                    "ref": thinking,
                    "type": "reasoning",
                },
                {"call_id": "call.with.dots", "input": {}, "name": "time", "type": "tool_use"},
            ],
            "role": "assistant",
        },
        tool("call.with.dots", "12:00", is_error=True),
        user("and now?"),
    ]
    ad = adapter(lambda r: httpx2.Response(200, json=message([{"text": "ok", "type": "text"}], "end_turn")))
    res = complete(
        ad,
        request(
            "anthropic",
            lines,
            settings={"stream": False, "cache": "history"},
            params={
                "max_tokens": 9,
                "temperature": 0.5,
                "stop_sequences": ["END"],
                "tool_choice": "any",
                "thinking": {"budget_tokens": 2048},
            },
        ),
        arts,
    )
    assert res.stop_reason == "end_turn" and res.content == [{"text": "ok", "type": "text"}]
    sent = SEEN[-1]
    assert (sent["temperature"], sent["stop_sequences"], sent["tool_choice"]) == (
        0.5,
        ["END"],
        {"type": "any"},
    )
    assert sent["thinking"] == {"budget_tokens": 2048, "type": "enabled"}
    u0, a1, u2 = sent["messages"]
    assert u0["content"][1] == {
        "source": {"data": "iVBORyBmYWtl", "media_type": "image/png", "type": "base64"},
        "type": "image",
    }
    assert u0["content"][2] == {
        "source": {"data": "plain words", "media_type": "text/plain", "type": "text"},
        "title": "Notes",
        "type": "document",
    }
    assert a1["content"][0] == {"signature": "sig", "thinking": "hm", "type": "thinking"}  # verbatim
    wire_id = a1["content"][1]["id"]
    assert wire_id != "call.with.dots" and "." not in wire_id  # Anthropic ids: [a-zA-Z0-9_-]
    assert u2["content"][0] == {
        "content": [{"text": "12:00", "type": "text"}],
        "is_error": True,
        "tool_use_id": wire_id,
        "type": "tool_result",
    }
    assert u2["content"][1]["text"] == "and now?"
    assert u2["content"][-1]["cache_control"] == {"type": "ephemeral"}  # the history breakpoint


def _refused(lines: list[dict[str, Any]], arts: MemoryArtifacts, **kw: Any) -> ModelError:
    calls = len(SEEN)
    ad = adapter(lambda r: httpx2.Response(500))
    with pytest.raises(ModelError) as ei:
        complete(ad, request("anthropic", lines, **kw), arts)
    assert len(SEEN) == calls, "nothing may be sent"
    assert ei.value.outcome == "not_sent" and not ei.value.retryable
    return ei.value


def test_what_cannot_be_sent_is_refused_before_sending() -> None:
    arts = MemoryArtifacts()
    foreign = arts.put(b"{}", "application/json")
    part = {
        "format": "openai_reasoning",
        "model": "o",
        "provider": "openai",
        "ref": foreign,
        "type": "reasoning",
    }
    assert (
        _refused([user("x"), {"content": [part], "role": "assistant"}, user("y")], arts).code
        == "continuation_unsupported"
    )
    audio = {"duration_ms": 5, "ref": arts.put(b"RIFF", "audio/wav"), "type": "audio_ref"}
    assert _refused([{"content": [audio], "role": "user"}], arts).code == "content_unsupported"
    missing = {
        "height": 1,
        "ref": {"bytes": 3, "media_type": "image/png", "sha256": "0" * 64},
        "type": "image_ref",
        "width": 1,
    }
    assert _refused([{"content": [missing], "role": "user"}], arts).code == "artifact_missing"
    assert _refused([user("x")], arts, params={"max_tokens": 5, "top_k": 3}).code == "model_error"
    assert _refused([user("x")], arts, params={}).code == "model_error"  # max_tokens is required


@pytest.mark.parametrize(
    ("theirs", "ours"),
    [
        ("end_turn", "end_turn"),
        ("tool_use", "tool_use"),
        ("max_tokens", "max_tokens"),
        ("stop_sequence", "stop_sequence"),
        ("pause_turn", "pause_turn"),
        ("refusal", "refusal"),
        ("model_context_window_exceeded", "context_window_exceeded"),
        ("something_new", "other"),
    ],
)
def test_every_stop_reason(theirs: str, ours: str) -> None:
    ad = adapter(lambda r: httpx2.Response(200, json=message([{"text": "t", "type": "text"}], theirs)))
    assert complete(ad, request("anthropic", [user("x")], settings={"stream": False})).stop_reason == ours


def _error(status: int, kind: str, msg: str, headers: dict[str, str] | None = None) -> httpx2.Response:
    body = {"error": {"message": msg, "type": kind}, "request_id": "req_1", "type": "error"}
    return httpx2.Response(status, json=body, headers=headers or {})


@pytest.mark.parametrize(
    ("resp", "reason", "status", "after", "retryable"),
    [
        (_error(429, "rate_limit_error", "slow down", {"retry-after": "7"}), "rate_limited", 429, 7000, True),
        (_error(529, "overloaded_error", "Overloaded"), "overloaded", 529, None, True),
        (_error(500, "api_error", "boom"), "server_error", 500, None, True),
        (
            _error(503, "api_error", "unavailable", {"retry-after-ms": "1500"}),
            "server_error",
            503,
            1500,
            True,
        ),
        (
            _error(400, "invalid_request_error", "prompt is too long: 208656 tokens > 200000 maximum"),
            "prompt_too_long",
            400,
            None,
            False,
        ),
        (
            _error(413, "request_too_large", "Request exceeds the maximum size"),
            "prompt_too_long",
            413,
            None,
            False,
        ),
        (_error(401, "authentication_error", "invalid x-api-key"), "provider_error", 401, None, False),
        (
            _error(400, "invalid_request_error", "messages: field required"),
            "provider_error",
            400,
            None,
            False,
        ),
    ],
)
def test_error_classes(
    resp: httpx2.Response, reason: str, status: int, after: int | None, retryable: bool
) -> None:
    with pytest.raises(ModelError) as ei:
        complete(adapter(lambda r: resp), request("anthropic", [user("x")]))
    e = ei.value
    assert (e.reason, e.http_status, e.retry_after_ms, e.retryable, e.outcome) == (
        reason,
        status,
        after,
        retryable,
        "failed",
    )


def test_error_event_inside_a_200_stream() -> None:
    events = [
        STREAM[0],
        ("error", {"error": {"message": "Overloaded", "type": "overloaded_error"}, "type": "error"}),
    ]
    ad = adapter(
        lambda r: httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=sse(events))
    )
    with pytest.raises(ModelError) as ei:
        complete(ad, request("anthropic", [user("x")]))
    assert (ei.value.reason, ei.value.outcome, ei.value.retryable) == ("overloaded", "failed", True)


def test_lost_answers_are_unknown_and_connect_failures_not_sent() -> None:
    def broken(r: httpx2.Request) -> httpx2.Response:
        def body() -> Any:
            yield sse(STREAM[:3])
            raise httpx2.RemoteProtocolError("peer closed connection without sending complete message body")

        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body())

    cases = [
        (broken, ("stream_broken", "unknown", "unknown")),
        (
            lambda r: (_ for _ in ()).throw(httpx2.ReadTimeout("read timed out")),
            ("timeout", "unknown", "unknown"),
        ),
        (
            lambda r: (_ for _ in ()).throw(httpx2.ConnectError("refused")),
            ("provider_error", "not_sent", "not_billed"),
        ),
        # a stream that ends cleanly but early (no message_delta / message_stop)
        (
            lambda r: httpx2.Response(
                200, headers={"content-type": "text/event-stream"}, content=sse(STREAM[:5])
            ),
            ("stream_broken", "unknown", "unknown"),
        ),
    ]
    for handler, want in cases:
        with pytest.raises(ModelError) as ei:
            complete(adapter(handler), request("anthropic", [user("x")]))
        e = ei.value
        assert (e.reason, e.outcome, e.billing) == want and e.retryable
        data = e.abandoned("rid", frozenset({e.reason}))
        assert data["provider_outcome"] == want[1] and data["billing"] == want[2]
