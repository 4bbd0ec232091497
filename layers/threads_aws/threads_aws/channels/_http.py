"""The senders' HTTP transport (stdlib ``http.client``), classifying each failure by whether the
request can have reached the provider.

- The TCP/TLS connect fails (refused, unreachable, handshake, connect timeout): nothing was
  sent → ``SendRetryable``.
- After the connect, sending the request or reading the answer fails: the provider may have
  acted → ``SendOutcomeUnknown`` (``timeout`` or ``transport_error``).
The connect is done on its own, before a byte of the request is written, so the two are told
apart exactly rather than guessed from an exception message.
"""

from __future__ import annotations

import http.client
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from .errors import SendOutcomeUnknown, SendRetryable


@dataclass(frozen=True)
class HttpResult:
    status: int
    headers: Mapping[str, str]  # lower-cased names
    body: bytes


def request(
    method: str,
    url: str,
    *,
    body: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = 10.0,
) -> HttpResult:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url!r}")
    conn_cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = conn_cls(parts.hostname, parts.port, timeout=timeout_s)
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    try:
        try:
            conn.connect()
        except OSError as e:  # ConnectionRefusedError, TimeoutError, ssl.SSLError, gaierror
            raise SendRetryable(f"connect to {parts.hostname} failed: {e!r}") from e
        try:
            conn.request(method, target, body=body, headers=dict(headers or {}))
            resp = conn.getresponse()
            data = resp.read()
        except TimeoutError as e:
            raise SendOutcomeUnknown(f"{method} {target}: no answer in {timeout_s}s", reason="timeout") from e
        except (OSError, http.client.HTTPException) as e:
            raise SendOutcomeUnknown(f"{method} {target}: {e!r}", reason="transport_error") from e
        return HttpResult(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)
    finally:
        conn.close()


def retry_after(headers: Mapping[str, str]) -> float | None:
    raw = headers.get("retry-after")
    try:
        return max(0.0, float(raw)) if raw is not None else None
    except ValueError:
        return None
