"""The worker side of live token deltas: the `on_delta(kind, text)` callback of one model request.

It accumulates the adapter's text and thinking chunks and writes them to the request's delta row
(`store.deltas`) at most once every INTERVAL_MS, from a background thread, so the adapter's
stream loop never waits on DynamoDB and a chunk left alone by a pause in the stream (the model
writing a tool call's arguments) still goes out within INTERVAL_MS. `close()` stops the thread
and writes what is left; the worker calls it before it commits the `model_response`, so a
subscriber reading the row and the head together meets every delta before the response.

Best effort, by design: a row holds the accumulated tail rather than increments, so a failed
write is logged and the next one carries its text; a failure never touches the model request,
whose committed response is the record.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from typing import Any

from ..store.deltas import DeltaRow, tail
from ..store.records import Clock, wall_ms

log = logging.getLogger("threads_aws.engine")

INTERVAL_MS = 100
CLOSE_WAIT_S = 2.0


class DeltaPublisher:
    """`on_delta` for request `request_event_id` on `branch_id` (no store: a no-op)."""

    def __init__(
        self,
        store: Any,
        branch_id: str,
        request_event_id: str,
        *,
        interval_ms: int = INTERVAL_MS,
        clock: Clock = wall_ms,
        threaded: bool = True,
    ) -> None:
        self.store = store
        self.branch_id = branch_id
        self.request_event_id = request_event_id
        self.interval_s = interval_ms / 1000
        self.clock = clock
        self.threaded = threaded
        self.writes = 0  # rows written (benchmarks)
        self._parts: dict[bool, list[str]] = {False: [], True: []}  # thinking? → chunks
        self._version = 0
        self._changed = False  # chunks arrived since the last snapshot
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()  # one write at a time, in version order
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __call__(self, kind: str, text: str) -> None:
        if self.store is None or not text or kind not in ("text", "thinking") or self._stop.is_set():
            return
        with self._lock:
            self._parts[kind == "thinking"].append(text)
            self._changed = True
            if self._thread is None and self.threaded:
                ctx = contextvars.copy_context()  # this invocation's (local.iam signs as its function)
                self._thread = threading.Thread(target=ctx.run, args=(self._run,), name="deltas", daemon=True)
                self._thread.start()
        self._wake.set()

    def flush(self) -> bool:
        """Write the accumulated state if anything is new; True if a row was written."""
        with self._write_lock:
            with self._lock:
                if not self._changed:
                    return False
                self._changed = False
                text, text_at = tail("".join(self._parts[False]))
                thinking, thinking_at = tail("".join(self._parts[True]))
                self._version += 1
                row = DeltaRow(
                    self.branch_id,
                    self.request_event_id,
                    text,
                    text_at,
                    thinking,
                    thinking_at,
                    self._version,
                    self.clock(),
                )
            try:
                self.store.put(row)
            except Exception:  # noqa: BLE001 - best effort: the next write carries this text
                log.warning("delta row of request %s not written", self.request_event_id, exc_info=True)
                return False
            self.writes += 1
            return True

    def close(self) -> None:
        """Stop the flusher and write what is left (before the response commits)."""
        self._stop.set()
        self._wake.set()  # the flusher sees the stop and returns
        if self._thread is not None:
            self._thread.join(CLOSE_WAIT_S)
        if self.store is not None:
            self.flush()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._stop.is_set():
                return
            self.flush()
            if self._stop.wait(self.interval_s):  # at most one write per interval
                return
