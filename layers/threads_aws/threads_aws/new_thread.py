"""A new thread started by the host itself (a channel conversation's first message, an
agent-declared schedule's first occurrence), as `Host` starts one for a run: the header, then
`thread_started` of the agent (actor host), with the caller's side rows, in ONE transaction
(`EventLog.create_branch`), so the thread exists iff they do."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .core.importer import Importer
from .core.lines import StoredLine, header_line
from .store.branches import BranchRecord, NewBranch
from .store.protocol import Stores
from .store.records import Companion
from .writer import Draft, View, Writer

HOST = {"kind": "host"}


def start_thread(
    stores: Stores,
    writer: Writer,
    agent: Any,
    *,
    tenant: str,
    thread_id: str,
    branch_id: str,
    now_ms: int,
    companions: Sequence[Companion] = (),
) -> None:
    header = StoredLine.of_header(header_line(thread_id, branch_id, now_ms))
    importer = Importer(now=now_ms)
    importer.feed(header.raw)
    rec = BranchRecord(
        branch_id=branch_id,
        thread_id=thread_id,
        tenant=tenant,
        parent_branch_id=None,
        fork_at_seq=None,
        state="ready",
        head_seq=0,
        head_hash=header.hash,
        head_epoch=0,
        head_verified=True,
        writer_impl="threads-aws",
        header_hash=header.hash,
        created_at=now_ms,
    )
    lines = writer.build(
        View(rec, importer), [Draft("thread_started", agent.thread_started(), HOST)], epoch=1, now=now_ms
    )
    stores.events.create_branch(
        NewBranch(
            thread_id=thread_id,
            tenant=tenant,
            branch_id=branch_id,
            header=header,
            create_thread=True,
            lines=lines,
            companions=list(companions),
        )
    )
