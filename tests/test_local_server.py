"""The local gateway's HTTP server (uvicorn serving local.asgi) survives ordinary clients: 20
parallel connections, chunked bodies, a bad Content-Length answered 400 at once, clients that
stall (before or inside a request) dropped or answered 408, an 11 MB body drained and answered
413, HEAD."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from threads_aws_dev.local.gateway import MAX_REQUEST, Gateway, make_server, serve_in_thread
from threads_aws_dev.local.runtime import Handlers
from threads_aws_dev.local.sam import parse_template

READ_TIMEOUT = 0.5


@pytest.fixture
def url(fixture_template: Path) -> Iterator[str]:  # noqa: F811 - the imported fixture
    tpl = parse_template(fixture_template)
    server = make_server(Gateway(tpl, Handlers(tpl.functions)), "127.0.0.1", 0, read_timeout=READ_TIMEOUT)
    serve_in_thread(server)
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def raw_request(url: str, data: bytes, *, wait: float = 5.0) -> bytes:
    """Send raw bytes, return everything the server sends until it closes (or `wait` passes)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=wait) as s:
        s.sendall(data)
        out = b""
        try:
            while chunk := s.recv(65536):
                out += chunk
        except TimeoutError:
            pass
        return out


def status_and_body(raw: bytes) -> tuple[int, Any]:
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body) if body.startswith(b"{") else body


def test_twenty_parallel_connections_are_all_answered(url: str) -> None:
    results: list[int] = []
    lock = threading.Lock()

    def one() -> None:
        req = urllib.request.Request(f"{url}/things/1", headers={"Authorization": "Bearer good"})
        with urllib.request.urlopen(req, timeout=20) as r:
            r.read()
            with lock:
                results.append(r.status)

    threads = [threading.Thread(target=one) for _ in range(20)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert results == [200] * 20
    assert time.monotonic() - started < 15


def test_chunked_request_body(url: str) -> None:
    body = b'{"chunked":true}'
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in (body[:5], body[5:]) if p) + b"0\r\n\r\n"
    raw = raw_request(
        url,
        b"POST /things HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer good\r\n"
        b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + chunks,
    )
    status, out = status_and_body(raw)
    assert status == 200 and out["event"]["body"] == body.decode()
    assert out["event"]["headers"]["Authorization"] == "Bearer good"  # the case clients send


@pytest.mark.parametrize("length", [b"-1", b"abc", b"1, 2"])
def test_a_bad_content_length_is_400_at_once(url: str, length: bytes) -> None:
    started = time.monotonic()
    raw = raw_request(url, b"POST /things HTTP/1.1\r\nHost: x\r\nContent-Length: " + length + b"\r\n\r\n{}")
    status, out = status_and_body(raw)
    assert status == 400 and out["error"]["code"] == "invalid_request", raw
    assert time.monotonic() - started < READ_TIMEOUT  # answered, not timed out


def test_a_silent_client_is_dropped(url: str) -> None:
    started = time.monotonic()
    assert raw_request(url, b"", wait=10) == b""  # the server closed the connection
    assert READ_TIMEOUT * 0.8 < time.monotonic() - started < 5


def test_a_trickling_request_head_is_dropped(url: str) -> None:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        started = time.monotonic()
        for part in (b"GET /health", b" HTTP/1.1\r\n", b"Host: x\r\n"):
            s.sendall(part)
            time.sleep(READ_TIMEOUT / 2)
        assert s.recv(100) == b""
        assert time.monotonic() - started < 5


def test_a_header_trickle_is_dropped_read_timeout_after_the_head_began(url: str) -> None:
    # slowloris: each header line well inside the read timeout, the head never finished. The
    # deadline counts from the head's first byte, so the server closes long before 40 lines.
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        sent = 0
        try:
            for _ in range(40):
                time.sleep(READ_TIMEOUT / 4)
                s.sendall(b"X-Slow: a\r\n")
                sent += 1
            s.settimeout(READ_TIMEOUT * 4)
            closed = s.recv(100) == b""
        except (BrokenPipeError, ConnectionResetError):
            closed = True
        assert closed and sent < 40, sent


@pytest.mark.parametrize("extra, status", [(10_240, 413), (9_000, 404)])
def test_a_head_over_api_gateway_s_10_kb_is_413(url: str, extra: int, status: int) -> None:
    # API Gateway (REST): request line + header values at most 10,240 bytes, refused as a
    # request too large; just under it the request is routed (/health has GET only: 404 for HEAD
    # in the fixture, here a GET of an unknown path).
    raw = raw_request(
        url, b"GET /nothing HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * extra + b"\r\nConnection: close\r\n\r\n"
    )
    assert status_and_body(raw)[0] == status, raw[:200]
    if status == 413:
        assert b"RequestTooLargeException" in raw


def test_a_stalled_body_is_408(url: str) -> None:
    raw = raw_request(
        url, b"POST /things HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer good\r\nContent-Length: 10\r\n\r\n{}"
    )
    status, out = status_and_body(raw)
    assert status == 408 and out["error"]["code"] == "timeout"


def test_a_body_over_10_mb_is_read_and_answered_413(url: str) -> None:
    req = urllib.request.Request(f"{url}/things", data=b"x" * (MAX_REQUEST + 1), method="POST")
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(req, timeout=30)
    assert exc.value.code == 413
    assert exc.value.headers["x-amzn-ErrorType"] == "RequestTooLargeException"
    # chunked, so the size is known only while reading
    chunk = b"y" * (1 << 20)
    raw = raw_request(
        url,
        b"POST /things HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        + (b"%x\r\n%s\r\n" % (len(chunk), chunk)) * 11
        + b"0\r\n\r\n",
        wait=30,
    )
    assert status_and_body(raw)[0] == 413


def test_head_and_keep_alive(url: str) -> None:
    raw = raw_request(
        url,
        b"HEAD /health HTTP/1.1\r\nHost: x\r\n\r\n"
        b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    first, _, rest = raw.partition(b"\r\n\r\n")
    # API Gateway routes HEAD like any method: /health has GET only (the fixture's 404 for no route)
    assert first.startswith(b"HTTP/1.1 404") and b"content-length: 56" in first.lower()
    assert rest.startswith(b"HTTP/1.1 200")  # the HEAD sent no body: the next response follows
