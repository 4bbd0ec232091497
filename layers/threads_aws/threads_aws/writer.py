"""The branch writer: every append (API controls, the run-step worker, recovery) goes through
here, so every line is built the same way, passes `validate_next` before it is stored, and is
committed with the store's fenced conditional write.

The thread index follows each branch's status (the list row of `GET /v1/threads`): an append
that changes the fold's status carries the index's `activity` companion, so the row moves with
the lines that moved it (or, for a batch too large for companions, right after it commits).

Reads stay flat as a log grows: a process keeps each branch's verified fold (`View`) keyed by
its head seq and refreshes it from the tail (one GetItem for the head, one Query for the new
lines). A view whose append failed is dropped and rebuilt on the next load, so nothing that the
store did not accept can leak into later decisions.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from .core.canonical import canonical_bytes, new_uuid7
from .core.errors import LogError
from .core.fold import Fold
from .core.importer import Importer
from .core.lines import StoredLine
from .store.branches import BranchRecord
from .store.index import title_of
from .store.protocol import EventLog
from .store.records import Companion, NotFound, wall_ms

# `critical` is pinned per type (semantics.md §1): only these three may be skipped by readers.
NON_CRITICAL = frozenset({"log_repaired", "park_escalated", "schedule_skipped"})
CACHE_SIZE = 256


@dataclass(frozen=True, slots=True)
class Draft:
    """An event before it has a place in the chain."""

    type: str
    data: dict[str, Any]
    actor: dict[str, Any]


# A draft, or a function of the lines built before it in the same batch (so a `resumed` can name
# the event_id of the decision it commits with).
DraftLike = Draft | Callable[[list[StoredLine]], Draft]


@dataclass
class View:
    """A verified, reduced branch as of `record.head_seq`."""

    record: BranchRecord
    importer: Importer

    @property
    def fold(self) -> Fold:
        return self.importer.fold

    @property
    def branch_id(self) -> str:
        return self.record.branch_id

    @property
    def head_seq(self) -> int:
        return self.fold.head_seq

    @property
    def last_hash(self) -> str:
        return self.importer.segments[-1].last.hash

    @property
    def thread_id(self) -> str:
        return self.record.thread_id

    def writer_epoch(self) -> int:
        """The epoch a writer without its own lease appends under: never below the chain's,
        never below a live lease's (so fencing still orders it after any older holder)."""
        return max(self.record.lease_epoch, self.record.head_epoch, self.fold.epoch, 1)


# The side rows of an append, from the view and the lines built (a receipt names its run's
# user_input event_id): they commit in the same transaction (store.records.Companion).
Companions = Callable[[View, list[StoredLine]], Sequence[Companion]]


class Activity(Protocol):
    """The thread index's side of a status change (`store.index.ThreadIndex`)."""

    def activity(
        self,
        thread_id: str,
        branch_id: str,
        status: str,
        at: int,
        title: str | None,
        agent: str | None = None,
        tenant: str | None = None,
    ) -> Companion: ...

    def record_activity(self, companion: Companion) -> None: ...


# A companion-carrying append must fit one transaction (store.append): these bounds keep the
# activity companion off the batches that might not.
_FIT_ITEMS = 90
_FIT_BYTES = 2_000_000


