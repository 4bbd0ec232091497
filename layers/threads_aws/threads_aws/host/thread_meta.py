"""What an app sets on a thread and searches by (ours, add-only; issue 18 §6).

`PATCH /v1/threads/{thread_id}` takes ``{title?, metadata?}`` (at least one): `title` replaces
the list title (1..TITLE_MAX characters; the first prompt's title is kept only until then);
`metadata` is merged into the thread's string map, a null value removing its key. Limits:
at most MAX_KEYS keys after the merge, a key matches KEY_RE (1..64 of ``A-Za-z0-9_.:-``), a
value is a string of at most VALUE_MAX characters. Every check runs before anything is
written (a merge past MAX_KEYS is refused whole); another tenant's thread is not_found.

`GET /v1/threads` filters (each optional, all combined with AND): `status` (a ThreadStatus),
`agent`, `metadata[key]=value` (up to MAX_FILTER_PAIRS pairs, values up to FILTER_VALUE_MAX),
`updated_after` / `updated_before` (ms, exclusive, against the last status change: the
listing's order), `title_contains` (a case-insensitive substring of the title, 1..TITLE_MAX
characters). Which of them are index
reads and which are filtered reads: `store.thread_query`. A bad value is invalid_request naming
the parameter, before anything is read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from ..store.thread_query import ThreadFilter
from .errors import bad_param, invalid

TITLE_MAX = 256
MAX_KEYS = 16
# a listing's request line stays within API Gateway's 10,240 bytes, whatever the characters
MAX_FILTER_PAIRS = 4
FILTER_VALUE_MAX = 128
VALUE_MAX = 512
AGENT_MAX = 128
KEY_RE = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
STATUSES = frozenset({"idle", "in_turn", "parked", "cancelled", "inspection_only"})
MAX_MS = 2**53 - 1
_DIGITS = re.compile(r"[0-9]{1,16}")
_MD_PARAM = re.compile(r"metadata\[(.*)\]", re.S)


def patch_body(body: Mapping[str, Any]) -> tuple[str | None, dict[str, str | None] | None]:
    """(title, metadata patch) of a PATCH body already checked against UpdateThreadRequest;
    the limits are checked here again, so they hold whatever the schema validator knows."""
    unknown = set(body) - {"title", "metadata"}
    if unknown:
        raise invalid(f"body.{sorted(unknown)[0]} is not a field of UpdateThreadRequest")
    if not body:
        raise invalid("body must set title or metadata")
    title = body.get("title")
    if "title" in body and (not isinstance(title, str) or not 1 <= len(title) <= TITLE_MAX):
        raise invalid(f"body.title must be a string of 1..{TITLE_MAX} characters")
    md = body.get("metadata")
    if "metadata" not in body:
        return title, None
    if not isinstance(md, dict):
        raise invalid("body.metadata must be an object of strings (null removes a key)")
    if len(md) > MAX_KEYS:
        raise invalid(f"body.metadata must hold at most {MAX_KEYS} keys")
    for k, v in md.items():
        if not KEY_RE.fullmatch(k):
            raise invalid(f"body.metadata key {k[:80]!r} must be 1..64 of A-Za-z0-9_.:-")
        if v is not None and (not isinstance(v, str) or len(v) > VALUE_MAX):
            raise invalid(f"body.metadata.{k} must be a string of at most {VALUE_MAX} characters, or null")
    return title, md


def _ms(query: Mapping[str, str], name: str) -> int | None:
    raw = query.get(name)
    if raw is None:
        return None
    if not _DIGITS.fullmatch(raw) or int(raw) > MAX_MS:
        raise bad_param(f"query parameter {name} must be an integer of ms in 0..{MAX_MS}")
    return int(raw)


def filter_params(query: Mapping[str, str]) -> ThreadFilter:
    """The listing's filters, checked before anything is read."""
    status = query.get("status")
    if status is not None and status not in STATUSES:
        raise bad_param(f"query parameter status must be one of {', '.join(sorted(STATUSES))}")
    agent = query.get("agent")
    if agent is not None and not 1 <= len(agent) <= AGENT_MAX:
        raise bad_param(f"query parameter agent must be 1..{AGENT_MAX} characters")
    text = query.get("title_contains")
    if text is not None and not 1 <= len(text) <= TITLE_MAX:
        raise bad_param(f"query parameter title_contains must be 1..{TITLE_MAX} characters")
    metadata: dict[str, str] = {}
    for name, value in query.items():
        m = _MD_PARAM.fullmatch(name)
        if m is None:
            continue
        if not KEY_RE.fullmatch(m.group(1)):
            raise bad_param("query parameter metadata[key]: a key is 1..64 of A-Za-z0-9_.:-")
        if len(value) > FILTER_VALUE_MAX:
            raise bad_param(f"query parameter {name} must be at most {FILTER_VALUE_MAX} characters")
        metadata[m.group(1)] = value
    if len(metadata) > MAX_FILTER_PAIRS:
        raise bad_param(f"query parameter metadata: at most {MAX_FILTER_PAIRS} pairs")
    return ThreadFilter(
        status=status,
        agent=agent,
        metadata=metadata,
        updated_after=_ms(query, "updated_after"),
        updated_before=_ms(query, "updated_before"),
        title_contains=text,
    )


def filter_query(f: ThreadFilter) -> dict[str, str]:
    """The filters as query parameters again: the next page's Link carries them."""
    out = {
        "status": f.status,
        "agent": f.agent,
        "updated_after": None if f.updated_after is None else str(f.updated_after),
        "updated_before": None if f.updated_before is None else str(f.updated_before),
        "title_contains": f.title_contains,
    }
    kept = {k: v for k, v in out.items() if v is not None}
    kept.update({f"metadata[{k}]": v for k, v in sorted(f.metadata.items())})
    return kept


def next_link(before: str | None, limit: int, f: ThreadFilter) -> dict[str, str]:
    if before is None:
        return {}
    params = {"before": before, "limit": str(limit), **filter_query(f)}
    return {"Link": f'<threads?{urlencode(params)}>; rel="next"'}


__all__ = ["ThreadFilter", "filter_params", "next_link", "patch_body"]
