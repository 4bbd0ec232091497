"""The sync client's run streams: `RunStream` (native messages until the result) and
`EventStream` (craze / AG-UI events until the host ends the stream), over one connection loop
(`_follow`) that reconnects after each window, deadline or failure with the resume state of
`_streams.StreamState`."""

from __future__ import annotations

import time
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Any, cast

import httpx
from httpx_sse import connect_sse

from ._streams import EventFollow, RunFollow, StreamState
from .types import RunOutcome, StreamMessage

if TYPE_CHECKING:
    from .sync import Client


class RunStream(RunFollow["Client"], Iterator[StreamMessage]):
    """A run's messages (`event`, `delta`, `status`) until its result; reconnects by itself.

        for msg in client.stream(thread_id, run_id):
            ...
        outcome = stream.result          # the RunOutcome (also `stream.wait()`)

    Iterating ends when the `result` message arrives (it is not yielded: it is `result`).
    Inside a generator, `outcome = yield from stream` gives the outcome too. `close()` (or
    leaving a `with` block) drops the connection; `cursor` is the last event seq delivered,
    the `after_seq` to follow on later."""

    _gen: Generator[StreamMessage, None, RunOutcome]

    def _open(self) -> Generator[StreamMessage, None, RunOutcome]:
        return self._messages()

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


class EventStream(EventFollow["Client"], Iterator[dict[str, Any]]):
    """A run as craze or AG-UI events (`client.stream(..., format="craze" | "ag-ui")`): each one
    a dict as the host sent it (the craze seed schema's, or an AG-UI protocol event), until the
    host ends the run's stream; reconnects by itself with `Last-Event-ID` = the last id seen.

    These formats carry no result message (AG-UI's RUN_FINISHED / RUN_ERROR, craze's `done` and
    `turn{phase: ended}` say how the run went); `ended` is True once the stream is over, and
    `last_event_id` is the id to follow on from later (`client.stream(..., last_event_id=)`)."""

    _gen: Generator[dict[str, Any], None, None]

    def _open(self) -> Generator[dict[str, Any], None, None]:
        return _follow(self._client, self._state)

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
