"""`AsyncClient`: the host API over `httpx.AsyncClient`, method for method `Client` (see `_core`
for retries and stream resume; a test keeps the two sets of signatures equal)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any, Literal, cast, overload

import httpx

from . import _calls
from ._core import (
    DEFAULT_TIMEOUT,
    STREAM_TIMEOUT,
    Call,
    Format,
    Retries,
    check_format,
    connection_failed,
    headers,
    next_page,
    resolve,
    result,
    retry_after_exception,
    retry_after_response,
)
from ._methods import async_method
from ._streams import StreamState
from .aio_stream import AsyncEventStream, AsyncRunStream
from .types import Appended, ForkPoint, ThreadList, ThreadStatus, Timeline

__all__ = ["AsyncClient", "AsyncEventStream", "AsyncRunStream"]


class AsyncClient:
    """The threads host API (asyncio). Same arguments, methods and errors as `Client`."""

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        stream_timeout: httpx.Timeout | float = STREAM_TIMEOUT,
        retries: Retries | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url, self.token = resolve(base_url, token)
        self.retries = retries or Retries()
        self.stream_timeout = stream_timeout
        self.http = httpx.AsyncClient(
            base_url=self.base_url, headers=headers(self.token), timeout=timeout, transport=transport
        )

    async def aclose(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def send(self, call: Call) -> Any:
        return result(call, await self._send(call, call.path))

    async def _send(self, call: Call, url: str | httpx.URL) -> httpx.Response:
        attempt = 0
        while True:
            try:
                resp = await self.http.request(call.method, url, **call.request_kwargs())
            except httpx.TransportError as exc:
                delay = retry_after_exception(call, attempt, exc, self.retries)
                if delay is None:
                    raise connection_failed(call, exc) from exc
            else:
                delay = retry_after_response(call, attempt, resp, self.retries)
                if delay is None:
                    return resp
            attempt += 1
            await asyncio.sleep(delay)

    # -------------------------------------------------------------- runs
    start_run = async_method(_calls.start_run)

    async def run(
        self,
        agent: str,
        input: _calls.Input,
        *,
        thread_id: str | None = None,
        branch_id: str | None = None,
        budget: dict[str, int] | None = None,
        idempotency_key: str | None = None,
    ) -> AsyncRunStream:
        accepted = await self.start_run(
            agent,
            input,
            thread_id=thread_id,
            branch_id=branch_id,
            budget=budget,
            idempotency_key=idempotency_key,
        )
        return AsyncRunStream(self, accepted["thread_id"], accepted["run_id"], accepted=accepted)

    @overload
    def stream(
        self,
        thread_id: str,
        run_id: str,
        *,
        after_seq: int = 0,
        format: Literal["native"] = "native",
        thinking: bool = False,
        through_parks: bool = False,
        last_event_id: str | None = None,
    ) -> AsyncRunStream: ...
    @overload
    def stream(
        self,
        thread_id: str,
        run_id: str,
        *,
        after_seq: int = 0,
        format: Literal["craze", "ag-ui"],
        thinking: bool = False,
        through_parks: bool = False,
        last_event_id: str | None = None,
    ) -> AsyncEventStream: ...
    def stream(
        self,
        thread_id: str,
        run_id: str,
        *,
        after_seq: int = 0,
        format: Format = "native",
        thinking: bool = False,
        through_parks: bool = False,
        last_event_id: str | None = None,
    ) -> AsyncRunStream | AsyncEventStream:
        check_format(format)
        if format == "native":
            return AsyncRunStream(
                self,
                thread_id,
                run_id,
                after_seq=after_seq,
                thinking=thinking,
                through_parks=through_parks,
                last_event_id=last_event_id,
            )
        state = StreamState(
            thread_id,
            run_id,
            after_seq,
            format=format,
            thinking=thinking,
            through_parks=through_parks,
            last_event_id=last_event_id,
        )
        return AsyncEventStream(self, thread_id, state)

    # -------------------------------------------------------------- reading a thread
    async def pages(self, call: Call) -> AsyncIterator[Any]:
        url: httpx.URL | None = self.http.build_request("GET", call.path, params=call.params).url
        call.params = {}
        while url is not None:
            resp = await self._send(call, url)
            yield result(call, resp)
            url = next_page(resp, url)

    def timeline_pages(
        self,
        thread_id: str,
        branch_id: str | None = None,
        *,
        after_seq: int | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[Timeline]:
        return cast(
            "AsyncIterator[Timeline]",
            self.pages(_calls.timeline(thread_id, branch_id, after_seq=after_seq, limit=limit)),
        )

    async def timeline(
        self,
        thread_id: str,
        branch_id: str | None = None,
        *,
        after_seq: int | None = None,
        limit: int | None = None,
    ) -> Timeline:
        out: Timeline | None = None
        async for page in self.timeline_pages(thread_id, branch_id, after_seq=after_seq, limit=limit):
            if out is None:
                out = page
            else:
                out["entries"].extend(page["entries"])
        assert out is not None
        return out

    branches = async_method(_calls.branches)

    async def fork_points(
        self,
        thread_id: str,
        branch_id: str | None = None,
        *,
        after_seq: int | None = None,
        limit: int | None = None,
    ) -> list[ForkPoint]:
        call = _calls.fork_points(thread_id, branch_id, after_seq=after_seq, limit=limit)
        return [point async for page in self.pages(call) for point in page]

    approvals = async_method(_calls.approvals)
    openapi = async_method(_calls.openapi)

    # -------------------------------------------------------------- controls
    fork = async_method(_calls.fork)
    decide = async_method(_calls.decide)

    async def approve(
        self,
        thread_id: str,
        challenge_id: str,
        *,
        remember_rule: str | None = None,
        reason: str | None = None,
    ) -> Appended:
        return await self.decide(thread_id, challenge_id, "grant", remember_rule=remember_rule, reason=reason)

    async def deny(self, thread_id: str, challenge_id: str, *, reason: str | None = None) -> Appended:
        return await self.decide(thread_id, challenge_id, "deny", reason=reason)

    answer = async_method(_calls.answer)
    resolve_parked = async_method(_calls.resolve_parked)
    cancel = async_method(_calls.cancel)
    steer = async_method(_calls.steer)
    stop = async_method(_calls.stop)
    redact = async_method(_calls.redact)
    set_model = async_method(_calls.set_model)
    set_mode = async_method(_calls.set_mode)

    # -------------------------------------------------------------- schedules (ours)
    create_schedule = async_method(_calls.create_schedule)
    schedules = async_method(_calls.schedules)
    delete_schedule = async_method(_calls.delete_schedule)
    delete_thread = async_method(_calls.delete_thread)
    update_thread = async_method(_calls.update_thread)

    # -------------------------------------------------------------- listing (ours)
    threads = async_method(_calls.threads)

    def thread_pages(
        self,
        *,
        limit: int | None = None,
        status: ThreadStatus | None = None,
        agent: str | None = None,
        metadata: Mapping[str, str] | None = None,
        updated_after: int | None = None,
        updated_before: int | None = None,
        title_contains: str | None = None,
    ) -> AsyncIterator[ThreadList]:
        return cast(
            "AsyncIterator[ThreadList]",
            self.pages(
                _calls.threads(
                    limit=limit,
                    status=status,
                    agent=agent,
                    metadata=metadata,
                    updated_after=updated_after,
                    updated_before=updated_before,
                    title_contains=title_contains,
                )
            ),
        )

    thread = async_method(_calls.thread)

    async def has_operation(self, operation_id: str) -> bool:
        doc = await self.openapi()
        return any(
            isinstance(op, dict) and op.get("operationId") == operation_id
            for item in doc.get("paths", {}).values()
            for op in item.values()
        )
