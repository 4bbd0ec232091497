"""Responses that fit Lambda's 6 MB: the timeline in pages, and the measure SSE windows share.

A buffered Lambda proxy answer is at most 6,291,556 bytes *as the runtime serialises it*: the
body travels as a JSON string, so its quotes, backslashes and newlines count twice. `wire_size`
is that measure; `PAGE_BYTES` (4 MiB of it) leaves room for headers and the envelope. Any one
entry fits (a line is at most 1 MiB; escaped, at most ~2 MiB), so a page always holds at least
one entry, and every timeline is readable whatever its size.

Timeline paging (ours, add-only: `x-threads-aws: ours` in the served openapi.json; the fork-points
list pages the same way, by its points' seqs, with `fork-points?...` links):
- `after_seq` (Int, default 0): only entries whose event seq is greater. Seqs increase along the
  resolved chain (ancestor segments, then this branch), so a cursor never skips or repeats.
- `limit` (1..MAX_LIMIT, default unbounded): at most this many entries.
- A page that stops before the end says where the rest is with an RFC 8288 header,
  `Link: <timeline?after_seq=N[&limit=L][&branch_id=B]>; rel="next"` — a reference relative to the
  request's own URL, so it holds behind any stage or base path. No Link: this is the last page.
  Without parameters a timeline that fits is answered whole, as before.
A malformed value is refused naming the parameter: 403 `forbidden` (these routes declare no
invalid_request; `http.dispatch`), never `not_found`, which would say the thread is gone.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlencode

import orjson

from .errors import bad_param

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
        raise bad_param(f"query parameter {name} must be an integer in {low}..{high}")
    return int(raw)


def page_params(query: Mapping[str, str]) -> tuple[int, int | None]:
    """(after_seq, limit) of a timeline request; checked before the branch is read."""
    return _int_param(query, "after_seq", 0, MAX_INT) or 0, _int_param(query, "limit", 1, MAX_LIMIT)


def _take(
    items: list[Any], seq_of: Callable[[Any], int], query: Mapping[str, str], budget: int, used: int
) -> tuple[list[bytes], dict[str, Any] | None]:
    """The serialised items of one page, and the next page's query (None: this is the last)."""
    after, limit = page_params(query)
    items = [i for i in items if seq_of(i) > after]
    parts: list[bytes] = []
    for item in items:
        raw = orjson.dumps(item)
        cost = wire_size(raw) + 1
        if parts and (used + cost > budget or (limit is not None and len(parts) >= limit)):
            break
        parts.append(raw)
        used += cost
    if len(parts) == len(items):
        return parts, None
    params: dict[str, Any] = {"after_seq": seq_of(items[len(parts) - 1])}
    if limit is not None:
        params["limit"] = limit
    if "branch_id" in query:
        params["branch_id"] = query["branch_id"]
    return parts, params


def _link(route: str, params: dict[str, Any] | None) -> dict[str, str]:
    return {} if params is None else {"Link": f'<{route}?{urlencode(params)}>; rel="next"'}


def timeline_page(
    timeline: Mapping[str, Any], query: Mapping[str, str], *, budget: int = PAGE_BYTES
) -> tuple[bytes, dict[str, str]]:
    """The body and headers of one page of `Host.timeline`'s answer."""
    head = orjson.dumps({"branch_id": timeline["branch_id"], "thread_id": timeline["thread_id"]})
    parts, more = _take(timeline["entries"], lambda e: e["event"]["seq"], query, budget, wire_size(head) + 16)
    body = head[:-1] + b',"entries":[' + b",".join(parts) + b"]}"
    return body, _link("timeline", more)


def fork_points_page(
    points: list[dict[str, Any]], query: Mapping[str, str], *, budget: int = PAGE_BYTES
) -> tuple[bytes, dict[str, str]]:
    """One page of `Host.fork_points` (each snapshot's data rides along, so a long thread's
    list can outgrow a response too): the same after_seq/limit/Link, `fork-points?...`."""
    parts, more = _take(points, lambda p: p["seq"], query, budget, 2)
    return b"[" + b",".join(parts) + b"]", _link("fork-points", more)
