"""The client without I/O: every route as a `Call`, the retry policy, answers into results or
typed errors. `Client` and `AsyncClient` only send.

Retries (what may be sent again, so nothing is applied twice):
- a connect failure (nothing reached the host) and a 429 (the gateway throttled before any
  function ran): every call, after `Retry-After` when the gateway gives one;
- a broken connection, a read timeout or a 5xx: only calls that are idempotent on the host,
  every GET and `POST /v1/runs` (its Idempotency-Key replays the receipt). A control POST
  (approve, answer, cancel, ...) is not sent again: it may have been applied.
The Idempotency-Key of a start is generated once per call (or taken from the caller) and reused
by every retry; a failure carries it (`ThreadsError.idempotency_key`) for a later retry.
The run stream's resume state is `_streams`'.
"""

from __future__ import annotations

import json
import os
import random
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote

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
    def delete(cls, path: str, *, ok: int = 200) -> Call[Any]:
        # Resending a delete removes nothing twice: at worst the resend answers not_found.
        return cls("DELETE", path, ok=ok, idempotent=True)

    @classmethod
    def patch(cls, path: str, body: Any) -> Call[Any]:
        # A PATCH here sets values (a title, metadata keys): sending it twice leaves the same.
        raw = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
        return cls("PATCH", path, body=raw, headers={"Content-Type": "application/json"}, idempotent=True)

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
    if call.ok == 204:
        return None  # No Content
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
