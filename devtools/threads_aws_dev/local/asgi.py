"""The local gateway as an ASGI application, served by uvicorn (`local.server`).

HTTP parsing (chunked bodies, a bad Content-Length, pipelining, keep-alive) is uvicorn's and
h11's; this app only turns one ASGI request into a `gateway.Request`, runs `Gateway.handle` in a
thread pool (handlers are synchronous and an SSE window holds its thread for up to its wait), and
sends the buffered response. Bounds a client cannot outlast:

- the head: a request line plus header values over API Gateway's 10,240 bytes is answered
  REQUEST_TOO_LARGE (413), the body drained first as below;
- the body: over API Gateway's 10 MB it is drained (up to DRAIN_LIMIT, so the client reads the
  answer rather than a reset) and answered REQUEST_TOO_LARGE by the gateway;
- time: a body whose next chunk takes longer than `read_timeout` is answered 408 and the
  connection closed (the idle and header-phase timeouts are the protocol's, `local.server`).

ASGI hands header names lower-cased; API Gateway passes the case the client sent, which for the
usual HTTP/1.1 client is Title-Case, so names are title-cased again for the proxy event.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson

from .gateway import MAX_REQUEST, Gateway, Request, Response, StreamedResponse

log = logging.getLogger("threads_aws_dev.local")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

DRAIN_LIMIT = 64 * 1024 * 1024
# API Gateway (REST) quota: "total combined size of request line and header values", 10,240 bytes,
# not adjustable. Over it the request never reaches an authorizer or integration; it is refused
# as a request too large (REQUEST_TOO_LARGE, 413: our template's too_large ErrorBody).
MAX_HEAD = 10_240
READ_TIMEOUT_S = 30.0
THREADS = 64  # concurrent requests in handlers (SSE windows hold one each)
_HOP = {b"content-length", b"connection", b"transfer-encoding", b"keep-alive"}


def _title(name: str) -> str:
    return "-".join(p[:1].upper() + p[1:] for p in name.split("-"))


def head_size(scope: Scope) -> int:
    """The request line plus the header values, as API Gateway's quota counts them."""
    target = scope.get("raw_path", scope["path"].encode())
    if scope.get("query_string"):
        target += b"?" + scope["query_string"]
    line = len(scope["method"]) + 1 + len(target) + len(" HTTP/") + len(scope.get("http_version", "1.1"))
    return line + sum(len(v) for _, v in scope["headers"])


def error_body(code: str, message: str) -> bytes:
    return orjson.dumps({"error": {"code": code, "message": message}})


class GatewayApp:
    """ASGI callable: `uvicorn.Server(uvicorn.Config(GatewayApp(gateway), ...))`."""

    def __init__(self, gateway: Gateway, *, read_timeout: float = READ_TIMEOUT_S, threads: int = THREADS):
        self.gateway = gateway
        self.read_timeout = read_timeout
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="gateway")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    self.pool.shutdown(wait=False, cancel_futures=True)
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":  # pragma: no cover - no websockets here
            return
        started = time.monotonic()
        method = scope["method"]
        path = scope.get("raw_path", scope["path"].encode()).decode("latin-1")
        query = scope.get("query_string", b"").decode("latin-1")
        try:
            body, too_large = await self._body(receive)
        except TimeoutError:
            await self._send(
                send,
                408,
                [("Content-Type", "application/json"), ("Connection", "close")],
                error_body("timeout", f"no request body data for {self.read_timeout:g} s"),
            )
            return
        except ConnectionResetError:
            return  # the client went away mid-body
        if too_large or head_size(scope) > MAX_HEAD:
            resp = self.gateway.reject("REQUEST_TOO_LARGE", Request(method, path, query))
            resp.headers.append(("Connection", "close"))
        else:
            headers = [(_title(k.decode("latin-1")), v.decode("latin-1")) for k, v in scope["headers"]]
            client = scope.get("client") or ("127.0.0.1", 0)
            req = Request(method, path, query, headers, body, client[0])
            loop = asyncio.get_running_loop()
            resp = await loop.run_in_executor(self.pool, self.gateway.handle, req)
            if isinstance(resp, StreamedResponse):  # a streaming route's app has the connection
                if await resp.stream.serve(receive, send):
                    log.info("%s %s streamed %dms", method, path, (time.monotonic() - started) * 1000)
                    return
                resp = self.gateway.reject("DEFAULT_5XX", req)
        await self._send(send, resp.status, resp.headers, b"" if method == "HEAD" else resp.body, resp)
        log.info(
            "%s %s %d %dms",
            method,
            path + ("?" + query if query else ""),
            resp.status,
            (time.monotonic() - started) * 1000,
        )

    async def _body(self, receive: Receive) -> tuple[bytes, bool]:
        """The request body, or (b"", True) once it passed MAX_REQUEST (drained up to DRAIN_LIMIT)."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await asyncio.wait_for(receive(), self.read_timeout)
            if message["type"] == "http.disconnect":
                raise ConnectionResetError
            chunk = message.get("body", b"")
            size += len(chunk)
            if size <= MAX_REQUEST:
                chunks.append(chunk)
            else:
                chunks.clear()
            if not message.get("more_body", False) or size > DRAIN_LIMIT:
                return (b"".join(chunks), False) if size <= MAX_REQUEST else (b"", True)

    @staticmethod
    async def _send(
        send: Send, status: int, headers: list[tuple[str, str]], body: bytes, resp: Response | None = None
    ) -> None:
        # The case the handler gave (as API Gateway passes it on); hop-by-hop headers are ours.
        raw = [
            (k.encode("latin-1", "replace"), v.encode("latin-1", "replace"))
            for k, v in headers
            if k.lower().encode("latin-1", "replace") not in _HOP or k.lower() == "connection"
        ]
        length = len(resp.body) if resp is not None else len(body)
        raw.append((b"Content-Length", str(length).encode()))
        await send({"type": "http.response.start", "status": status, "headers": raw})
        await send({"type": "http.response.body", "body": body})
