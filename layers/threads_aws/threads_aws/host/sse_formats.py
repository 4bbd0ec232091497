"""The window fallback (`host/sse.py`) for `?format=craze|ag-ui|ai-sdk`: one buffered window per request,
each `data:` one event of that format through the `streams` mappers, as the live stream has them.

A window rebuilds its mapper from the run's committed events (`Mapper.resumed` at the request's
`Last-Event-ID` / `after_seq`, which may be a mapper id `"<seq>.<k>"`), then polls the branch
head until the window's wait ends and feeds each new event. No deltas (a buffered window would
only hold them until their response). Ends: the run's result fed to the mapper, then the
response ends without `retry:` (these formats have no result message: a clean end without
`retry:` is the end); otherwise `retry: <ms>`, and the client resumes with its last id. Bytes: at
`window.max_bytes` the window stops after the last output with an id and ends with `retry: 0`
(until a first id it goes on, so every window moves the cursor).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..core.projections import run_outcome
from .paging import wire_size
from .principal import Principal
from .sse import Window, _run_events, retry_message, retry_wait


def subscribe(
    host: Any,
    principal: Principal,
    thread_id: str,
    run_id: str,
    *,
    fmt: str,
    raw_cursor: str | None,
    window: Window,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> bytes:
    from .live import _ai_sdk_done, _frame, _mapper_class, mapper_kwargs

    rec, start = host.run_start(principal, thread_id, run_id)
    deadline = monotonic() + window.wait_ms / 1000
    out: list[bytes] = []
    used = 0
    mapper: Any = None
    cursor = start - 1
    seen_head = -1
    waited = False
    while True:
        head = host.store.head(rec.branch_id)
        if head is not None and head.head_seq != seen_head:
            seen_head = head.head_seq
            with host._lock:  # as sse.subscribe: never serve a line a control fails to commit
                view = host._load(head)
                events = view.fold.events
                if mapper is None:
                    run = list(_run_events(events, view.fold.known, start, 0))
                    cls = _mapper_class(fmt)
                    mapper, outs = cls.resumed(
                        run, raw_cursor, **mapper_kwargs(fmt, view.fold, start, _seq_of(raw_cursor))
                    )
                else:
                    run = list(_run_events(events, view.fold.known, start, cursor))
                    outs = [o for ev in run for o in mapper.feed({"kind": "event", "event": ev})]
                if run:
                    cursor = max(cursor, run[-1]["seq"])
                outcome = run_outcome(events, run_id, thread_id=thread_id, branch_id=rec.branch_id)
                until = None if outcome is not None or waited else retry_wait(events, start)
            if until is not None and until > time.time_ns() // 1_000_000:
                waited = True
                outs += mapper.feed({"kind": "status", "status": "retry_wait", "until": until})
            for o in outs:
                frame = _frame(o)
                cost = wire_size(frame)
                if used + cost > window.max_bytes and any(f.startswith(b"id: ") for f in out):
                    # Cut after the last output with an id: the rest comes again, resumed from it.
                    while not out[-1].startswith(b"id: "):
                        out.pop()
                    out.append(retry_message(0))
                    return b"".join(out)
                out.append(frame)
                used += cost
            if outcome is not None:
                end = mapper.feed({"kind": "result", "run_id": run_id, "result": outcome})
                out += [_frame(o) for o in end] + ([_ai_sdk_done()] if fmt == "ai-sdk" else [])
                return b"".join(out)
        if monotonic() >= deadline:
            out.append(retry_message(window.retry_ms))
            return b"".join(out)
        sleep(min(window.poll_ms / 1000, max(0.0, deadline - monotonic())))


def _seq_of(raw_cursor: str | None) -> int:
    """The seq part of a mapper cursor (0: none, or not one: the mapper replays from the start)."""
    from ..streams import parse_cursor

    cursor = parse_cursor(raw_cursor)
    return 0 if cursor is None else cursor.seq
