"""The only module that talks to MCP servers (the official `mcp` SDK, streamable HTTP).

Connections are per step: `McpConnections` opens a server's connection on its first use in a
step (the SDK's `Client` over `streamable_http_client`: the protocol handshake, then the
requests) and `close()` at the step's end closes them all; nothing is held across Lambda
invocations. The SDK is async and the worker is not: one event loop runs in a thread of this
step, one task per server holds its `Client` open (anyio's cancel scopes must be entered and
left by the same task) and runs the step's requests to that server one at a time.

What a failure means (the callers map it to the effect rules):
- the connection could not be opened (refused, handshake failed, headers' secrets missing):
  `McpNotSent` - no tool request left this process;
- a request failed after it was written (the server went away, the read timed out, the answer
  was not a valid result): `McpLost(reason)` with `timeout` or `transport_error` - the server may
  have run it; except a fresh TCP connect the request never got through (`McpNotSent`);
- the server answered with a JSON-RPC error (unknown tool, invalid arguments): `McpRefused` -
  an answer, so the tool did not run.

`import mcp` costs several times `import boto3` (it loads starlette, uvicorn and cryptography;
`benchmarks/tool_calls.py` prints it): it happens on a worker container's first MCP connection,
never at import time and never on an API handler's path.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

CONNECT_TIMEOUT_S = 10.0
CLOSE_TIMEOUT_S = 5.0
MAX_LIST_PAGES = 20


class McpNotSent(Exception):
    """Nothing reached the server (no connection)."""


class McpLost(Exception):
    """The request may have reached the server; its answer is lost."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


class McpRefused(Exception):
    """The server answered the request with a JSON-RPC error."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"MCP error {code}: {message}")
        self.code = code


@dataclass(frozen=True)
class Endpoint:
    """Where a server is and how to reach it (its header values resolved from secrets)."""

    name: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    timeout_ms: int = 60_000


Op = Callable[[Any], Awaitable[Any]]


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for e in exc.exceptions for leaf in _leaves(e)]
    cause = exc.__cause__ or exc.__context__
    return [exc, *(_leaves(cause) if cause is not None and cause is not exc else [])]


def classify(exc: BaseException) -> Exception:
    """A failed request's exception as McpNotSent / McpLost / McpRefused."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

    leaves = _leaves(exc)
    for e in leaves:
        if isinstance(e, MCPError):
            if e.code == REQUEST_TIMEOUT:
                return McpLost("timeout", e.message)
            if e.code == CONNECTION_CLOSED:
                return McpLost("transport_error", e.message)
            return McpRefused(e.code, e.message)
    import httpx2

    if any(isinstance(e, httpx2.ConnectError) for e in leaves):
        return McpNotSent(f"cannot connect: {exc}")  # a new TCP connection failed: nothing sent
    if any(isinstance(e, TimeoutError | httpx2.TimeoutException) for e in leaves):
        return McpLost("timeout", type(exc).__name__)
    return McpLost("transport_error", f"{type(leaves[0]).__name__}: {leaves[0]}")


