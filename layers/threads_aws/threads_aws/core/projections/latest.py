"""The latest-value projections: ``todos``, ``mode`` and ``output``.

Each is the value of the last event of its kind on the chain (or the pinned default before one).
Values are deep-copied out, so a caller may mutate what it gets without touching the events.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from ._chain import Event, JsonObj, data_of, policy_section


def todos(events: Iterable[Event]) -> list[Any]:
    """The latest ``todos_updated.todos``, else ``[]``."""
    latest: Any = []
    for ev in events:
        if ev.get("type") == "todos_updated":
            latest = data_of(ev).get("todos", [])
    return copy.deepcopy(list(latest))


def mode(events: Iterable[Event]) -> str:
    """``policy.permissions.mode`` (``default`` when absent), then the latest ``mode_changed.to``."""
    current = "default"
    for ev in events:
        t = ev.get("type")
        if t == "thread_started":
            pol = data_of(ev).get("policy")
            p = policy_section(pol if isinstance(pol, Mapping) else None, "permissions")
            if p is not None and isinstance(p.get("mode"), str):
                current = p["mode"]
        elif t == "mode_changed":
            to = data_of(ev).get("to")
            if isinstance(to, str):
                current = to
    return current


def output(events: Iterable[Event]) -> JsonObj:
    """The latest ``output_validated`` as ``{outcome, value?}``, else ``{outcome: "none"}``."""
    latest: Mapping[str, Any] | None = None
    for ev in events:
        if ev.get("type") == "output_validated":
            latest = data_of(ev)
    if latest is None:
        return {"outcome": "none"}
    res: JsonObj = {"outcome": latest.get("outcome")}
    if "value" in latest:
        res["value"] = copy.deepcopy(latest["value"])
    return res
