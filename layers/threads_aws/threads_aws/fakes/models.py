"""A local HTTP fake of the three model APIs (dev and tests only; never in the Lambda path),
written from their public references and reached through the SDKs' base-URL variables:

    ANTHROPIC_BASE_URL=http://127.0.0.1:PORT            POST /v1/messages
    OPENAI_BASE_URL=http://127.0.0.1:PORT/v1            POST /v1/responses, /v1/chat/completions
    AWS_ENDPOINT_URL_BEDROCK_RUNTIME=http://127.0.0.1:PORT
                                                        POST /model/{id}/converse[-stream]

Run it: `python -m threads_aws.fakes.models --port 8788`. Streams are real: SSE for Anthropic
and OpenAI, AWS event-stream frames for Bedrock, sent with chunked transfer encoding (so a
dropped connection is a transport error to the client, as it is in production).

The "model" inside is tiny and deterministic: when the conversation ends with a tool result it
answers `The tool said: <result text>`; when the last user text mentions the time it calls the
`time` tool (`{}`); anything else → `You said: "<text>"`. Usage is bytes/4 of the request, and
the declared prefix (system + tools) reports a cache write the first time and a cache read
after (for Anthropic `cache_control` / Bedrock `cachePoint`; OpenAI caches by itself).

Failure modes, queued per provider (`*` = any) and consumed one per request:
`POST /_fake/fail {"provider","mode","times"?=1,"retry_after_s"?}` with mode
`rate_limited` (429 + retry-after), `overloaded` (529 Anthropic, 503 elsewhere), `server_error`
(500), `prompt_too_long` (each provider's 400), `drop` (a 200 stream cut mid-way). `GET
/_fake/requests` lists the bodies received; `POST /_fake/reset` clears both.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from . import eventstream

TIME_RE = re.compile(r"\btime\b", re.I)


@dataclass
class Failure:
    provider: str
    mode: str
    times: int = 1
    retry_after_s: float | None = None


@dataclass
class FakeState:
    failures: list[Failure] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    prefixes: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take_failure(self, provider: str) -> Failure | None:
        with self.lock:
            for f in self.failures:
                if f.provider in (provider, "*") and f.times > 0:
                    f.times -= 1
                    if f.times == 0:
                        self.failures.remove(f)
                    return f
        return None

    def cache(self, key: str) -> bool:
        """True if this prefix was seen before (a cache read), else remember it (a write)."""
        with self.lock:
            hit = key in self.prefixes
            self.prefixes.add(key)
            return hit


# ------------------------------------------------------------------ the tiny model


def answer(last_user: str | None, last_result: str | None) -> tuple[str, str | None]:
    """(kind, text): ("tool", None) to call `time`, or ("text", the reply)."""
    if last_result is not None:
        return "text", f"The tool said: {last_result}"
    if last_user and TIME_RE.search(last_user):
        return "tool", None
    return "text", f'You said: "{last_user or ""}"'


def _texts(blocks: Any) -> str:
    if isinstance(blocks, str):
        return blocks
    out = []
    for b in blocks or []:
        if isinstance(b, dict):
            if isinstance(b.get("text"), str):
                out.append(b["text"])
            elif isinstance(b.get("content"), list | str):
                out.append(_texts(b["content"]))
    return "".join(out)


def _call_id(body: bytes, prefix: str) -> str:
    return prefix + hashlib.sha256(body).hexdigest()[:24]


# ------------------------------------------------------------------ HTTP


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FakeServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    def do_GET(self) -> None:  # noqa: N802
        if self.path == "/_fake/requests":
            with self.server.state.lock:
                self._json(200, {"requests": list(self.server.state.requests)})
        else:
            self._json(404, {"message": "not found"})

    def do_POST(self) -> None:  # noqa: N802
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = self.path.split("?", 1)[0]
        st = self.server.state
        if path == "/_fake/fail":
            spec = json.loads(raw)
            with st.lock:
                st.failures.append(
                    Failure(
                        spec.get("provider", "*"),
                        spec["mode"],
                        int(spec.get("times", 1)),
                        spec.get("retry_after_s"),
                    )
                )
            return self._json(200, {"ok": True})
        if path == "/_fake/reset":
            with st.lock:
                st.failures.clear()
                st.requests.clear()
                st.prefixes.clear()
            return self._json(200, {"ok": True})
        body = json.loads(raw or b"{}")
        m = re.fullmatch(r"/model/(.+)/(converse|converse-stream)", path)
        if path == "/v1/messages":
            provider = "anthropic"
        elif path in ("/v1/responses", "/v1/chat/completions"):
            provider = "openai"
        elif m:
            provider = "bedrock"
        else:
            return self._json(404, {"message": f"no route {path}"})
        with st.lock:
            st.requests.append({"body": body, "path": path, "provider": provider})
        failure = st.take_failure(provider)
        if failure is not None and failure.mode != "drop":
            return self._fail(provider, failure)
        drop = failure is not None
        if provider == "anthropic":
            self._anthropic(body, raw, drop)
        elif path == "/v1/responses":
            self._responses(body, raw, drop)
        elif path == "/v1/chat/completions":
            self._chat(body, raw, drop)
        else:
            assert m is not None
            self._bedrock(body, raw, m.group(2) == "converse-stream", drop)

    # -- plumbing

    def _json(self, status: int, value: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, content_type: str, chunks: Iterable[bytes], drop: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        chunks = list(chunks)
        if drop:  # cut the stream half way: no terminating chunk, then close the socket
            chunks = chunks[: max(1, len(chunks) // 2)]
        for c in chunks:
            self.wfile.write(f"{len(c):x}\r\n".encode() + c + b"\r\n")
            self.wfile.flush()
        if drop:
            self.close_connection = True
            self.wfile.flush()
            self.connection.shutdown(2)
            return
        self.wfile.write(b"0\r\n\r\n")

    def _fail(self, provider: str, f: Failure) -> None:
        hs = {"retry-after": str(f.retry_after_s)} if f.retry_after_s is not None else {}
        status, value = _failure_body(provider, f.mode)
        if provider == "bedrock":
            hs["x-amzn-ErrorType"] = value["__type"]
        self._json(status, value, hs)

    def _usage(self, raw: bytes, prefix: str | None) -> dict[str, int]:
        """input (uncached), output, cache read/write of the declared prefix."""
        total = len(raw) // 4
        read = write = 0
        if prefix:
            tokens = len(prefix) // 4
            if self.server.state.cache(prefix):
                read = tokens
            else:
                write = tokens
        return {"input": max(0, total - read - write), "output": 12, "read": read, "write": write}

    # -- Anthropic Messages

    def _anthropic(self, body: dict[str, Any], raw: bytes, drop: bool) -> None:
        msgs = body.get("messages") or []
        last = msgs[-1] if msgs else {}
        content = last.get("content")
        blocks: list[Any] = (
            content if isinstance(content, list) else [{"text": str(content or ""), "type": "text"}]
        )
        results = [b for b in blocks if b.get("type") == "tool_result"]
        kind, text = answer(_texts(blocks), _texts(results[-1].get("content")) if results else None)
        cached = _has_key(body.get("system"), "cache_control") or _has_key(body.get("tools"), "cache_control")
        prefix = json.dumps([body.get("system"), body.get("tools")], sort_keys=True) if cached else None
        u = self._usage(raw, prefix)
        usage = {
            "cache_creation_input_tokens": u["write"],
            "cache_read_input_tokens": u["read"],
            "input_tokens": u["input"],
            "output_tokens": u["output"],
        }
        if kind == "tool":
            block: dict[str, Any] = {
                "id": _call_id(raw, "toolu_"),
                "input": {},
                "name": "time",
                "type": "tool_use",
            }
            stop = "tool_use"
        else:
            block = {"text": text, "type": "text"}
            stop = "end_turn"
        msg = {
            "content": [block],
            "id": "msg_" + _call_id(raw, ""),
            "model": body.get("model"),
            "role": "assistant",
            "stop_reason": stop,
            "stop_sequence": None,
            "type": "message",
            "usage": usage,
        }
        if not body.get("stream"):
            return self._json(200, msg)
        start = {**msg, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
        events: list[tuple[str, dict[str, Any]]] = [
            ("message_start", {"message": start, "type": "message_start"})
        ]
        if kind == "tool":
            events.append(
                ("content_block_start", {"content_block": block, "index": 0, "type": "content_block_start"})
            )
            events.append(
                (
                    "content_block_delta",
                    {
                        "delta": {"partial_json": "{}", "type": "input_json_delta"},
                        "index": 0,
                        "type": "content_block_delta",
                    },
                )
            )
        else:
            events.append(
                (
                    "content_block_start",
                    {
                        "content_block": {"text": "", "type": "text"},
                        "index": 0,
                        "type": "content_block_start",
                    },
                )
            )
            events.append(("ping", {"type": "ping"}))
            for piece in _pieces(str(text)):
                events.append(
                    (
                        "content_block_delta",
                        {
                            "delta": {"text": piece, "type": "text_delta"},
                            "index": 0,
                            "type": "content_block_delta",
                        },
                    )
                )
        events.append(("content_block_stop", {"index": 0, "type": "content_block_stop"}))
        events.append(
            (
                "message_delta",
                {
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "type": "message_delta",
                    "usage": {"output_tokens": u["output"]},
                },
            )
        )
        events.append(("message_stop", {"type": "message_stop"}))
        self._stream(
            "text/event-stream", (f"event: {n}\ndata: {json.dumps(d)}\n\n".encode() for n, d in events), drop
        )

    # -- OpenAI Responses

    def _responses(self, body: dict[str, Any], raw: bytes, drop: bool) -> None:
        items = body.get("input") or []
        last = items[-1] if items else {}
        result = last.get("output") if last.get("type") == "function_call_output" else None
        if isinstance(result, list):
            result = _texts(result)
        kind, text = answer(_texts(last.get("content")), result)
        u = self._usage(raw, json.dumps([body.get("instructions"), body.get("tools")], sort_keys=True))
        if kind == "tool":
            item: dict[str, Any] = {
                "arguments": "{}",
                "call_id": _call_id(raw, "call_"),
                "id": _call_id(raw, "fc_"),
                "name": "time",
                "status": "completed",
                "type": "function_call",
            }
        else:
            item = {
                "content": [{"annotations": [], "text": text, "type": "output_text"}],
                "id": _call_id(raw, "msg_"),
                "role": "assistant",
                "status": "completed",
                "type": "message",
            }
        usage = {
            "input_tokens": u["input"] + u["read"] + u["write"],
            "input_tokens_details": {"cached_tokens": u["read"]},
            "output_tokens": u["output"],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": u["input"] + u["read"] + u["write"] + u["output"],
        }
        resp = {
            "created_at": int(time.time()),
            "id": _call_id(raw, "resp_"),
            "model": body.get("model"),
            "object": "response",
            "output": [item],
            "parallel_tool_calls": True,
            "status": "completed",
            "tool_choice": "auto",
            "tools": [],
            "usage": usage,
        }
        if not body.get("stream"):
            return self._json(200, resp)
        seq = iter(range(1_000_000))
        events: list[dict[str, Any]] = [
            {
                "response": {**resp, "output": [], "status": "in_progress", "usage": None},
                "type": "response.created",
            }
        ]
        events.append(
            {
                "item": {**item, "status": "in_progress"},
                "output_index": 0,
                "type": "response.output_item.added",
            }
        )
        if kind == "text":
            for piece in _pieces(str(text)):
                events.append(
                    {
                        "content_index": 0,
                        "delta": piece,
                        "item_id": item["id"],
                        "logprobs": [],
                        "output_index": 0,
                        "type": "response.output_text.delta",
                    }
                )
        else:
            events.append(
                {
                    "delta": "{}",
                    "item_id": item["id"],
                    "output_index": 0,
                    "type": "response.function_call_arguments.delta",
                }
            )
        events.append({"item": item, "output_index": 0, "type": "response.output_item.done"})
        events.append({"response": resp, "type": "response.completed"})
        self._stream(
            "text/event-stream",
            (
                f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': next(seq)})}\n\n".encode()
                for e in events
            ),
            drop,
        )

    # -- OpenAI Chat Completions

    def _chat(self, body: dict[str, Any], raw: bytes, drop: bool) -> None:
        msgs = body.get("messages") or []
        last = msgs[-1] if msgs else {}
        result = _texts(last.get("content")) if last.get("role") == "tool" else None
        kind, text = answer(_texts(last.get("content")), result)
        u = self._usage(raw, None)
        usage = {
            "completion_tokens": u["output"],
            "prompt_tokens": u["input"],
            "prompt_tokens_details": {"cached_tokens": 0},
            "total_tokens": u["input"] + u["output"],
        }
        base = {"created": int(time.time()), "id": _call_id(raw, "chatcmpl-"), "model": body.get("model")}
        call = {
            "function": {"arguments": "{}", "name": "time"},
            "id": _call_id(raw, "call_"),
            "type": "function",
        }
        if not body.get("stream"):
            message: dict[str, Any] = {"content": None if kind == "tool" else text, "role": "assistant"}
            if kind == "tool":
                message["tool_calls"] = [call]
            finish = "tool_calls" if kind == "tool" else "stop"
            return self._json(
                200,
                {
                    **base,
                    "choices": [{"finish_reason": finish, "index": 0, "message": message}],
                    "object": "chat.completion",
                    "usage": usage,
                },
            )
        chunks: list[dict[str, Any]] = [
            {"choices": [{"delta": {"content": "", "role": "assistant"}, "finish_reason": None, "index": 0}]}
        ]
        if kind == "tool":
            chunks.append(
                {
                    "choices": [
                        {"delta": {"tool_calls": [{**call, "index": 0}]}, "finish_reason": None, "index": 0}
                    ]
                }
            )
            chunks.append({"choices": [{"delta": {}, "finish_reason": "tool_calls", "index": 0}]})
        else:
            for piece in _pieces(str(text)):
                chunks.append({"choices": [{"delta": {"content": piece}, "finish_reason": None, "index": 0}]})
            chunks.append({"choices": [{"delta": {}, "finish_reason": "stop", "index": 0}]})
        chunks.append({"choices": [], "usage": usage})
        lines = [
            f"data: {json.dumps({**base, 'object': 'chat.completion.chunk', **c})}\n\n".encode()
            for c in chunks
        ]
        self._stream("text/event-stream", [*lines, b"data: [DONE]\n\n"], drop)

    # -- Bedrock Converse

    def _bedrock(self, body: dict[str, Any], raw: bytes, stream: bool, drop: bool) -> None:
        msgs = body.get("messages") or []
        blocks = (msgs[-1] if msgs else {}).get("content") or []
        results = [b["toolResult"] for b in blocks if "toolResult" in b]
        user = "".join(b.get("text", "") for b in blocks if "text" in b)
        kind, text = answer(user, _texts(results[-1].get("content")) if results else None)
        cached = _has_key(body.get("system"), "cachePoint") or _has_key(body.get("toolConfig"), "cachePoint")
        prefix = json.dumps([body.get("system"), body.get("toolConfig")], sort_keys=True) if cached else None
        u = self._usage(raw, prefix)
        usage: dict[str, int] = {
            "inputTokens": u["input"],
            "outputTokens": u["output"],
            "totalTokens": u["input"] + u["output"] + u["read"] + u["write"],
        }
        if cached:
            usage.update(cacheReadInputTokens=u["read"], cacheWriteInputTokens=u["write"])
        tool_id = _call_id(raw, "tooluse_")
        stop = "tool_use" if kind == "tool" else "end_turn"
        if not stream:
            block = (
                {"toolUse": {"input": {}, "name": "time", "toolUseId": tool_id}}
                if kind == "tool"
                else {"text": text}
            )
            out = {
                "metrics": {"latencyMs": 5},
                "output": {"message": {"content": [block], "role": "assistant"}},
                "stopReason": stop,
                "usage": usage,
            }
            return self._json(200, out)
        evs = [eventstream.event("messageStart", {"role": "assistant"})]
        if kind == "tool":
            evs.append(
                eventstream.event(
                    "contentBlockStart",
                    {"contentBlockIndex": 0, "start": {"toolUse": {"name": "time", "toolUseId": tool_id}}},
                )
            )
            evs.append(
                eventstream.event(
                    "contentBlockDelta", {"contentBlockIndex": 0, "delta": {"toolUse": {"input": "{}"}}}
                )
            )
        else:
            for piece in _pieces(str(text)):
                evs.append(
                    eventstream.event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": piece}})
                )
        evs.append(eventstream.event("contentBlockStop", {"contentBlockIndex": 0}))
        evs.append(eventstream.event("messageStop", {"stopReason": stop}))
        evs.append(eventstream.event("metadata", {"metrics": {"latencyMs": 5}, "usage": usage}))
        self._stream("application/vnd.amazon.eventstream", evs, drop)


def _pieces(text: str, size: int = 8) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _has_key(value: Any, key: str) -> bool:
    if isinstance(value, dict):
        return key in value or any(_has_key(v, key) for v in value.values())
    if isinstance(value, list):
        return any(_has_key(v, key) for v in value)
    return False


def _failure_body(provider: str, mode: str) -> tuple[int, dict[str, Any]]:
    if provider == "anthropic":
        status, kind, msg = {
            "rate_limited": (
                429,
                "rate_limit_error",
                "Number of request tokens has exceeded your rate limit.",
            ),
            "overloaded": (529, "overloaded_error", "Overloaded"),
            "server_error": (500, "api_error", "Internal server error"),
            "prompt_too_long": (
                400,
                "invalid_request_error",
                "prompt is too long: 208656 tokens > 200000 maximum",
            ),
        }[mode]
        return status, {"error": {"message": msg, "type": kind}, "request_id": "req_fake", "type": "error"}
    if provider == "openai":
        status, kind, code, msg = {
            "rate_limited": (429, "requests", "rate_limit_exceeded", "Rate limit reached for requests"),
            "overloaded": (
                503,
                "server_error",
                None,
                "The engine is currently overloaded, please try again later",
            ),
            "server_error": (
                500,
                "server_error",
                None,
                "The server had an error while processing your request.",
            ),
            "prompt_too_long": (
                400,
                "invalid_request_error",
                "context_length_exceeded",
                "Your input exceeds the context window of this model.",
            ),
        }[mode]
        return status, {"error": {"code": code, "message": msg, "param": None, "type": kind}}
    status, kind, msg = {
        "rate_limited": (429, "ThrottlingException", "Too many requests, please wait before trying again."),
        "overloaded": (
            503,
            "ServiceUnavailableException",
            "The service is temporarily unable to handle the request.",
        ),
        "server_error": (500, "InternalServerException", "The server encountered an internal error."),
        "prompt_too_long": (400, "ValidationException", "Input is too long for requested model."),
    }[mode]
    return status, {"__type": kind, "message": msg}


class FakeServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__((host, port), Handler)
        self.state = FakeState()
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def env(self) -> dict[str, str]:
        """The variables that point each SDK here (with dummy keys)."""
        return {
            "ANTHROPIC_API_KEY": "sk-ant-fake",
            "ANTHROPIC_BASE_URL": self.url,
            "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": self.url,
            "OPENAI_API_KEY": "sk-fake",
            "OPENAI_BASE_URL": self.url + "/v1",
        }

    def fail(self, provider: str, mode: str, times: int = 1, retry_after_s: float | None = None) -> None:
        with self.state.lock:
            self.state.failures.append(Failure(provider, mode, times, retry_after_s))

    def start(self) -> FakeServer:
        self._thread = threading.Thread(target=self.serve_forever, name="fake-models", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=8788)
    args = ap.parse_args(argv)
    server = FakeServer(port=args.port)
    print(f"ready {server.url}", flush=True)
    for k, v in server.env().items():
        print(f"export {k}={v}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