class _Conn:
    """One server's connection: a task in the step's loop holding the SDK client open."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self.ops: asyncio.Queue[tuple[Op, concurrent.futures.Future[Any]] | None] | None = None
        self.done: concurrent.futures.Future[None] | None = None

    async def hold(self) -> None:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        self.ops = asyncio.Queue()
        current: concurrent.futures.Future[Any] | None = None
        ep = self.endpoint
        read_s = ep.timeout_ms / 1000
        timeout = httpx2.Timeout(CONNECT_TIMEOUT_S, read=read_s + 5)  # the SDK's own timeout first
        try:
            async with httpx2.AsyncClient(headers=dict(ep.headers), timeout=timeout) as http:
                transport = streamable_http_client(ep.url, http_client=http)
                client = Client(transport, read_timeout_seconds=read_s, cache=None)
                try:
                    async with asyncio.timeout(CONNECT_TIMEOUT_S):
                        await client.__aenter__()
                except BaseException as exc:
                    raise McpNotSent(f"{ep.name}: cannot open the MCP session ({exc!r})") from exc
                try:
                    self.ready.set_result(None)
                    while (item := await self.ops.get()) is not None:
                        op, current = item
                        try:
                            current.set_result(await op(client))
                        except Exception as exc:  # noqa: BLE001 - the caller classifies it
                            current.set_exception(classify(exc))
                        current = None
                finally:
                    await client.__aexit__(None, None, None)
        except BaseException as exc:  # the transport's task group failed, or the open did
            err = exc if isinstance(exc, McpNotSent) else classify(exc)
            if not self.ready.done():
                self.ready.set_exception(err if isinstance(err, McpNotSent) else McpNotSent(str(err)))
            if current is not None and not current.done():
                current.set_exception(err)
            while not self.ops.empty():
                pending = self.ops.get_nowait()
                if pending is not None:
                    pending[1].set_exception(McpNotSent(f"{ep.name}: the connection closed"))
            if not isinstance(exc, Exception):
                raise


class McpConnections:
    """A step's MCP connections (opened on first use, all closed by `close`)."""

    def __init__(self) -> None:
        self._conns: dict[str, _Conn] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        #: requests sent, per server (benchmarks/tool_calls.py counts them)
        self.requests: dict[str, int] = {}

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=loop.run_forever, name="mcp-step", daemon=True)
            self._thread.start()
            self._loop = loop
        return self._loop

    def _open(self, endpoint: Endpoint) -> _Conn:
        conn = self._conns.get(endpoint.name)
        if conn is not None and conn.ready.done() and conn.ready.exception() is None:
            if conn.done is None or not conn.done.done():
                return conn
        loop = self._ensure_loop()
        conn = _Conn(endpoint)
        self._conns[endpoint.name] = conn
        conn.done = asyncio.run_coroutine_threadsafe(conn.hold(), loop)
        try:
            conn.ready.result(timeout=CONNECT_TIMEOUT_S + 2)
        except concurrent.futures.TimeoutError:
            raise McpNotSent(f"{endpoint.name}: no MCP session within {CONNECT_TIMEOUT_S:.0f} s") from None
        except McpNotSent:
            del self._conns[endpoint.name]
            raise
        return conn

    def request(self, endpoint: Endpoint, op: Op) -> Any:
        """Run `op(client)` on the server's connection (opened if needed) and return its value;
        raises McpNotSent, McpLost or McpRefused."""
        conn = self._open(endpoint)
        fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
        assert self._loop is not None and conn.ops is not None
        self.requests[endpoint.name] = self.requests.get(endpoint.name, 0) + 1
        self._loop.call_soon_threadsafe(conn.ops.put_nowait, (op, fut))
        try:
            return fut.result(timeout=endpoint.timeout_ms / 1000 + CONNECT_TIMEOUT_S)
        except concurrent.futures.TimeoutError:
            raise McpLost("timeout", "no answer in time") from None

    def list_tools(self, endpoint: Endpoint) -> list[dict[str, Any]]:
        """The server's tools, every page, as MCP wire dicts (name, description, inputSchema,
        annotations)."""

        async def op(client: Any) -> list[dict[str, Any]]:
            out: list[dict[str, Any]] = []
            cursor = None
            for _ in range(MAX_LIST_PAGES):
                page = await client.list_tools(cursor=cursor)
                out += [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in page.tools]
                cursor = page.next_cursor
                if not cursor:
                    break
            return out

        result: list[dict[str, Any]] = self.request(endpoint, op)
        return result

    def call_tool(
        self, endpoint: Endpoint, name: str, args: dict[str, Any], meta: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """One `tools/call` (`meta`: its `_meta`): the result as an MCP wire dict (content,
        structuredContent, isError)."""

        async def op(client: Any) -> dict[str, Any]:
            res = await client.call_tool(name, args, meta=meta)
            out: dict[str, Any] = res.model_dump(mode="json", by_alias=True, exclude_none=True)
            return out

        result: dict[str, Any] = self.request(endpoint, op)
        return result

    def close(self) -> None:
        """End the step's sessions (each task leaves its client: the SDK ends the session)."""
        loop, conns = self._loop, list(self._conns.values())
        self._conns.clear()
        if loop is None:
            return
        for conn in conns:
            if conn.ops is not None:
                loop.call_soon_threadsafe(conn.ops.put_nowait, None)
        for conn in conns:
            if conn.done is not None:
                try:
                    conn.done.result(timeout=CLOSE_TIMEOUT_S)
                except Exception:  # noqa: BLE001 - a broken connection is closed either way
                    conn.done.cancel()
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=CLOSE_TIMEOUT_S)
        if not loop.is_running():
            loop.close()
        self._loop = self._thread = None
