"""What every projection reads off a resolved chain: the event shape and a few tolerant getters.

A projection takes parsed events (envelope keys ``seq, event_id, type, epoch, actor, time,
data, ...``; no header or head lines), oldest first. Rules only ever match known event types, so
unknown non-critical events are skipped, and a getter here never raises on a malformed value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeGuard

Event = Mapping[str, Any]
JsonObj = dict[str, Any]

#: The two events that answer a model_request with a response (a turn's or a side request's).
RESPONSE_TYPES = frozenset({"model_response", "model_response_recovered"})


def data_of(ev: Event) -> Mapping[str, Any]:
    d = ev.get("data")
    return d if isinstance(d, Mapping) else {}


def is_int(v: object) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def policy_section(policy: Mapping[str, Any] | None, name: str) -> Mapping[str, Any] | None:
    if policy is None:
        return None
    s = policy.get(name)
    return s if isinstance(s, Mapping) else None
