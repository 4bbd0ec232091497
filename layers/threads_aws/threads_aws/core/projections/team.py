"""The ``team_tasks`` projection: the team task board as the log rebuilds it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ._chain import Event, JsonObj, data_of


def team_tasks(events: Iterable[Event]) -> list[JsonObj]:
    """``{task_id, status, owner?}`` per created task, in creation order. A claim sets
    ``claimed`` and the owner; ``completed``/``failed`` keep the owner; ``released`` returns the
    task to ``open`` without an owner."""
    tasks: dict[Any, JsonObj] = {}
    for ev in events:
        t = ev.get("type")
        d = data_of(ev)
        tid = d.get("task_id")
        if t == "team_task_created":
            if isinstance(tid, str) and tid not in tasks:
                tasks[tid] = {"task_id": tid, "status": "open"}
        elif t == "team_task_claimed":
            row = tasks.get(tid)
            if row is not None:
                row["status"] = "claimed"
                row["owner"] = d.get("member")
        elif t == "team_task_updated":
            row = tasks.get(tid)
            if row is None:
                continue
            status = d.get("status")
            if status == "released":
                row["status"] = "open"
                row.pop("owner", None)
            elif status in ("completed", "failed"):
                row["status"] = status
    return list(tasks.values())
