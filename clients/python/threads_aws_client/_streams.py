"""A run stream apart from its transport: its resume state (`StreamState`) and what it has
seen so far (`RunFollow`: `result`, `cursor`, `connections` of a native run stream;
`EventFollow`: `ended`, `last_event_id` of a craze / AG-UI event stream). `sync_stream` and
`aio_stream` add the iteration over their connection loop (`_open`).

Stream resume: the run subscription is one live stream (it ends at the function's deadline) or,
in the fallback, a window per request. The state keeps the last id seen and the server's
`retry:`; each (re)connect sends `Last-Event-ID`, and an event at or below the cursor is dropped,
so the caller sees each event once and in order. The native stream ends with its `result`
message. The craze and AG-UI formats (`?format=`) have none: their stream is over when the host
closes it cleanly without a `retry:` after its last message (the host ends a connection it wants
resumed — a deadline, a window, a size bound — with `retry:`; a cut connection is a transport
error), and their ids are the mapper's (`"<seq>"` or `"<seq>.<k>"`). An AG-UI connection is a
whole AG-UI stream, so a resumed one first re-opens what is open (RUN_STARTED, a snapshot, the
open step, a message cut through); `AgUiJoin` drops that preamble, so the caller's events are one
continuous AG-UI stream across connections.
"""

from __future__ import annotations

import json
from typing import Any, Generic, TypeVar, cast
from urllib.parse import urlencode

import httpx

from ._core import DEFAULT_RETRY_MS, Retries, error_from, seg
from .errors import ConnectionFailed, UnexpectedResponse
from .types import RunAccepted, RunOutcome


def id_key(raw: str | None) -> tuple[int, float] | None:
    """A stream id as an order: "17" (all of seq 17's outputs) after "17.k" (its k-th)."""
    if not raw:
        return None
    head, dot, tail = raw.partition(".")
    if not head.isascii() or not head.isdigit() or (dot and not (tail.isascii() and tail.isdigit())):
        return None
    return int(head), float(tail) if dot else float("inf")


# ------------------------------------------------------------------ the run stream
_AGUI_OPEN = {"TEXT_MESSAGE_START", "TOOL_CALL_START", "REASONING_START", "REASONING_MESSAGE_START"}
_AGUI_CLOSE = {
    "TEXT_MESSAGE_END": "TEXT_MESSAGE_START",
    "TOOL_CALL_END": "TOOL_CALL_START",
    "REASONING_END": "REASONING_START",
    "REASONING_MESSAGE_END": "REASONING_MESSAGE_START",
}


class AgUiJoin:
    """What of an AG-UI run is open for the caller, to drop a resumed connection's preamble (the
    host's `AgUiMapper.preamble`: RUN_STARTED, STATE_SNAPSHOT, the open step, open messages)."""

    def __init__(self) -> None:
        self.run = False
        self.step: str | None = None
        self.open: set[tuple[str, str]] = set()
        self.preamble = False  # at the head of a resumed connection

    def connected(self) -> None:
        self.preamble = self.run

    def keep(self, ev: dict[str, Any]) -> bool:
        typ = ev.get("type")
        ident = str(ev.get("toolCallId") or ev.get("messageId"))
        if self.preamble:
            if typ in ("RUN_STARTED", "STATE_SNAPSHOT"):
                return False
            if (typ == "STEP_STARTED" and ev.get("stepName") == self.step) or (typ, ident) in self.open:
                return False
            self.preamble = False
        if typ == "RUN_STARTED":
            self.run = True
        elif typ in ("RUN_FINISHED", "RUN_ERROR"):
            self.run, self.step, self.open = False, None, set()
        elif typ == "STEP_STARTED":
            self.step = ev.get("stepName")
        elif typ == "STEP_FINISHED":
            self.step = None
        elif typ in _AGUI_OPEN:
            self.open.add((str(typ), ident))
        elif typ in _AGUI_CLOSE:
            self.open.discard((_AGUI_CLOSE[str(typ)], ident))
        return True


