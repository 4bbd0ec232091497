"""The sync client's run streams: `RunStream` (native messages until the result) and
`EventStream` (craze / AG-UI events until the host ends the stream), over one connection loop
(`_follow`) that reconnects after each window, deadline or failure with the resume state of
`_core.StreamState`."""

from __future__ import annotations

import time
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Any, cast

import httpx
from httpx_sse import connect_sse

from ._core import StreamState
from .types import RunAccepted, RunOutcome, StreamMessage

if TYPE_CHECKING:
    from .sync import Client


class RunStream(Iterator[StreamMessage]):
    """A run's messages (`event`, `delta`, `status`) until its result; reconnects by itself.

        for msg in client.stream(thread_id, run_id):
            ...
        outcome = stream.result          # the RunOutcome (also `stream.wait()`)

    Iterating ends when the `result` message arrives (it is not yielded: it is `result`).
    Inside a generator, `outcome = yield from stream` gives the outcome too. `close()` (or
    leaving a `with` block) drops the connection; `cursor` is the last event seq delivered,
    the `after_seq` to follow on later."""

    def __init__(
        self,
        client: Client,
        thread_id: str,
        run_id: str,
        *,
        after_seq: int = 0,
        accepted: RunAccepted | None = None,
        max_failures: int = 5,
        thinking: bool = False,
        through_parks: bool = False,
        last_event_id: str | None = None,
    ) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.accepted = accepted
        self._client = client
        self._state = StreamState(
            thread_id,
            run_id,
            after_seq,
            max_failures=max_failures,
            thinking=thinking,
            through_parks=through_parks,
            last_event_id=last_event_id,
        )
        self._gen = self._messages()

    @property
    def result(self) -> RunOutcome | None:
        return cast("RunOutcome | None", self._state.result)

    @property
    def cursor(self) -> int:
        return self._state.cursor

    @property
    def connections(self) -> int:
        return self._state.connections

    def __iter__(self) -> Generator[StreamMessage, None, RunOutcome]:
        return self._gen

    def __next__(self) -> StreamMessage:
        return next(self._gen)

    def __enter__(self) -> RunStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._gen.close()

    def wait(self) -> RunOutcome:
        """Read to the end; the RunOutcome."""
        for _ in self._gen:
            pass
        assert self.result is not None
        return self.result

    def _messages(self) -> Generator[StreamMessage, None, RunOutcome]:
        yield from _follow(self._client, self._state)
        return cast("RunOutcome", self._state.result)


class EventStream(Iterator[dict[str, Any]]):
    """A run as craze or AG-UI events (`client.stream(..., format="craze" | "ag-ui")`): each one
    a dict as the host sent it (the craze seed schema's, or an AG-UI protocol event), until the
    host ends the run's stream; reconnects by itself with `Last-Event-ID` = the last id seen.

    These formats carry no result message (AG-UI's RUN_FINISHED / RUN_ERROR, craze's `done` and
    `turn{phase: ended}` say how the run went); `ended` is True once the stream is over, and
    `last_event_id` is the id to follow on from later (`client.stream(..., last_event_id=)`)."""

    def __init__(self, client: Client, thread_id: str, state: StreamState) -> None:
        self.thread_id = thread_id
        self.run_id = state.run_id
        self.format = state.format
        self._client = client
        self._state = state
        self._gen = _follow(client, state)

    @property
    def ended(self) -> bool:
        return self._state.ended

    @property
    def last_event_id(self) -> str | None:
        return self._state.last_id

    @property
    def connections(self) -> int:
        return self._state.connections

    def __iter__(self) -> Generator[dict[str, Any], None, None]:
        return self._gen

    def __next__(self) -> dict[str, Any]:
        return next(self._gen)

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._gen.close()


def _follow(client: Client, st: StreamState) -> Generator[Any, None, None]:
    """The connection loop of a stream: reconnect after each window / deadline / failure until
    the result (native) or the host's clean end (craze, AG-UI)."""
    http = client.http
    while True:
        delay: float | None
        try:
            with connect_sse(
                http, "GET", st.path, headers=st.request_headers(), timeout=client.stream_timeout
            ) as source:
                if source.response.status_code != 200:
                    source.response.read()  # the error body, for the typed error
                delay = st.connected(source.response)
                if delay is None:
                    for sse in source.iter_sse():
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
        time.sleep(delay)
