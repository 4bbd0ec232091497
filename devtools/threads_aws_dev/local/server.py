"""The local gateway's HTTP server: uvicorn (h11) serving `asgi.GatewayApp`, in a thread.

`make_server` binds the socket itself (port 0 picks a free one, known before serving) with a
listen backlog of BACKLOG; `serve_in_thread` runs uvicorn's event loop on it; `shutdown` stops
accepting, lets requests in flight finish for up to GRACE_S, and returns.

uvicorn closes an idle keep-alive connection, but has no timeout before the first request or
while its head trickles in: `_Protocol` arms the same timer when a connection opens and keeps it
armed while a request head is incomplete, counted from when that head began (not from the last
chunk), so a client that connects and sends nothing, or a header line every few seconds
(slowloris), is dropped `read_timeout` after it started. A head over API Gateway's 10,240 bytes
is answered by `asgi` (413, as deployed); one over MAX_HEAD_BYTES never completes in h11 and is
the 400 below. A request h11 cannot parse (a
Content-Length of -1 or "abc", a bad chunk size) is answered at once with 400 and the contract's
ErrorBody, and the connection closed.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from .asgi import READ_TIMEOUT_S, GatewayApp, error_body
from .gateway import Gateway

BACKLOG = 1024
GRACE_S = 5
MAX_HEAD_BYTES = 64 * 1024  # h11's buffer for one head; API Gateway's own limit (10 KB) is asgi's


class _Protocol(H11Protocol):
    read_timeout: float = READ_TIMEOUT_S
    _head_since: float | None = None  # when the request head now awaited began (None: not awaited)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_since = self.loop.time()
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.cycle is None or self.cycle.response_complete:  # still no complete request head
            if self._head_since is None:  # the first bytes of the next head on this connection
                self._head_since = self.loop.time()
            if not self.transport.is_closing():
                self._arm()
        else:
            self._head_since = None

    def _arm(self) -> None:
        # The deadline counts from when the head began, never from the latest chunk: a client
        # sending a header line every few seconds is dropped read_timeout after it started.
        self._unset_keepalive_if_required()
        since = self._head_since if self._head_since is not None else self.loop.time()
        left = max(0.0, since + self.read_timeout - self.loop.time())
        self.timeout_keep_alive_task = self.loop.call_later(left, self.timeout_keep_alive_handler)

    def send_400_response(self, msg: str) -> None:
        body = error_body("invalid_request", f"not a valid HTTP request: {msg}")
        headers = [(b"content-type", b"application/json"), (b"connection", b"close")]
        for event in (
            h11.Response(status_code=400, headers=[*headers, (b"content-length", str(len(body)).encode())]),
            h11.Data(data=body),
            h11.EndOfMessage(),
        ):
            self.transport.write(self.conn.send(event))
        self.transport.close()


class LocalServer:
    """The running server: `server_address`, `shutdown()`, `server_close()` (as the stdlib's)."""

    def __init__(self, gateway: Gateway, host: str, port: int, *, read_timeout: float) -> None:
        self.socket = socket.create_server((host, port), backlog=BACKLOG, reuse_port=False)
        self.server_address: tuple[str, int] = self.socket.getsockname()[:2]
        protocol = type("GatewayProtocol", (_Protocol,), {"read_timeout": read_timeout})
        config = uvicorn.Config(
            GatewayApp(gateway, read_timeout=read_timeout),
            http=protocol,
            lifespan="on",
            log_config=None,
            access_log=False,
            backlog=BACKLOG,
            timeout_keep_alive=5,
            h11_max_incomplete_event_size=MAX_HEAD_BYTES,
            timeout_graceful_shutdown=GRACE_S,
            server_header=False,
            date_header=True,
        )
        self.uvicorn = uvicorn.Server(config)
        self.thread: threading.Thread | None = None

    def serve_forever(self) -> None:
        self.uvicorn.run(sockets=[self.socket])

    def shutdown(self) -> None:
        self.uvicorn.should_exit = True
        if self.thread is not None:
            self.thread.join(GRACE_S + 5)

    def server_close(self) -> None:
        self.socket.close()

    @property
    def started(self) -> bool:
        return bool(self.uvicorn.started)


def make_server(
    gateway: Gateway, host: str = "127.0.0.1", port: int = 0, *, read_timeout: float = READ_TIMEOUT_S
) -> LocalServer:
    return LocalServer(gateway, host, port, read_timeout=read_timeout)


def serve_in_thread(server: LocalServer, *, wait_s: float = 10.0) -> threading.Thread:
    """Serve on a daemon thread; returns once uvicorn accepts connections."""
    t = threading.Thread(target=server.serve_forever, name="gateway", daemon=True)
    server.thread = t
    t.start()
    deadline = threading.Event()
    for _ in range(int(wait_s * 100)):
        if server.started or not t.is_alive():
            break
        deadline.wait(0.01)
    return t


__all__: list[Any] = ["LocalServer", "make_server", "serve_in_thread"]
