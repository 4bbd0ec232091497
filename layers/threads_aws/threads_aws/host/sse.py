"""The run subscription (`GET /v1/threads/{thread_id}/runs/{run_id}/events`) as buffered SSE.

API Gateway REST with a Python Lambda cannot stream, so one invocation serves one window:
every committed event of the run after the cursor (`id: <seq>` + `data: {"kind":"event",...}`),
then it waits for more by polling the branch head (one GetItem per poll). If the run settles, the
last message is `data: {"kind":"result","run_id","result": RunOutcome}` without an id and the
response ends. Otherwise the window ends with `retry: <ms>`, and a standard EventSource
reconnects with `Last-Event-ID` = the last seq it saw: the next window starts right after it, so
a client sees no gap and no duplicate. Subscribing only reads the log.

Bounds, so a window is always a response Lambda can return:
- time: the wait is SSE_WAIT_MS (default 20 s) but never past the invocation's own deadline
  less FINISH_MS (the time to build and return the window). The one constant is the subscribe
  function's Timeout in template.yaml (28 s, under API Gateway's 29 s integration limit): Lambda
  derives the deadline from it, and without a Lambda context the gateway's limit stands in.
- bytes: events stop once the window holds SSE_WINDOW_BYTES (default `paging.PAGE_BYTES`, 4 MiB
  as the proxy response counts them); such a window ends with `retry: 0` (come back at once) and
  no result. A window always carries at least one event, so an event larger than a window (a
  line may be 1 MiB) still reaches the client, alone.

While a `retry_scheduled` wait runs (its `not_before` ahead, no newer request of the run), a
window also carries the transient `{kind: status, status: retry_wait, until}` (no id) once, after
its events — as the live stream (`host/live.py`) does.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from ..core.projections import run_outcome
from .paging import PAGE_BYTES, wire_size
from .principal import Principal

DEFAULT_WAIT_MS = 20_000
DEFAULT_POLL_MS = 500
DEFAULT_RETRY_MS = 1_000
FINISH_MS = 3_000  # after the wait: a last poll, a view refresh, the response
GATEWAY_LIMIT_MS = 29_000  # API Gateway REST's integration timeout
MAX_INT = 2**53 - 1  # events_Int
_CURSOR = re.compile(r"[0-9]{1,16}")


@dataclass(frozen=True, slots=True)
class Window:
    wait_ms: int = DEFAULT_WAIT_MS
    poll_ms: int = DEFAULT_POLL_MS
    retry_ms: int = DEFAULT_RETRY_MS
    max_bytes: int = PAGE_BYTES

    @classmethod
    def from_env(cls, remaining_ms: int | None = None) -> Window:
        """The window for an invocation with `remaining_ms` left (None: no Lambda context)."""

        def num(name: str, default: int) -> int:
            try:
                return max(0, int(os.environ.get(name, default)))
            except ValueError:
                return default

        budget = GATEWAY_LIMIT_MS if remaining_ms is None else min(remaining_ms, GATEWAY_LIMIT_MS)
        return cls(
            max(0, min(num("SSE_WAIT_MS", DEFAULT_WAIT_MS), budget - FINISH_MS)),
            max(num("SSE_POLL_MS", DEFAULT_POLL_MS), 50),
            num("SSE_RETRY_MS", DEFAULT_RETRY_MS),
            max(num("SSE_WINDOW_BYTES", PAGE_BYTES), 1),
        )


def event_message(ev: dict[str, Any]) -> bytes:
    return b"id: %d\ndata: %s\n\n" % (ev["seq"], orjson.dumps({"kind": "event", "event": ev}))


def result_message(run_id: str, outcome: dict[str, Any]) -> bytes:
    return b"data: %s\n\n" % orjson.dumps({"kind": "result", "run_id": run_id, "result": outcome})


def status_message(until: int) -> bytes:
    return b"data: %s\n\n" % orjson.dumps({"kind": "status", "status": "retry_wait", "until": until})


RETRY_ENDS = frozenset({"model_request", "turn_completed", "user_input", "cancelled"})


def retry_wait(events: list[dict[str, Any]], start: int) -> int | None:
    """The `not_before` of the run's retry wait, if its last retry_scheduled is not yet followed
    by a request or the turn's end (the caller compares it with the clock)."""
    for ev in reversed(events):
        if ev["seq"] < start:
            return None
        if ev["type"] == "retry_scheduled":
            nb = (ev.get("data") or {}).get("not_before")
            return nb if isinstance(nb, int) and not isinstance(nb, bool) else None
        if ev["type"] in RETRY_ENDS and ev["seq"] > start:
            return None
    return None


