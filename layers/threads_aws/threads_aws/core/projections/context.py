"""The ``policy.context`` projections: ``cache_breaks`` and ``compaction``.

Both are derived from the turn responses and the context events between them; neither is stored
(semantics §8 "Derived, never stored"). A compaction side request's response is not a turn
response, so it never counts as a cache read drop.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ._chain import RESPONSE_TYPES, Event, JsonObj, data_of, is_int, policy_section

#: The events that explain a cache read drop, first one between the two responses wins.
CACHE_BREAK_CAUSES = frozenset({"settings_changed", "compacted", "context_edited", "tools_changed"})


def cache_breaks(events: Iterable[Event]) -> list[JsonObj] | None:
    """``{request_event_id, likely_cause}`` per turn response whose cache reads dropped.

    A drop is ``20·now < 19·prev`` and ``prev − now ≥ 2000`` against the previous turn response.
    ``likely_cause`` is the type of the first settings_changed / compacted / context_edited /
    tools_changed between the two responses, else ``ttl_expired`` when the responses' ``time``
    gap exceeds ``policy.context.cache_ttl_ms``, else ``unknown``. ``None`` without
    ``policy.context``.
    """
    policy: Mapping[str, Any] | None = None
    purposes: dict[Any, Any] = {}
    prev_reads: int | None = None
    prev_time: int | None = None
    seen_prev = False
    first_cause: str | None = None
    out: list[JsonObj] = []
    for ev in events:
        t = ev.get("type")
        d = data_of(ev)
        if t == "thread_started":
            p = d.get("policy")
            policy = p if isinstance(p, Mapping) else None
        if t in CACHE_BREAK_CAUSES:
            if first_cause is None:
                first_cause = str(t)
        elif t == "model_request":
            purposes[ev["event_id"]] = d.get("purpose", "turn")
        elif t in RESPONSE_TYPES:
            rid = d.get("request_event_id")
            if purposes.get(rid, "turn") != "turn":
                continue  # a compaction side response is not a turn response
            usage = d.get("usage")
            reads = usage.get("cache_read_tokens") if isinstance(usage, Mapping) else None
            now_reads = reads if is_int(reads) else None
            t_now = ev.get("time")
            if seen_prev and prev_reads is not None and now_reads is not None:
                if 20 * now_reads < 19 * prev_reads and prev_reads - now_reads >= 2000:
                    cause = first_cause
                    if cause is None:
                        ctx = policy_section(policy, "context") or {}
                        ttl = ctx.get("cache_ttl_ms")
                        if (
                            is_int(ttl)
                            and is_int(t_now)
                            and prev_time is not None
                            and t_now - prev_time > ttl
                        ):
                            cause = "ttl_expired"
                        else:
                            cause = "unknown"
                    out.append({"request_event_id": rid, "likely_cause": cause})
            seen_prev = True
            prev_reads = now_reads
            prev_time = t_now if is_int(t_now) else None
            first_cause = None
    if policy_section(policy, "context") is None:
        return None
    return out


def compaction(events: Iterable[Event]) -> JsonObj:
    """``compaction_failed`` events since the last ``compacted``, and whether they reach
    ``policy.context.compact.max_failures`` (never open when that is absent)."""
    policy: Mapping[str, Any] | None = None
    failures = 0
    for ev in events:
        t = ev.get("type")
        if t == "thread_started":
            p = data_of(ev).get("policy")
            policy = p if isinstance(p, Mapping) else None
        elif t == "compacted":
            failures = 0
        elif t == "compaction_failed":
            failures += 1
    compact = policy_section(policy_section(policy, "context"), "compact") or {}
    limit = compact.get("max_failures")
    return {"consecutive_failures": failures, "breaker_open": is_int(limit) and failures >= limit}
