"""Reading a log event's `data` the way both stream mappers do: tolerant of a missing or odd
field (a mapper never raises on an event it maps), so one malformed value drops one output
rather than the stream. Pure: standard library and the engine's pure rule suggester only."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def obj(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def as_list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def summary(part: Mapping[str, Any]) -> str:
    """A reasoning part's readable summary ("" for an opaque one: never shown)."""
    s = part.get("summary")
    return s if isinstance(s, str) else ""


def input_text(d: Mapping[str, Any]) -> str:
    """The text of a `user_input` / `steer`: its `text`, else its text content parts joined."""
    if isinstance(d.get("text"), str):
        return str(d["text"])
    parts = as_list(d.get("content"))
    return "".join(str(p.get("text", "")) for p in parts if isinstance(p, dict) and p.get("type") == "text")


def budget_message(b: Mapping[str, Any]) -> str:
    """A `budget_exceeded` event's numbers as the run's error message."""
    return f"budget exceeded: {b.get('limit')} {b.get('observed')}/{b.get('limit_value')}"


def engine_rules(tool: str, args: dict[str, Any]) -> list[str]:
    """The rules an approver may remember for a call: a pure function of the engine's (no I/O),
    imported late so the mappers load without the engine."""
    from ..engine.permissions import suggested_rules

    return suggested_rules(tool, args)