def retry_message(ms: int) -> bytes:
    return b"retry: %d\n\n" % ms


def resume_cursor(last_event_id: str | None, after_seq: str | None) -> int:
    """Last-Event-ID wins over after_seq; a value that is not a non-negative Int (ASCII digits,
    at most 2^53-1) is ignored here (the route refuses one first: `live.options`). `str.isdigit`
    would admit "²" and int() refuses >4300 digits: never a 500."""
    for raw in (last_event_id, after_seq):
        if raw is not None and _CURSOR.fullmatch(raw.strip()) and int(raw.strip()) <= MAX_INT:
            return int(raw.strip())
    return 0


def parse_messages(body: str | bytes) -> list[dict[str, Any]]:
    """Split an SSE body into messages ({id?, data?, retry?}) — for tests and clients."""
    text = body.decode() if isinstance(body, bytes) else body
    out = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        msg: dict[str, Any] = {}
        for line in block.split("\n"):
            field, _, value = line.partition(": ")
            if field == "data":
                msg["data"] = orjson.loads(value)
            elif field in ("id", "retry"):
                msg[field] = value
        out.append(msg)
    return out


def subscribe(
    host: Any,
    principal: Principal,
    thread_id: str,
    run_id: str,
    *,
    cursor: int,
    window: Window,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> bytes:
    """One buffered window of the run's stream (see the module docstring)."""
    rec, start = host.run_start(principal, thread_id, run_id)
    deadline = monotonic() + window.wait_ms / 1000
    out: list[bytes] = []
    used = 0
    cursor = max(cursor, start - 1)
    seen_head = -1
    waited = False  # the retry_wait status is in this window
    while True:
        head = host.store.head(rec.branch_id)
        if head is not None and head.head_seq != seen_head:
            seen_head = head.head_seq
            # Under the host lock: a control builds into the cached view before it commits, and
            # a line it then fails to commit must never be served (a phantom id, then a gap).
            with host._lock:
                view = host._load(head)
                events = view.fold.events
                full = False
                for ev in _run_events(events, view.fold.known, start, cursor):
                    message = event_message(ev)
                    cost = wire_size(message)
                    full = bool(out) and used + cost > window.max_bytes
                    if full:
                        break
                    out.append(message)
                    used += cost
                    cursor = ev["seq"]
                if full:  # the rest (and the result) in the next window, at once
                    out.append(retry_message(0))
                    return b"".join(out)
                outcome = run_outcome(events, run_id, thread_id=thread_id, branch_id=rec.branch_id)
                until = None if outcome is not None or waited else retry_wait(events, start)
                if until is not None and until > time.time_ns() // 1_000_000:
                    waited = True
                    out.append(status_message(until))
            if outcome is not None:
                out.append(result_message(run_id, outcome))
                return b"".join(out)
        if monotonic() >= deadline:
            out.append(retry_message(window.retry_ms))
            return b"".join(out)
        sleep(min(window.poll_ms / 1000, max(0.0, deadline - monotonic())))


def _run_events(
    events: list[dict[str, Any]], known: list[bool], start: int, cursor: int
) -> Iterable[dict[str, Any]]:
    """The run's committed events after `cursor`: from its user_input up to the next run's."""
    for ev, k in zip(events, known, strict=True):
        seq = ev["seq"]
        if seq < start:
            continue
        if seq > start and ev["type"] == "user_input":
            return
        if seq > cursor and k:
            yield ev
