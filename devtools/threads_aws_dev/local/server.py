"""The local gateway's HTTP server: uvicorn (h11) serving `asgi.GatewayApp`, in a thread.

`make_server` binds the socket itself (port 0 picks a free one, known before serving) with a
listen backlog of BACKLOG; `serve_in_thread` runs uvicorn's event loop on it; `shutdown` stops
accepting, lets requests in flight finish for up to GRACE_S, and returns.

uvicorn closes an idle keep-alive connection, but has no timeout before the first request or
while its head trickles in: `_Protocol` arms the same timer when a connection opens and after
every chunk that leaves a request head incomplete, so a client that connects and sends nothing
(or a byte at a time) is dropped after `read_timeout`. A request h11 cannot parse (a
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


class _Protocol(H11Protocol):
    read_timeout: float = READ_TIMEOUT_S

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.cycle is None or self.cycle.response_complete:  # still no complete request head
            if not self.transport.is_closing():
                self._arm()

    def _arm(self) -> None:
        self._unset_keepalive_if_required()
        handler = self.timeout_keep_alive_handler
        self.timeout_keep_alive_task = self.loop.call_later(self.read_timeout, handler)

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