class Writer:
    def __init__(
        self, store: EventLog, *, clock: Callable[[], int] = wall_ms, activity: Activity | None = None
    ) -> None:
        self.store = store
        self.clock = clock
        self.activity = activity
        self._views: OrderedDict[str, View] = OrderedDict()
        self._lock = threading.Lock()

    # -------------------------------------------------------------- reads
    def record(self, branch_id: str) -> BranchRecord:
        rec = self.store.head(branch_id)
        if rec is None:
            raise NotFound(f"branch {branch_id} not found")
        return rec

    def load(self, branch_id: str, *, record: BranchRecord | None = None) -> View:
        """The branch's current view: cached and refreshed from the tail, or built from the
        resolved chain on first use."""
        rec = record or self.record(branch_id)
        with self._lock:
            view = self._views.pop(branch_id, None)
        # Same seq, other hash: the branch was replaced under the cache (deleted, then the same
        # branch id imported again); a longer one fails the chain check on its first new line.
        if view is not None and view.head_seq == rec.head_seq and view.last_hash != rec.head_hash:
            view = None
        if view is not None and view.head_seq <= rec.head_seq:
            try:
                if view.head_seq < rec.head_seq:
                    for line in self.store.read(branch_id, view.head_seq + 1, rec.head_seq):
                        view.importer.feed(line.raw)
                view.record = rec
            except LogError:
                view = None
        else:
            view = None
        if view is None:
            view = self._build(rec)
        self._keep(view)
        return view

    def _build(self, rec: BranchRecord) -> View:
        importer = Importer(now=self.clock())
        for _seg, line in self.store.resolved_chain(rec.branch_id, rec=rec):
            importer.feed(line.raw)
        return View(rec, importer)

    def _keep(self, view: View) -> None:
        with self._lock:
            self._views[view.branch_id] = view
            while len(self._views) > CACHE_SIZE:
                self._views.popitem(last=False)

    def forget(self, branch_id: str) -> None:
        with self._lock:
            self._views.pop(branch_id, None)

    # ------------------------------------------------------------- writes
    def build(
        self, view: View, drafts: Sequence[DraftLike], *, epoch: int, now: int | None = None
    ) -> list[StoredLine]:
        """Envelope, canonical bytes and hash chain for `drafts` after the view's head. Each line
        is fed through the view's importer (schema + validate_next), so the view advances as if
        stored; the caller must `commit` or `forget`."""
        t = self.clock() if now is None else now
        prev = view.last_hash
        seq = view.head_seq
        lines: list[StoredLine] = []
        for item in drafts:
            d = item if isinstance(item, Draft) else item(lines)
            seq += 1
            ev = {
                "actor": d.actor,
                "branch_id": view.branch_id,
                "critical": d.type not in NON_CRITICAL,
                "data": d.data,
                "epoch": epoch,
                "event_id": new_uuid7(),
                "prev_hash": prev,
                "seq": seq,
                "thread_id": view.thread_id,
                "time": t,
                "type": d.type,
                "type_version": 1,
            }
            raw = canonical_bytes(ev)
            view.importer.feed(raw)
            line = view.importer.segments[-1].lines[-1]
            lines.append(line)
            prev = line.hash
        return lines

    def append(
        self,
        branch_id: str,
        drafts: Sequence[DraftLike],
        *,
        epoch: int | None = None,
        view: View | None = None,
        companions: Companions | None = None,
        now: int | None = None,
    ) -> tuple[View, list[StoredLine]]:
        """Validate and commit `drafts` as the branch's next lines, with `companions`. `epoch` is
        the caller's lease epoch (a control without a lease passes None: `View.writer_epoch`).
        Raises the store's `seq_conflict` / `stale_epoch` on a lost race (the view is dropped:
        re-load and re-decide), `CompanionFailed` when a side row's condition fails, or the
        rule's LogError when the events are not a valid next step."""
        view = view or self.load(branch_id)
        expected = view.head_seq
        ep = epoch if epoch is not None else view.writer_epoch()
        before = view.fold.status()
        after_commit = None
        try:
            lines = self.build(view, drafts, epoch=ep, now=now)
            side = list(companions(view, lines)) if companions is not None else []
            moved = self._activity(view, before, lines, now)
            if moved is not None:
                if len(lines) + len(side) < _FIT_ITEMS and (
                    side or sum(len(x.raw) for x in lines) < _FIT_BYTES  # with companions: one chunk
                ):
                    side.append(moved)
                else:
                    after_commit = moved
            head = self.store.append(
                branch_id, lines, expected_head_seq=expected, epoch=ep, now_ms=now, companions=side
            )
        except BaseException:
            self.forget(branch_id)
            raise
        view.record = _advanced(view.record, head.seq, head.hash, head.epoch)
        self._keep(view)
        if after_commit is not None and self.activity is not None:
            self.activity.record_activity(after_commit)
        return view, lines

    def _activity(
        self, view: View, before: str, lines: list[StoredLine], now: int | None
    ) -> Companion | None:
        """The thread index's companion when these lines changed the branch's status."""
        status = view.fold.status()
        if self.activity is None or status == before:
            return None
        title = None
        for line in lines:
            if line.type == "user_input":
                title = title_of((line.event or orjson.loads(line.raw))["data"])
                break
        at = self.clock() if now is None else now
        agent = (view.fold.started or {}).get("agent_name")  # its retention (`store.retention`)
        return self.activity.activity(
            view.thread_id, view.branch_id, status, at, title, agent, tenant=view.record.tenant
        )


def _advanced(rec: BranchRecord, seq: int, hash_: str, epoch: int) -> BranchRecord:
    from dataclasses import replace

    return replace(rec, head_seq=seq, head_hash=hash_, head_epoch=max(rec.head_epoch, epoch))
