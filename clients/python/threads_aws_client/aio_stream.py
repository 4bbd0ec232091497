"""The asyncio client's run streams, `AsyncRunStream` and `AsyncEventStream`: `sync_stream`'s
streams and connection loop for asyncio."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from typing import TYPE_CHECKING, Any, cast

import httpx
from httpx_sse import aconnect_sse

from ._streams import EventFollow, RunFollow, StreamState
from .types import RunOutcome, StreamMessage

if TYPE_CHECKING:
    from .aio import AsyncClient


class AsyncRunStream(RunFollow["AsyncClient"], AsyncIterator[StreamMessage]):
    """`RunStream` for asyncio: `async for msg in stream`, then `stream.result`
    (or `await stream.wait()`)."""

    _gen: AsyncGenerator[StreamMessage, None]

    def _open(self) -> AsyncGenerator[StreamMessage, None]:
        return self._messages()

    def __aiter__(self) -> AsyncRunStream:
        return self

    async def __anext__(self) -> StreamMessage:
        return await self._gen.__anext__()

    async def __aenter__(self) -> AsyncRunStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._gen.aclose()

    async def wait(self) -> RunOutcome:
        async for _ in self._gen:
            pass
        assert self.result is not None
        return self.result

    async def _messages(self) -> AsyncGenerator[StreamMessage, None]:
        async for msg in _follow(self._client, self._state):
            yield msg


class AsyncEventStream(EventFollow["AsyncClient"], AsyncIterator[dict[str, Any]]):
    """`EventStream` (craze or AG-UI events) for asyncio: `async for event in stream`."""

    _gen: AsyncGenerator[Any, None]

    def _open(self) -> AsyncGenerator[Any, None]:
        return _follow(self._client, self._state)

    def __aiter__(self) -> AsyncEventStream:
        return self

    async def __anext__(self) -> dict[str, Any]:
        return cast("dict[str, Any]", await self._gen.__anext__())

    async def __aenter__(self) -> AsyncEventStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._gen.aclose()


async def _follow(client: AsyncClient, st: StreamState) -> AsyncGenerator[Any, None]:
    """The connection loop (see `sync_stream._follow`)."""
    http = client.http
    while True:
        delay: float | None
        try:
            async with aconnect_sse(
                http, "GET", st.path, headers=st.request_headers(), timeout=client.stream_timeout
            ) as source:
                if source.response.status_code != 200:
                    await source.response.aread()  # the error body, for the typed error
                delay = st.connected(source.response)
                if delay is None:
                    async for sse in source.aiter_sse():
                        msg = st.feed(sse.data, sse.retry, sse.id)
                        if st.result is not None:
                            return
                        if msg is not None:
                            yield msg
                    delay = st.window_ended()
                    if st.ended:
                        return
        except httpx.TransportError as exc:
            delay = st.broken(exc)
        await asyncio.sleep(delay)
