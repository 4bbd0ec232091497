"""`Client`: the host API over `httpx.Client` (see `_core` for retries and stream resume)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
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
from ._methods import method
from ._streams import StreamState
from .sync_stream import EventStream, RunStream
from .types import Appended, ForkPoint, ThreadList, ThreadStatus, Timeline

__all__ = ["Client", "EventStream", "RunStream"]


class Client:
    """The threads host API (sync). `base_url`/`token` default to $THREADS_URL/$THREADS_TOKEN,
    else the local host (`threads-aws dev`) and its dev token. Every method raises a
    `ThreadsError` subclass per contract error code (see `threads_aws_client.errors`)."""

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        stream_timeout: httpx.Timeout | float = STREAM_TIMEOUT,
        retries: Retries | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url, self.token = resolve(base_url, token)
        self.retries = retries or Retries()
        self.stream_timeout = stream_timeout
        self.http = httpx.Client(
            base_url=self.base_url, headers=headers(self.token), timeout=timeout, transport=transport
        )

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, call: Call) -> Any:
        """Send one call with its retries; the decoded success body, or a typed error."""
        return result(call, self._send(call, call.path))

    def _send(self, call: Call, url: str | httpx.URL) -> httpx.Response:
        attempt = 0
        while True:
            try:
                resp = self.http.request(call.method, url, **call.request_kwargs())
            except httpx.TransportError as exc:
                delay = retry_after_exception(call, attempt, exc, self.retries)
                if delay is None:
                    raise connection_failed(call, exc) from exc
            else:
                delay = retry_after_response(call, attempt, resp, self.retries)
                if delay is None:
                    return resp
            attempt += 1
            time.sleep(delay)

    # -------------------------------------------------------------- runs
    start_run = method(_calls.start_run)

    def run(
        self,
        agent: str,
        input: _calls.Input,
        *,
        thread_id: str | None = None,
        branch_id: str | None = None,
        budget: dict[str, int] | None = None,
        idempotency_key: str | None = None,
    ) -> RunStream:
        """Start a run and follow it: the stream (its `accepted` is the receipt)."""
        accepted = self.start_run(
            agent,
            input,
            thread_id=thread_id,
            branch_id=branch_id,
            budget=budget,
            idempotency_key=idempotency_key,
        )
        return RunStream(self, accepted["thread_id"], accepted["run_id"], accepted=accepted)

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
    ) -> RunStream: ...
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
    ) -> EventStream: ...
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
    ) -> RunStream | EventStream:
        """Follow a run from after `after_seq` (0: from its start; `last_event_id`, a format's
        own id, wins) to its end: its result (native, a `RunStream`), or the end of the craze or
        AG-UI stream (an `EventStream`). `thinking`: also the model's reasoning deltas;
        `through_parks`: stay through approvals and questions (a park is otherwise the end)."""
        check_format(format)
        if format == "native":
            return RunStream(
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
        return EventStream(self, thread_id, state)

    # -------------------------------------------------------------- reading a thread
    def pages(self, call: Call) -> Iterator[Any]:
        """Each page of a paged GET, following `Link: rel="next"` (a host that does not page
        answers one page: everything)."""
        url: httpx.URL | None = self.http.build_request("GET", call.path, params=call.params).url
        call.params = {}
        while url is not None:
            resp = self._send(call, url)
            yield result(call, resp)
            url = next_page(resp, url)

    def timeline_pages(
        self,
        thread_id: str,
        branch_id: str | None = None,
        *,
        after_seq: int | None = None,
        limit: int | None = None,
    ) -> Iterator[Timeline]:
        """The timeline page by page (`limit` entries at most per page)."""
        return cast(
            "Iterator[Timeline]",
            self.pages(_calls.timeline(thread_id, branch_id, after_seq=after_seq, limit=limit)),
        )

    def timeline(
        self,
        thread_id: str,
        branch_id: str | None = None,
        *,
        after_seq: int | None = None,
        limit: int | None = None,
    ) -> Timeline:
        """The whole timeline after `after_seq` (every page; `limit` sizes the pages)."""
        out: Timeline | None = None
        for page in self.timeline_pages(thread_id, branch_id, after_seq=after_seq, limit=limit):
            if out is None:
                out = page
            else:
                out["entries"].extend(page["entries"])
        assert out is not None
        return out

    branches = method(_calls.branches)

    def fork_points(
        self,
        thread_id: str,
        branch_id: str | None = None,
        *,
        after_seq: int | None = None,
        limit: int | None = None,
    ) -> list[ForkPoint]:
        """Every eligible fork point after `after_seq` (every page; `limit` sizes the pages)."""
        call = _calls.fork_points(thread_id, branch_id, after_seq=after_seq, limit=limit)
        return [point for page in self.pages(call) for point in page]

    approvals = method(_calls.approvals)
    openapi = method(_calls.openapi)

    # -------------------------------------------------------------- controls
    fork = method(_calls.fork)
    decide = method(_calls.decide)

    def approve(
        self,
        thread_id: str,
        challenge_id: str,
        *,
        remember_rule: str | None = None,
        reason: str | None = None,
    ) -> Appended:
        """Grant; `remember_rule` (one of the challenge's suggested_rules) is kept for the thread."""
        return self.decide(thread_id, challenge_id, "grant", remember_rule=remember_rule, reason=reason)

    def deny(self, thread_id: str, challenge_id: str, *, reason: str | None = None) -> Appended:
        return self.decide(thread_id, challenge_id, "deny", reason=reason)

    answer = method(_calls.answer)
    resolve_parked = method(_calls.resolve_parked)
    cancel = method(_calls.cancel)
    steer = method(_calls.steer)
    stop = method(_calls.stop)
    redact = method(_calls.redact)
    set_model = method(_calls.set_model)
    set_mode = method(_calls.set_mode)

    # -------------------------------------------------------------- schedules (ours)
    create_schedule = method(_calls.create_schedule)
    schedules = method(_calls.schedules)
    delete_schedule = method(_calls.delete_schedule)
    delete_thread = method(_calls.delete_thread)
    update_thread = method(_calls.update_thread)

    # -------------------------------------------------------------- listing (ours)
    threads = method(_calls.threads)

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
    ) -> Iterator[ThreadList]:
        """The tenant's threads page by page, most recent activity first, following `Link:
        rel="next"` (the filters ride along: `threads`)."""
        return cast(
            "Iterator[ThreadList]",
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

    thread = method(_calls.thread)

    def has_operation(self, operation_id: str) -> bool:
        """Whether the host's served contract has this operationId."""
        doc = self.openapi()
        return any(
            isinstance(op, dict) and op.get("operationId") == operation_id
            for item in doc.get("paths", {}).values()
            for op in item.values()
        )
