"""The client without I/O: every route as a `Call`, the retry policy, answers into results or
typed errors, and the run stream's resume state. `Client` and `AsyncClient` only send.

Retries (what may be sent again, so nothing is applied twice):
- a connect failure (nothing reached the host) and a 429 (the gateway throttled before any
  function ran): every call, after `Retry-After` when the gateway gives one;
- a broken connection, a read timeout or a 5xx: only calls that are idempotent on the host,
  every GET and `POST /v1/runs` (its Idempotency-Key replays the receipt). A control POST
  (approve, answer, cancel, ...) is not sent again: it may have been applied.
The Idempotency-Key of a start is generated once per call (or taken from the caller) and reused
by every retry; a failure carries it (`ThreadsError.idempotency_key`) for a later retry.

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
import os
import random
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote, urlencode

import httpx

from .errors import ConnectionFailed, ThreadsError, UnexpectedResponse, make_error

DEFAULT_URL = "http://127.0.0.1:8787"
DEFAULT_TOKEN = "dev:api:local:alice"  # `threads-aws dev --dev-tokens` accepts it
ENV_URL = "THREADS_URL"
ENV_TOKEN = "THREADS_TOKEN"
USER_AGENT = "threads-aws-client/1"
DEFAULT_TIMEOUT = httpx.Timeout(35.0, connect=10.0)  # a route answers within the gateway's 29 s
STREAM_TIMEOUT = httpx.Timeout(65.0, connect=10.0)  # a window lasts up to ~28 s, then closes
DEFAULT_RETRY_MS = 1_000  # before the server has said `retry:`

Format = Literal["native", "craze", "ag-ui"]
FORMATS: tuple[str, ...] = ("native", "craze", "ag-ui")
SERVED_FORMATS: tuple[str, ...] = FORMATS


def resolve(base_url: str | None, token: str | None) -> tuple[str, str]:
    """Explicit values, else THREADS_URL / THREADS_TOKEN, else the local host and its dev token."""
    url = base_url or os.environ.get(ENV_URL) or DEFAULT_URL
    return url.rstrip("/"), token or os.environ.get(ENV_TOKEN) or DEFAULT_TOKEN


def new_idempotency_key() -> str:
    return str(uuid.uuid4())


def seg(value: str) -> str:
    """One path segment, percent-encoded (effect keys contain ':')."""
    return quote(value, safe="")


@dataclass(frozen=True)
class Retries:
    """How often and how long to retry what may be retried (see the module docstring)."""

    attempts: int = 3  # retries after the first try
    backoff_s: float = 0.25  # doubled per retry, with jitter
    max_backoff_s: float = 8.0

    def delay(self, attempt: int, retry_after: str | None = None) -> float:
        if retry_after is not None:
            try:
                return min(max(float(retry_after), 0.0), self.max_backoff_s * 4)
            except ValueError:
                pass  # an HTTP date: fall back to our own backoff
        base = min(self.backoff_s * (2**attempt), self.max_backoff_s)
        return base * (0.5 + random.random() / 2)


R = TypeVar("R")


@dataclass
class Call(Generic[R]):
    """One route call: what to send, what success looks like, and whether a resend is safe.
    `R` is the shape of its success body (for the client methods' types only)."""

    method: str
    path: str
    ok: int = 200
    params: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    idempotent: bool = False
    idempotency_key: str | None = None

    @classmethod
    def get(cls, path: str, params: Mapping[str, Any] | None = None) -> Call[Any]:
        return cls("GET", path, params=_params(params), idempotent=True)

    @classmethod
    def delete(cls, path: str) -> Call[Any]:
        # Resending a delete removes nothing twice: at worst the resend answers not_found.
        return cls("DELETE", path, idempotent=True)

    @classmethod
    def post(
        cls,
        path: str,
        body: Any = None,
        *,
        ok: int = 200,
        params: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> Call[Any]:
        headers = {}
        raw = None
        if body is not None:
            # One serialization per call: a retry sends the same bytes (the key binds their hash).
            raw = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
            headers["Content-Type"] = "application/json"
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key
        return cls(
            "POST",
            path,
            ok=ok,
            params=_params(params),
            body=raw,
            headers=headers,
            idempotent=idempotency_key is not None,
            idempotency_key=idempotency_key,
        )

    def request_kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {"headers": self.headers}
        if self.params:
            kw["params"] = self.params
        if self.body is not None:
            kw["content"] = self.body
        return kw


def _params(params: Mapping[str, Any] | None) -> dict[str, str]:
    return {k: str(v) for k, v in (params or {}).items() if v is not None}


def headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "User-Agent": USER_AGENT, "Accept": "application/json"}


# ------------------------------------------------------------------ retry decisions
_NOTHING_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


def retry_after_exception(
    call: Call, attempt: int, exc: httpx.TransportError, retries: Retries
) -> float | None:
    """Seconds to wait before resending after a transport failure, or None to give up."""
    if attempt >= retries.attempts:
        return None
    if isinstance(exc, _NOTHING_SENT) or call.idempotent:
        return retries.delay(attempt)
    return None


def retry_after_response(call: Call, attempt: int, resp: httpx.Response, retries: Retries) -> float | None:
    """Seconds to wait before resending after this answer, or None to take it as it is."""
    if attempt >= retries.attempts:
        return None
    status = resp.status_code
    if status == 429 or (status in (500, 502, 503, 504) and call.idempotent):
        return retries.delay(attempt, resp.headers.get("Retry-After"))
    return None


def connection_failed(call: Call, exc: httpx.TransportError) -> ConnectionFailed:
    what = type(exc).__name__
    return ConnectionFailed(
        f"{call.method} {call.path}: {what}: {exc or 'no answer'}", idempotency_key=call.idempotency_key
    )


# ------------------------------------------------------------------ answers
def error_from(resp: httpx.Response, idempotency_key: str | None = None) -> ThreadsError:
    """The typed error of a non-success answer (its ErrorBody), or UnexpectedResponse."""
    status = resp.status_code
    try:
        body = resp.json()
        err = body["error"]
        code, message = err["code"], err["message"]
        if not isinstance(code, str) or not isinstance(message, str):
            raise TypeError(code)
    except (ValueError, KeyError, TypeError):
        text = resp.text[:300].strip() if resp.content else ""
        return UnexpectedResponse(
            f"HTTP {status} without an error body{': ' + text if text else ''}",
            status=status,
            idempotency_key=idempotency_key,
        )
    return make_error(code, message, status, idempotency_key)


def result(call: Call, resp: httpx.Response) -> Any:
    if resp.status_code != call.ok:
        if 200 <= resp.status_code < 300:
            raise UnexpectedResponse(
                f"{call.method} {call.path}: HTTP {resp.status_code}, expected {call.ok}",
                status=resp.status_code,
            )
        raise error_from(resp, call.idempotency_key)
    try:
        return resp.json()
    except ValueError:
        raise UnexpectedResponse(
            f"{call.method} {call.path}: the answer is not JSON", status=resp.status_code
        ) from None


def next_page(resp: httpx.Response, current: httpx.URL) -> httpx.URL | None:
    """The RFC 8288 `Link: <…>; rel="next"` target, resolved against the request URL."""
    link = resp.links.get("next")
    if not link or not link.get("url"):
        return None
    target = current.join(link["url"])
    return None if target == current else target


def check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if fmt not in SERVED_FORMATS:
        raise NotImplementedError(f"the {fmt} run stream is not served; use format='native'")


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
