"""The child-thread projections: ``children`` and ``pending_wakes``.

A child is spawned by ``agent_spawned`` and ends with its ``agent_finished``. ``pending_wakes``
is the store's ``pending_wakes`` table (semantics §2, Teams v4) as the log rebuilds it: a
background child stays a row until it finishes or the parent parks on it
(``parked{kind: child}``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ._chain import Event, JsonObj, data_of


def children(events: Iterable[Event]) -> list[JsonObj]:
    """``{child_thread_id, status}`` per ``agent_spawned`` in order; ``running`` until its
    ``agent_finished``, then that event's status."""
    out: dict[Any, JsonObj] = {}
    for ev in events:
        t = ev.get("type")
        if t == "agent_spawned":
            cid = data_of(ev).get("child_thread_id")
            if isinstance(cid, str) and cid not in out:
                out[cid] = {"child_thread_id": cid, "status": "running"}
        elif t == "agent_finished":
            d = data_of(ev)
            row = out.get(d.get("child_thread_id"))
            if row is not None and isinstance(d.get("status"), str):
                row["status"] = d["status"]
    return list(out.values())


def pending_wakes(events: Iterable[Event]) -> list[JsonObj]:
    """``{branch_id, child_thread_id}`` per background child with no ``agent_finished`` and no
    ``parked{kind: child}`` for it, sorted by (branch_id, child_thread_id). ``branch_id`` is the
    envelope branch of the ``agent_spawned`` event."""
    rows: dict[str, str] = {}
    dropped: set[Any] = set()
    for ev in events:
        t = ev.get("type")
        d = data_of(ev)
        if t == "agent_spawned":
            cid = d.get("child_thread_id")
            if d.get("mode") == "background" and isinstance(cid, str):
                rows.setdefault(cid, str(ev.get("branch_id")))
        elif t == "agent_finished":
            dropped.add(d.get("child_thread_id"))
        elif t == "parked":
            addr = d.get("address")
            if isinstance(addr, Mapping) and addr.get("kind") == "child":
                dropped.add(addr.get("id"))
    live = [(b, c) for c, b in rows.items() if c not in dropped]
    return [{"branch_id": b, "child_thread_id": c} for b, c in sorted(live)]
