"""The run subscription as one live stream (`GET …/runs/{run_id}/events` on the streaming
integration; `host/sse.py` is the bounded-window fallback): committed events, token deltas,
`retry_wait` status and the final result, as SSE, on one connection of up to 15 minutes.

How it learns of new events: it polls. One strongly consistent BatchGetItem per tick reads the
branch head and the delta rows (`store.deltas`) of the run's requests in flight; a head that
moved is loaded through the writer's cached view (only the new lines are read). A tick is
POLL_MS (100) while the run is active — a request in flight, or a change within ACTIVE_MS — and
IDLE_POLL_MS (200) otherwise, so an append reaches the client within a tick and a read.
(DynamoDB Streams would cost shard discovery and a GetRecords per shard per tick, read every
tenant's changes, and cap readers per shard; a push channel saves a read per tick but still needs
the log for replay: see the README.)

Order and ids, as in the window mode: committed events (`id: <seq>`, the native format) after the
cursor (`Last-Event-ID` wins over `after_seq`), then as they commit; the result (no id) ends the
stream. In a tick the deltas of requests already known go out before that tick's events, so a
request's deltas precede its `model_response`. A delta carries no id and is never replayed: a
request the client knew before it reconnected (its `model_request` at or before the cursor) gets
no more deltas on the new connection; the committed response carries its text. A delta of the
native format is the contract's `{kind: delta, request_event_id, text}` plus our add-only
`offset` (the chunk's position in the request's streamed text, in code points); reasoning chunks
are sent only with `?thinking=true` (they also carry `thinking: true`), so a client that knows
only the contract never mistakes reasoning for the answer. `?format=craze|ag-ui|ai-sdk` runs the same
subscription through the `streams` mappers: each `data:` one event of that format, the mapper's
ids as `id:`, resume by `Mapper.resumed`. Those formats have no result message, so their stream
opens with a comment instead of `retry:`: a `retry:` there always means "reconnect with your last
id" (deadline, size, failure), and a clean close without one means the run's stream is over.

Bounds: a comment (`: ping`) after HEARTBEAT_MS without a message, well inside API Gateway's
5-minute idle timeout; the stream ends MARGIN_MS before the invocation's deadline (and after
MAX_MS, and after MAX_BYTES) with `retry: <ms>` and no result, so an EventSource reconnects with
its last id. `?through_parks=true` (ours) keeps the stream open while the run is parked and sends
the result only when the run ends; without it a park is the result, as the contract has it.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from ..core.projections import run_outcome
from .principal import Principal
from .sse import MAX_INT, _run_events, event_message, result_message, resume_cursor

FORMATS = ("native", "craze", "ag-ui", "ai-sdk")
HEARTBEAT = b": ping\n\n"
CLOSES_REQUEST = frozenset({"model_response", "model_response_recovered", "model_attempt_abandoned"})


@dataclass(frozen=True, slots=True)
class LiveSettings:
    poll_ms: int = 100
    idle_poll_ms: int = 200
    active_ms: int = 3_000
    heartbeat_ms: int = 15_000
    retry_ms: int = 1_000
    margin_ms: int = 10_000  # before the invocation's deadline (Lambda's 900 s, API Gateway's 15 min)
    max_ms: int = 900_000
    max_bytes: int = 150 * 1024 * 1024  # Lambda streams at most 200 MB

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> LiveSettings:
        env = os.environ if environ is None else environ
        base = cls()

        def num(name: str, default: int, low: int) -> int:
            try:
                return max(low, int(env.get(name, default)))
            except ValueError:
                return default

        return cls(
            poll_ms=num("STREAM_POLL_MS", base.poll_ms, 20),
            idle_poll_ms=num("STREAM_IDLE_POLL_MS", base.idle_poll_ms, 20),
            active_ms=num("STREAM_ACTIVE_MS", base.active_ms, 0),
            heartbeat_ms=num("STREAM_HEARTBEAT_MS", base.heartbeat_ms, 100),
            retry_ms=num("STREAM_RETRY_MS", base.retry_ms, 0),
            margin_ms=num("STREAM_MARGIN_MS", base.margin_ms, 0),
            max_ms=num("STREAM_MAX_MS", base.max_ms, 1_000),
            max_bytes=num("STREAM_MAX_BYTES", base.max_bytes, 1),
        )


@dataclass(frozen=True, slots=True)
class Options:
    """The query and headers of a subscription (validated by `options`)."""

    cursor: int = 0
    raw_cursor: str | None = None  # as sent (a mapper cursor may be "17.2")
    format: str = "native"
    thinking: bool = False
    through_parks: bool = False


def options(query: Mapping[str, str], last_event_id: str | None) -> Options:
    """The subscription's query and Last-Event-ID, each checked before anything is read: a
    format outside FORMATS, an after_seq or Last-Event-ID that is not an id this stream sends
    (the seq, an Int; "<seq>" or "<seq>.<k>" for craze/ag-ui) and a flag that is not true/false
    are refused naming the parameter (`errors.BadParameter`: 403 on this route, which declares
    no invalid_request), never read as "from the start" or as false."""
    from .errors import bad_param

    fmt = query.get("format", "native")
    if fmt not in FORMATS:
        raise bad_param(f"query parameter format must be one of {', '.join(FORMATS)}")
    after_seq = query.get("after_seq")
    if after_seq is not None and not _after_seq_ok(after_seq, fmt):
        raise bad_param(f"query parameter after_seq must be {_CURSOR_RULE[fmt != 'native']}")
    if last_event_id is not None:
        # Stripped (SSE lets a field carry a leading space); empty is no id at all (an SSE client
        # whose last id was reset sends none, or an empty one).
        last_event_id = last_event_id.strip() or None
    if last_event_id is not None:
        if not _after_seq_ok(last_event_id, fmt):
            raise bad_param(f"header Last-Event-ID must be {_CURSOR_RULE[fmt != 'native']}")
    raw = last_event_id if last_event_id is not None else after_seq
    seq_part = raw.split(".", 1)[0] if raw is not None and fmt != "native" else raw
    return Options(
        cursor=resume_cursor(seq_part, None),
        raw_cursor=raw,
        format=fmt,
        thinking=_flag(query, "thinking"),
        through_parks=_flag(query, "through_parks"),
    )


_CURSOR_RULE = ("an integer in 0..2^53-1 (an event seq)", 'an id of this stream ("<seq>" or "<seq>.<k>")')
_TRUE, _FALSE = ("true", "1"), ("false", "0")


def _flag(query: Mapping[str, str], name: str) -> bool:
    """A boolean query parameter: true/false (1/0 too); anything else is refused, never read as
    false."""
    from .errors import bad_param

    raw = query.get(name)
    if raw is None or raw in _FALSE:
        return False
    if raw in _TRUE:
        return True
    raise bad_param(f"query parameter {name} must be true or false")


_MAPPER_ID = re.compile(r"[0-9]{1,16}(\.[0-9]{1,6})?")


def _after_seq_ok(raw: str, fmt: str) -> bool:
    if fmt != "native":
        return _MAPPER_ID.fullmatch(raw) is not None and int(raw.split(".", 1)[0]) <= MAX_INT
    return raw.isascii() and raw.isdigit() and len(raw) <= 16 and int(raw) <= MAX_INT


class Subscription:
    """One run's live stream. `open()` checks the run (raises the route's typed errors, before
    any byte is sent); `frames()` then yields SSE bytes until the end; `stop()` (the client went
    away) ends it at the next tick."""

    def __init__(
        self,
        host: Any,
        principal: Principal,
        thread_id: str,
        run_id: str,
        opts: Options,
        settings: LiveSettings,
        *,
        deadline_ms: int | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        wall_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
    ) -> None:
        self.host = host
        self.principal = principal
        self.thread_id = thread_id
        self.run_id = run_id
        self.opts = opts
        self.settings = settings
        self.monotonic = monotonic
        self.wall_ms = wall_ms
        self._stopped = threading.Event()
        budget = settings.max_ms
        if deadline_ms is not None:
            budget = min(budget, deadline_ms - wall_ms() - settings.margin_ms)
        self.end_at = monotonic() + max(0, budget) / 1000
        self.branch_id = ""
        self.start = 0
        self.cursor = opts.cursor
        self.mapper: Any = None
        self.open_requests: dict[str, bool] = {}  # request in flight → deltas allowed
        self.shown: dict[tuple[str, bool], int] = {}  # (request, thinking?) → code points sent
        self.retry_until: int | None = None
        self.retry_sent = False
        self.polls = 0
        self._caught_up = False

    # ------------------------------------------------------------------ lifecycle
    def open(self) -> None:
        rec, start = self.host.run_start(self.principal, self.thread_id, self.run_id)
        self.branch_id, self.start = rec.branch_id, start
        self.cursor = max(self.cursor, start - 1)

    def stop(self) -> None:
        self._stopped.set()

    def frames(self) -> Iterator[bytes]:
        s = self.settings
        # Headers out now. The native stream opens with the reconnect delay; a craze / AG-UI one
        # with a comment, because it has no result message: there a `retry:` only ever ends a
        # connection the host wants resumed, and a clean close after anything else is the end.
        yield b"retry: %d\n\n" % s.retry_ms if self.opts.format == "native" else b": open\n\n"
        sent = 0
        last_send = last_change = self.monotonic()
        seen_head: int | None = None
        while not self._stopped.is_set():
            out, done, changed = self._tick(seen_head)
            if changed is not None:
                seen_head = changed
                last_change = self.monotonic()
            now = self.monotonic()
            if out:
                chunk = b"".join(out)
                sent += len(chunk)
                last_send = now
                yield chunk
            if done:
                if self.opts.format == "ai-sdk":
                    yield _ai_sdk_done()
                return
            if sent >= s.max_bytes or now >= self.end_at:
                yield b"retry: %d\n\n" % (0 if sent >= s.max_bytes else s.retry_ms)
                return
            if now - last_send >= s.heartbeat_ms / 1000:
                last_send = now
                yield HEARTBEAT
            active = bool(self.open_requests) or now - last_change < s.active_ms / 1000
            tick = (s.poll_ms if active else s.idle_poll_ms) / 1000
            self._stopped.wait(max(0.0, min(tick, self.end_at - now)))

    # ------------------------------------------------------------------ one tick
    def _tick(self, seen_head: int | None) -> tuple[list[bytes], bool, int | None]:
        """(frames, the stream is done, the new head seq if it moved)."""
        first = not self._caught_up
        self.polls += 1
        head, rows = self._poll()
        out: list[bytes] = []
        for rid, row in rows.items():  # deltas of requests known before this tick's events
            if self.open_requests.get(rid):
                out += self._deltas(rid, row)
        if head is None or head.head_seq == seen_head:
            return out, False, None
        with self.host._lock:  # a control builds into the cached view before it commits
            view = self.host._load(head)
            after = 0 if first else self.cursor  # the first tick rebuilds state from the run's start
            events = list(_run_events(view.fold.events, view.fold.known, self.start, after))
            outcome = run_outcome(
                view.fold.events, self.run_id, thread_id=self.thread_id, branch_id=self.branch_id
            )
        if first:
            out += self._catch_up(
                events, mapper_kwargs(self.opts.format, view.fold, self.start, self.opts.cursor)
            )
        else:
            for ev in events:
                out += self._event(ev)
        out += self._status()
        if outcome is not None and not (self.opts.through_parks and outcome.get("status") == "parked"):
            out += self._result(outcome)
            return out, True, head.head_seq
        return out, False, head.head_seq

    def _poll(self) -> tuple[Any, dict[str, Any]]:
        deltas = getattr(self.host.stores, "deltas", None)
        wanted = [rid for rid, allowed in self.open_requests.items() if allowed]
        if deltas is None:
            return self.host.store.head(self.branch_id), {}
        head, rows = deltas.head_and_rows(self.branch_id, wanted)
        return head, rows

    # ------------------------------------------------------------------ messages
    def _catch_up(self, events: list[dict[str, Any]], kw: dict[str, Any]) -> list[bytes]:
        """The first tick: state from every event of the run, output after the cursor."""
        self._caught_up = True
        for ev in events:
            self._track(ev, live=ev["seq"] > self.cursor)
        if self.opts.format == "native":
            out = [event_message(ev) for ev in events if ev["seq"] > self.cursor]
        else:
            self.mapper, outs = _mapper_class(self.opts.format).resumed(events, self.opts.raw_cursor, **kw)
            out = [_frame(o) for o in outs]
        if events:
            self.cursor = max(self.cursor, events[-1]["seq"])
        return out

    def _event(self, ev: dict[str, Any]) -> list[bytes]:
        self._track(ev, live=True)
        self.cursor = ev["seq"]
        if self.mapper is None:
            return [event_message(ev)]
        return [_frame(o) for o in self.mapper.feed({"kind": "event", "event": ev})]

    def _track(self, ev: dict[str, Any], *, live: bool) -> None:
        """Requests in flight and retry waits, from the committed events."""
        typ, data = ev["type"], ev.get("data") or {}
        if typ == "model_request":
            # Deltas only for a turn's request, and only if this connection may show all of
            # them: a request the client knew before reconnecting may have shown some already.
            self.open_requests[ev["event_id"]] = live and data.get("purpose", "turn") == "turn"
            self.retry_until = None
        elif typ in CLOSES_REQUEST:
            self.open_requests.pop(str(data.get("request_event_id")), None)
        elif typ == "retry_scheduled":
            self.retry_until, self.retry_sent = int(data.get("not_before") or 0), False
        elif typ in ("turn_completed", "user_input", "cancelled"):
            self.retry_until = None

    def _deltas(self, rid: str, row: Any) -> list[bytes]:
        out: list[bytes] = []
        for thinking in (False, True):
            if thinking and self.opts.format == "native" and not self.opts.thinking:
                continue
            text, at = row.part(thinking)
            shown = self.shown.get((rid, thinking), 0)
            if shown < 0 or not text:
                continue
            if at > shown:  # the row moved past what this stream showed: no more for it
                self.shown[(rid, thinking)] = -1
                continue
            chunk = text[shown - at :]
            if not chunk:
                continue
            self.shown[(rid, thinking)] = shown + len(chunk)
            msg: dict[str, Any] = {"kind": "delta", "request_event_id": rid, "text": chunk, "offset": shown}
            if thinking:
                msg["thinking"] = True
            if self.mapper is not None and row.updated_at:
                # A mapped format stamps each delta (AG-UI timestamps) with the time the worker
                # wrote its row (its wall clock), so a re-read shows the same stamp.
                msg["time"] = row.updated_at
            out += self._transient(msg)
        return out

    def _status(self) -> list[bytes]:
        until = self.retry_until
        if until is None or self.retry_sent or self.wall_ms() >= until:
            return []
        self.retry_sent = True
        return self._transient({"kind": "status", "status": "retry_wait", "until": until})

    def _transient(self, msg: dict[str, Any]) -> list[bytes]:
        if self.mapper is None:
            return [b"data: %s\n\n" % orjson.dumps(msg)]
        return [_frame(o) for o in self.mapper.feed(msg)]

    def _result(self, outcome: dict[str, Any]) -> list[bytes]:
        if self.mapper is None:
            return [result_message(self.run_id, outcome)]
        msg = {"kind": "result", "run_id": self.run_id, "result": outcome}
        return [_frame(o) for o in self.mapper.feed(msg)]


def _mapper_class(fmt: str) -> Any:
    from ..streams import AgUiMapper, AiSdkMapper, CrazeMapper

    return {"craze": CrazeMapper, "ai-sdk": AiSdkMapper}.get(fmt, AgUiMapper)


def _ai_sdk_done() -> bytes:
    # The AI SDK's UI message stream ends with this non-JSON line (after the run's end chunk).
    from ..streams.aisdk import DONE

    return DONE


def format_headers(fmt: str) -> list[tuple[str, str]]:
    """Response headers a stream format adds to the SSE ones (the AI SDK's protocol marker)."""
    if fmt != "ai-sdk":
        return []
    from ..streams.aisdk import HEADER

    return [HEADER]


def mapper_kwargs(fmt: str, fold: Any, start: int, cursor: int = 0) -> dict[str, Any]:
    """What a format's mapper takes from the thread beyond the run's own events: for craze the
    session's usage before the run (the fold's sums at the run's user_input, no re-read) and the
    earlier turns a fresh connection gets replayed (`streams.craze_replay`, bounded) — read only
    when the connection's cursor (its seq part) is before the run: a resume gets no replay."""
    if fmt != "craze":
        return {}
    from ..streams.craze_replay import history_window

    first = history_window(fold.inputs, start) if cursor < start else 0
    history = []
    if first:  # seq n is fold.events[n - 1]: the resolved chain is contiguous from 1
        span = range(first - 1, start - 1)
        history = [fold.events[i] for i in span if fold.known[i]]
    return {"session_before": fold.usage_at_input.get(start, ()), "history": history}


def _frame(o: Any) -> bytes:
    data = b"data: %s\n\n" % orjson.dumps(o.data)
    return data if o.id is None else b"id: %s\n%s" % (o.id.encode(), data)
