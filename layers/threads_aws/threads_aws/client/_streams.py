"""A run stream apart from its transport: the run it follows, its resume state (`_core.
StreamState`) and what it has seen so far — `result`, `cursor`, `connections` of a native run
stream; `ended`, `last_event_id` of a craze / AG-UI event stream. `sync_stream` and
`aio_stream` add the iteration over their connection loop (`_open`)."""

from __future__ import annotations

from typing import Any, Generic, TypeVar, cast

from ._core import StreamState
from .types import RunAccepted, RunOutcome

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
