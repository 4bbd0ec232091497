"""A new thread: the header, `thread_started` of the agent (actor host) and the caller's first
events (a run's `user_input`, a child's task), with the caller's side rows, in ONE transaction
(`EventLog.create_branch`), so the thread exists iff they do. Every path that creates a thread
comes here: `POST /v1/runs` (with its receipt), a channel conversation's first message, an
agent-declared schedule's first occurrence, a subagent's child and a handoff's target (whose
`thread_started.parent` names the event that created it)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from .core.importer import Importer
from .core.lines import StoredLine, header_line
from .store.branches import BranchRecord, NewBranch
from .store.protocol import Stores
from .store.records import Companion
from .writer import Draft, View, Writer

HOST = {"kind": "host"}

CompanionsFor = Sequence[Companion] | Callable[[list[StoredLine]], Sequence[Companion]]


def start_thread(
    stores: Stores,
    writer: Writer,
    agent: Any,
    *,
    tenant: str,
    thread_id: str,
    branch_id: str,
    now_ms: int,
    companions: CompanionsFor = (),
    started: dict[str, Any] | None = None,
    drafts: Sequence[Draft] = (),
) -> list[StoredLine]:
    """Create the thread; its lines (thread_started first). `started` defaults to the agent's
    `thread_started` data; `companions` may be built from the lines (a receipt names the run id).
    An existing thread raises `AlreadyExists` and writes nothing."""
    header = StoredLine.of_header(header_line(thread_id, branch_id, now_ms))
    spec = NewBranch(
        thread_id=thread_id, tenant=tenant, branch_id=branch_id, header=header, create_thread=True
    )
    importer = Importer(now=now_ms)
    importer.feed(header.raw)
    view = View(BranchRecord.new(spec, created_at=now_ms), importer)
    first = Draft("thread_started", started if started is not None else agent.thread_started(), HOST)
    lines = writer.build(view, [first, *drafts], epoch=1, now=now_ms)
    rows = companions(lines) if callable(companions) else companions
    ttl_s = stores.threads.ttl_s((view.fold.started or {}).get("agent_name"), now_ms)
    stores.events.create_branch(
        replace(spec, lines=lines, companions=list(rows), status=view.fold.status(), ttl_s=ttl_s)
    )
    return lines


def started_by(agent: Any, event: dict[str, Any], relation: str) -> dict[str, Any]:
    """`thread_started` data of a thread another thread's `event` creates (`agent_spawned` for a
    subagent, `handoff` for its target): the agent's, with `parent` naming that event and how it
    relates, the link decisions follow to the root run's approver set."""
    started = agent.thread_started()
    started["parent"] = {
        "branch_id": event["branch_id"],
        "event_id": event["event_id"],
        "relation": relation,
        "thread_id": event["thread_id"],
    }
    return started
