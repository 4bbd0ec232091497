"""What the model-API fakes share (`models` routes to one module per provider API): the tiny
deterministic "model", the queued failures and the prefix cache (one `FakeState` per server,
behind its lock: handler threads run concurrently), and the HTTP plumbing — a JSON answer, a
chunked stream that a `drop` failure cuts mid-way, usage from the request's size."""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .models import FakeServer

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
    stored: dict[str, dict[str, Any]] = field(default_factory=dict)  # OpenAI `store: true` responses
    retrievals: list[str] = field(default_factory=list)  # ids fetched with GET /v1/responses/{id}
    hang_s: float = 30.0  # how long a `hang` failure holds its stream open
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


def texts(blocks: Any) -> str:
    if isinstance(blocks, str):
        return blocks
    out = []
    for b in blocks or []:
        if isinstance(b, dict):
            if isinstance(b.get("text"), str):
                out.append(b["text"])
            elif isinstance(b.get("content"), list | str):
                out.append(texts(b["content"]))
    return "".join(out)


def call_id(body: bytes, prefix: str) -> str:
    """An id that is a function of the request (a retried request gets the same one)."""
    return prefix + hashlib.sha256(body).hexdigest()[:24]


def pieces(text: str, size: int = 8) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def has_key(value: Any, key: str) -> bool:
    if isinstance(value, dict):
        return key in value or any(has_key(v, key) for v in value.values())
    if isinstance(value, list):
        return any(has_key(v, key) for v in value)
    return False


# ------------------------------------------------------------------ HTTP plumbing


class FakeHandler(BaseHTTPRequestHandler):
    """The answers a provider module sends through (`send_json`, `send_stream`) and the usage it reports."""

    protocol_version = "HTTP/1.1"
    server: FakeServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    def send_json(self, status: int, value: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def send_stream(
        self, content_type: str, chunks: Iterable[bytes], drop: bool, hang_after: int | None = None
    ) -> None:
        """`drop`: cut half way and close. `hang_after`: send that many chunks, then hold the
        connection open without a word for `hang_s` (an answer still in flight when the client
        dies), and close it unterminated."""
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        chunks = list(chunks)
        if hang_after is not None:
            for c in chunks[:hang_after]:
                self.wfile.write(f"{len(c):x}\r\n".encode() + c + b"\r\n")
                self.wfile.flush()
            time.sleep(self.server.state.hang_s)
            self.close_connection = True
            return
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

    def usage(self, raw: bytes, prefix: str | None) -> dict[str, int]:
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
