"""The Bedrock adapter on recorded Converse payloads: whole answers and error classes through
botocore's `Stubber` (which also validates our request against the service model), and
ConverseStream event sequences through a local HTTP endpoint replaying recorded events in the
AWS event-stream binary framing (`fakes.eventstream`, checked against botocore's own reader)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.eventstream import EventStreamBuffer
from botocore.stub import Stubber
from helpers.providers import MemoryArtifacts, complete, request, tool, user
from threads_aws.engine.models import ModelError
from threads_aws.engine.providers.bedrock import BedrockAdapter
from threads_aws_dev.fakes import eventstream

MODEL = "us.anthropic.claude-sonnet-4-20250514-v1:0"


def client(endpoint: str | None = None) -> Any:
    return boto3.session.Session().client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=endpoint or "https://bedrock-runtime.us-east-1.amazonaws.com",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"mode": "standard", "total_max_attempts": 1}),
    )


def answer(content: list[dict[str, Any]], stop: str, **usage: Any) -> dict[str, Any]:
    return {
        "metrics": {"latencyMs": 10},
        "output": {"message": {"content": content, "role": "assistant"}},
        "stopReason": stop,
        "usage": {"inputTokens": 12, "outputTokens": 7, "totalTokens": 19, **usage},
    }


def test_converse_maps_request_and_answer() -> None:
    arts = MemoryArtifacts()
    png = arts.put(b"\x89PNG", "image/png")
    pdf = arts.put(b"%PDF-1.7", "application/pdf")
    c = client()
    lines = [
        {
            "content": [
                {"text": "see", "type": "text"},
                {"height": 1, "ref": png, "type": "image_ref", "width": 1},
                {"ref": pdf, "title": "Q3 report.v2", "type": "document_ref"},
            ],
            "role": "user",
        },
        {
            "content": [{"call_id": "tooluse_abc", "input": {}, "name": "time", "type": "tool_use"}],
            "role": "assistant",
        },
        tool("tooluse_abc", "12:00", is_error=True),
    ]
    expected = {
        "modelId": MODEL,
        "inferenceConfig": {"maxTokens": 100, "stopSequences": ["END"], "temperature": 0.2},
        "additionalModelRequestFields": {"thinking": {"budget_tokens": 1024, "type": "enabled"}},
        "system": [{"text": "Be brief."}, {"cachePoint": {"type": "default"}}],
        "toolConfig": {
            "toolChoice": {"any": {}},
            "tools": [
                {
                    "toolSpec": {
                        "description": "now",
                        "inputSchema": {
                            "json": {"additionalProperties": False, "properties": {}, "type": "object"}
                        },
                        "name": "time",
                    }
                }
            ],
        },
        "messages": [
            {
                "content": [
                    {"text": "see"},
                    {"image": {"format": "png", "source": {"bytes": b"\x89PNG"}}},
                    {"document": {"format": "pdf", "name": "Q3 report-v2", "source": {"bytes": b"%PDF-1.7"}}},
                ],
                "role": "user",
            },
            {
                "content": [{"toolUse": {"input": {}, "name": "time", "toolUseId": "tooluse_abc"}}],
                "role": "assistant",
            },
            {
                "content": [
                    {
                        "toolResult": {
                            "content": [{"text": "12:00"}],
                            "status": "error",
                            "toolUseId": "tooluse_abc",
                        }
                    }
                ],
                "role": "user",
            },
        ],
    }
    out = answer(
        [
            {"reasoningContent": {"reasoningText": {"signature": "sig==", "text": "clock"}}},
            {"text": "It is noon."},
        ],
        "end_turn",
        cacheReadInputTokens=2048,
        cacheWriteInputTokens=0,
    )
    with Stubber(c) as stub:
        stub.add_response("converse", out, expected)
        res = complete(
            BedrockAdapter(c),
            request(
                "bedrock",
                lines,
                model=MODEL,
                settings={"stream": False},
                params={
                    "max_tokens": 100,
                    "temperature": 0.2,
                    "stop_sequences": ["END"],
                    "tool_choice": "any",
                    "thinking": {"budget_tokens": 1024},
                },
            ),
            arts,
        )
        stub.assert_no_pending_responses()
    reasoning, text = res.content
    assert reasoning["format"] == "bedrock_reasoning" and reasoning["summary"] == "clock"
    assert arts.json(reasoning["ref"]) == {"reasoningText": {"signature": "sig==", "text": "clock"}}
    assert text == {"text": "It is noon.", "type": "text"} and res.stop_reason == "end_turn"
    # inputTokens is already the non-cached part
    assert res.usage == {
        "cache_read_tokens": 2048,
        "cache_write_tokens": 0,
        "input_tokens": 12,
        "output_tokens": 7,
    }


@pytest.mark.parametrize(
    ("theirs", "ours"),
    [
        ("end_turn", "end_turn"),
        ("tool_use", "tool_use"),
        ("max_tokens", "max_tokens"),
        ("stop_sequence", "stop_sequence"),
        ("guardrail_intervened", "refusal"),
        ("content_filtered", "refusal"),
        ("model_context_window_exceeded", "context_window_exceeded"),
        ("malformed_model_output", "other"),
        ("malformed_tool_use", "other"),
    ],
)
def test_every_stop_reason(theirs: str, ours: str) -> None:
    c = client()
    with Stubber(c) as stub:
        stub.add_response("converse", answer([{"text": "t"}], theirs))
        res = complete(
            BedrockAdapter(c), request("bedrock", [user("x")], settings={"stream": False, "cache": "off"})
        )
    assert res.stop_reason == ours
    assert res.usage == {"input_tokens": 12, "output_tokens": 7}  # no cachePoint sent: no cache fields


@pytest.mark.parametrize(
    ("code", "status", "message", "reason", "retryable"),
    [
        (
            "ThrottlingException",
            429,
            "Too many tokens, please wait before trying again.",
            "rate_limited",
            True,
        ),
        ("ModelNotReadyException", 429, "Model is not ready", "overloaded", True),
        ("ServiceUnavailableException", 503, "Service unavailable", "overloaded", True),
        ("InternalServerException", 500, "internal", "server_error", True),
        ("ModelErrorException", 424, "The model failed", "server_error", True),
        ("ModelTimeoutException", 408, "Model timed out", "timeout", True),
        ("ValidationException", 400, "Input is too long for requested model.", "prompt_too_long", False),
        (
            "ValidationException",
            400,
            "Invocation of model ID x with on-demand throughput isn't supported.",
            "provider_error",
            False,
        ),
        ("AccessDeniedException", 403, "not authorized", "provider_error", False),
        ("ResourceNotFoundException", 404, "model not found", "provider_error", False),
    ],
)
def test_error_classes(code: str, status: int, message: str, reason: str, retryable: bool) -> None:
    c = client()
    with Stubber(c) as stub:
        stub.add_client_error(
            "converse", service_error_code=code, service_message=message, http_status_code=status
        )
        with pytest.raises(ModelError) as ei:
            complete(BedrockAdapter(c), request("bedrock", [user("x")], settings={"stream": False}))
    e = ei.value
    assert (e.reason, e.http_status, e.retryable, e.outcome) == (reason, status, retryable, "failed")


# ------------------------------------------------------------------ ConverseStream, real framing

STREAM_EVENTS = [
    ("messageStart", {"role": "assistant"}),
    ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "think"}}}),
    ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"signature": "c2ln"}}}),
    ("contentBlockStop", {"contentBlockIndex": 0}),
    ("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"text": "Let me "}}),
    ("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"text": "check."}}),
    ("contentBlockStop", {"contentBlockIndex": 1}),
    (
        "contentBlockStart",
        {"contentBlockIndex": 2, "start": {"toolUse": {"name": "time", "toolUseId": "tooluse_Xy1"}}},
    ),
    ("contentBlockDelta", {"contentBlockIndex": 2, "delta": {"toolUse": {"input": '{"tz":'}}}),
    ("contentBlockDelta", {"contentBlockIndex": 2, "delta": {"toolUse": {"input": '"UTC"}'}}}),
    ("contentBlockStop", {"contentBlockIndex": 2}),
    ("messageStop", {"stopReason": "tool_use"}),
    (
        "metadata",
        {
            "metrics": {"latencyMs": 40},
            "usage": {
                "cacheReadInputTokens": 0,
                "cacheWriteInputTokens": 1500,
                "inputTokens": 30,
                "outputTokens": 25,
                "totalTokens": 1555,
            },
        },
    ),
]


class Replay(ThreadingHTTPServer):
    daemon_threads = True
    frames: list[bytes] = []
    cut: bool = False
    bodies: list[dict[str, Any]] = []


class ReplayHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Replay

    def log_message(self, *a: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802
        self.server.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.amazon.eventstream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for f in self.server.frames:
            self.wfile.write(f"{len(f):x}\r\n".encode() + f + b"\r\n")
        if self.server.cut:
            self.wfile.flush()
            self.connection.shutdown(2)
            return
        self.wfile.write(b"0\r\n\r\n")


@pytest.fixture()
def replay() -> Iterator[Replay]:
    srv = Replay(("127.0.0.1", 0), ReplayHandler)
    srv.bodies = []
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_framing_reads_back_with_botocore() -> None:
    buf = EventStreamBuffer()
    buf.add_data(
        b"".join(eventstream.event(n, b) for n, b in STREAM_EVENTS[:2])
        + eventstream.exception("throttlingException", "slow")
    )
    msgs = list(buf)
    assert [m.headers[":event-type"] for m in msgs[:2]] == ["messageStart", "contentBlockDelta"]
    assert json.loads(msgs[0].payload) == {"role": "assistant"}
    assert msgs[2].headers[":exception-type"] == "throttlingException"


def test_converse_stream_folds_events_and_hands_deltas(replay: Replay) -> None:
    replay.frames = [eventstream.event(n, b) for n, b in STREAM_EVENTS]
    arts = MemoryArtifacts()
    deltas: list[tuple[str, str]] = []
    url = f"http://127.0.0.1:{replay.server_address[1]}"
    res = complete(
        BedrockAdapter(client(url)), request("bedrock", [user("time?")], model=MODEL), arts, deltas
    )
    reasoning, text, use = res.content
    assert arts.json(reasoning["ref"]) == {"reasoningText": {"signature": "c2ln", "text": "think"}}
    assert text == {"text": "Let me check.", "type": "text"}
    assert use == {"call_id": "tooluse_Xy1", "input": {"tz": "UTC"}, "name": "time", "type": "tool_use"}
    assert res.stop_reason == "tool_use"
    assert res.usage == {
        "cache_read_tokens": 0,
        "cache_write_tokens": 1500,
        "input_tokens": 30,
        "output_tokens": 25,
    }
    assert deltas == [("thinking", "think"), ("text", "Let me "), ("text", "check.")]
    assert replay.bodies[-1]["system"][-1] == {"cachePoint": {"type": "default"}}


def test_stream_exception_event_and_broken_stream(replay: Replay) -> None:
    url = f"http://127.0.0.1:{replay.server_address[1]}"
    replay.frames = [
        eventstream.event(*STREAM_EVENTS[0]),
        eventstream.exception("throttlingException", "Too many tokens"),
    ]
    with pytest.raises(ModelError) as ei:
        complete(BedrockAdapter(client(url)), request("bedrock", [user("x")]))
    assert (ei.value.reason, ei.value.outcome, ei.value.retryable) == ("rate_limited", "failed", True)
    replay.frames = [
        eventstream.event(*STREAM_EVENTS[0]),
        eventstream.exception("modelStreamErrorException", "broke"),
    ]
    with pytest.raises(ModelError) as ei:
        complete(BedrockAdapter(client(url)), request("bedrock", [user("x")]))
    assert ei.value.reason == "server_error"
    replay.frames, replay.cut = [eventstream.event(n, b) for n, b in STREAM_EVENTS[:5]], True
    with pytest.raises(ModelError) as ei:
        complete(BedrockAdapter(client(url)), request("bedrock", [user("x")]))
    assert (ei.value.reason, ei.value.outcome, ei.value.billing) == ("stream_broken", "unknown", "unknown")
    replay.cut = False  # a clean end without messageStop is a lost answer too
    with pytest.raises(ModelError) as ei:
        complete(BedrockAdapter(client(url)), request("bedrock", [user("x")]))
    assert ei.value.reason == "stream_broken"


def test_connect_failure_is_not_sent() -> None:
    with pytest.raises(ModelError) as ei:
        complete(BedrockAdapter(client("http://127.0.0.1:9")), request("bedrock", [user("x")]))
    assert (ei.value.outcome, ei.value.billing, ei.value.retryable) == ("not_sent", "not_billed", True)