class StreamState:
    """Resume state of one run subscription, fed with each server-sent event.

    `feed` returns the message to hand to the caller (None for a duplicate, a retry-only message
    or the result); `result` is set once the `result` message arrived (then the stream is done).
    """

    def __init__(
        self,
        thread_id: str,
        run_id: str,
        after_seq: int = 0,
        *,
        max_failures: int = 5,
        format: str = "native",
        thinking: bool = False,
        through_parks: bool = False,
        last_event_id: str | None = None,
    ) -> None:
        query = {
            k: v
            for k, v in (
                ("format", format if format != "native" else ""),
                ("thinking", "true" if thinking else ""),
                ("through_parks", "true" if through_parks else ""),
            )
            if v
        }
        self.path = f"/v1/threads/{seg(thread_id)}/runs/{seg(run_id)}/events"
        if query:
            self.path += "?" + urlencode(query)
        self.run_id = run_id
        self.format = format
        self.cursor = after_seq
        # The last id delivered (a format's ids may be "<seq>.<k>"); the plain seq resumes any format.
        self.last_id = last_event_id if id_key(last_event_id) else (str(after_seq) if after_seq > 0 else None)
        if self.last_id is not None:
            self.cursor = int(self.last_id.split(".")[0])
        self.ended = False  # a format stream closed by the host after its last message
        self.agui = AgUiJoin() if format == "ag-ui" else None
        self._resume = False  # this connection's last message was a `retry:` (resume after it)
        self.retry_ms = DEFAULT_RETRY_MS
        self.result: Any = None
        self.failures = 0  # consecutive failed connections
        self.max_failures = max_failures
        self.connections = 0

    def request_headers(self) -> dict[str, str]:
        hs = {"Accept": "text/event-stream", "Cache-Control": "no-store"}
        if self.format != "native":
            if self.last_id is not None:
                hs["Last-Event-ID"] = self.last_id
        elif self.cursor > 0:
            hs["Last-Event-ID"] = str(self.cursor)
        return hs

    def feed(self, data: str, retry: int | None, sse_id: str = "") -> Any:
        """`sse_id`: the event's id as httpx-sse gives it (the last id seen on this connection, so
        a message without an id of its own repeats the previous one)."""
        if retry is not None:
            self.retry_ms = max(0, retry)
            if not data:
                self._resume = True
        if not data:
            return None
        if self.format != "native":
            return self._feed_format(data, sse_id)
        try:
            msg = json.loads(data)
            kind = msg["kind"]
        except (ValueError, KeyError, TypeError):
            raise UnexpectedResponse(f"a stream message that is not an SseMessage: {data[:200]!r}") from None
        self.failures = 0
        self._resume = False
        if kind == "result":
            self.result = msg["result"]
            return None
        if kind == "event":
            seq = msg["event"]["seq"]
            if seq <= self.cursor:
                return None  # already delivered (a resent window)
            self.cursor = seq
        return msg

    def _feed_format(self, data: str, sse_id: str) -> Any:
        try:
            obj = json.loads(data)
        except ValueError:
            obj = None
        if not isinstance(obj, dict) or "type" not in obj:
            raise UnexpectedResponse(f"a {self.format} stream message that is not an event: {data[:200]!r}")
        self.failures = 0
        self._resume = False
        key = id_key(sse_id)
        if key is not None and sse_id != self.last_id:
            last = id_key(self.last_id)
            if last is not None and key <= last:
                return None  # already delivered (a resent window)
            self.last_id, self.cursor = sse_id, key[0]
        if self.agui is not None and not self.agui.keep(obj):
            return None
        return obj

    def connected(self, resp: httpx.Response) -> float | None:
        """After the answer's head: None to read it, else seconds to wait before reconnecting.
        Raises the typed error of a refusal (4xx), or once failures are exhausted."""
        self.connections += 1
        status = resp.status_code
        if status == 200:
            # A format stream opens with a comment: only a `retry:` asks to be resumed.
            self._resume = False
            if self.agui is not None:
                self.agui.connected()
            return None
        retriable = status == 429 or status >= 500
        if not retriable:
            raise error_from(resp)
        self.failures += 1
        if self.failures > self.max_failures:
            raise error_from(resp)
        return Retries().delay(self.failures - 1, resp.headers.get("Retry-After"))

    def broken(self, exc: httpx.TransportError) -> float:
        """After a transport failure: seconds to wait, or raise once failures are exhausted."""
        self.failures += 1
        if self.failures > self.max_failures:
            raise ConnectionFailed(f"GET {self.path}: {type(exc).__name__}: {exc or 'no answer'}") from exc
        return max(self.retry_ms / 1000, Retries().delay(self.failures - 1))

    def window_ended(self) -> float:
        """A connection closed without the result: reconnect after the server's `retry:` — unless
        a format stream was closed after its last message (`ended`: the run's stream is over)."""
        if self.format != "native" and not self._resume:
            self.ended = True
        return self.retry_ms / 1000


C = TypeVar("C")


class RunFollow(Generic[C]):
    def __init__(
        self,
        client: C,
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
        self._gen = self._open()

    def _open(self) -> Any:
        raise NotImplementedError

    @property
    def result(self) -> RunOutcome | None:
        return cast("RunOutcome | None", self._state.result)

    @property
    def cursor(self) -> int:
        return self._state.cursor

    @property
    def connections(self) -> int:
        return self._state.connections


class EventFollow(Generic[C]):
    def __init__(self, client: C, thread_id: str, state: StreamState) -> None:
        self.thread_id = thread_id
        self.run_id = state.run_id
        self.format = state.format
        self._client = client
        self._state = state
        self._gen = self._open()

    def _open(self) -> Any:
        raise NotImplementedError

    @property
    def ended(self) -> bool:
        return self._state.ended

    @property
    def last_event_id(self) -> str | None:
        return self._state.last_id

    @property
    def connections(self) -> int:
        return self._state.connections
