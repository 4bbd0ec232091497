"""Responses that fit Lambda's 6 MB: the timeline in pages, and the measure SSE windows share.

A buffered Lambda proxy answer is at most 6,291,556 bytes *as the runtime serialises it*: the
body travels as a JSON string, so its quotes, backslashes and newlines count twice. `wire_size`
is that measure; `PAGE_BYTES` (4 MiB of it) leaves room for headers and the envelope. Any one
entry fits (a line is at most 1 MiB; escaped, at most ~2 MiB), so a page always holds at least
one entry, and every timeline is readable whatever its size.

Timeline paging (ours, add-only: `x-threads-aws: ours` in the served openapi.json):
- `after_seq` (Int, default 0): only entries whose event seq is greater. Seqs increase along the
  resolved chain (ancestor segments, then this branch), so a cursor never skips or repeats.
- `limit` (1..MAX_LIMIT, default unbounded): at most this many entries.
- A page that stops before the end says where the rest is with an RFC 8288 header,
  `Link: <timeline?after_seq=N[&limit=L][&branch_id=B]>; rel="next"` — a reference relative to the
  request's own URL, so it holds behind any stage or base path. No Link: this is the last page.
  Without parameters a timeline that fits is answered whole, as before.
A malformed value is `not_found` (the route has no invalid_request code, as for a malformed
branch_id).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

import orjson

from .errors import invalid

PAGE_BYTES = 4 * 1024 * 1024
MAX_LIMIT = 10_000
MAX_INT = 2**53 - 1
_DIGITS = re.compile(r"[0-9]{1,16}")


def wire_size(data: bytes) -> int:
    """Bytes of `data` once JSON-escaped into the proxy response (UTF-8 stays raw, as the
    python3.12+ runtime writes it; our bodies hold no other control characters)."""
    return len(data) + data.count(b'"') + data.count(b"\\") + data.count(b"\n")


def _int_param(query: Mapping[str, str], name: str, low: int, high: int) -> int | None:
    raw = query.get(name)
    if raw is None:
        return None
    if not _DIGITS.fullmatch(raw) or not low <= int(raw) <= high:
        raise invalid(f"query parameter {name} must be an integer in {low}..{high}")
    return int(raw)


def page_params(query: Mapping[str, str]) -> tuple[int, int | None]:
    """(after_seq, limit) of a timeline request; checked before the branch is read."""
    return _int_param(query, "after_seq", 0, MAX_INT) or 0, _int_param(query, "limit", 1, MAX_LIMIT)


def timeline_page(
    timeline: Mapping[str, Any], query: Mapping[str, str], *, budget: int = PAGE_BYTES
) -> tuple[bytes, dict[str, str]]:
    """The body and headers of one page of `Host.timeline`'s answer."""
    after, limit = page_params(query)
    entries = [e for e in timeline["entries"] if e["event"]["seq"] > after]
    head = orjson.dumps({"branch_id": timeline["branch_id"], "thread_id": timeline["thread_id"]})
    used = wire_size(head) + 16
    parts: list[bytes] = []
    for entry in entries:
        raw = orjson.dumps(entry)
        cost = wire_size(raw) + 1
        if parts and (used + cost > budget or (limit is not None and len(parts) >= limit)):
            break
        parts.append(raw)
        used += cost
    body = head[:-1] + b',"entries":[' + b",".join(parts) + b"]}"
    headers: dict[str, str] = {}
    if len(parts) < len(entries):
        last = entries[len(parts) - 1]["event"]["seq"]
        params: dict[str, Any] = {"after_seq": last}
        if limit is not None:
            params["limit"] = limit
        if "branch_id" in query:
            params["branch_id"] = query["branch_id"]
        headers["Link"] = f'<timeline?{urlencode(params)}>; rel="next"'
    return body, headers
