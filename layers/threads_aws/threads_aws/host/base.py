"""What every route of `Host` shares: tenant-scoped lookups, the cached views, the control loop
(load, decide, commit; re-decide after a lost head race), wakes, and the drafts' actors.

Controls append with `Writer` under `View.writer_epoch()` (no lease of their own), so they land
while a worker holds the lease mid-step. A process runs one load-decide-commit at a time
(`_lock`): a control builds into the cached view before it commits and drops it if it loses, so
a reader that walks a cached view holds the lock while it does.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..agents import Agent
from ..core.errors import LogError
from ..core.lines import StoredLine
from ..store.branches import BranchRecord
from ..store.index import ThreadRecord
from ..store.protocol import StepQueue, Stores
from ..store.records import Companion, wall_ms
from ..writer import Draft, View, Writer
from .errors import ApiError, not_found
from .principal import Principal

log = logging.getLogger("threads_aws.host")

RETRIES = 5  # re-decide this often after a lost head race before answering branch_busy
NOT_WRITABLE = ("read_only", "corrupt", "fork_failed")
NOT_RUNNABLE = ("inspection_only", *NOT_WRITABLE)
HIDDEN = ("forking", "fork_failed")
HOST = {"kind": "host"}

Maker = Callable[[list[StoredLine]], Draft]  # writer.DraftLike: a draft from the lines built before it
CompanionsOf = Callable[[list[StoredLine]], Sequence[Companion]]


def user(principal: Principal) -> dict[str, Any]:
    return {"kind": "user", "principal": principal.as_dict()}


def approver(principal: Principal) -> dict[str, Any]:
    return {"kind": "approver", "principal": principal.as_dict()}


def resumed(kind: str, ident: str) -> Maker:
    """The `resumed` that closes park (kind, ident), caused by the first line of its batch (the
    decision, answer or resolution it commits with)."""

    def make(built: list[StoredLine]) -> Draft:
        data = {"address": {"kind": kind, "id": ident}, "cause_event_id": built[0].event_id}
        return Draft("resumed", data, HOST)

    return make


class HostBase:
    def __init__(
        self,
        stores: Stores,
        writer: Writer,
        steps: StepQueue | None,
        agents: Mapping[str, Agent],
        clock: Callable[[], int] = wall_ms,
        *,
        sandbox: Any = None,
    ) -> None:
        self.stores = stores
        self.writer = writer
        self.store = writer.store
        self.index = stores.threads
        self.steps = steps
        self.agents = agents
        self.clock = clock
        self.sandbox = sandbox  # a sandbox.fork.SandboxProvider (Services: the S3 workspace's)
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ lookups
    def _thread(self, principal: Principal, thread_id: str) -> ThreadRecord:
        thread = self.index.get_thread(principal.tenant, thread_id)
        if thread is None:
            raise not_found(f"thread {thread_id} not found")
        return thread

    def _branch(self, principal: Principal, thread_id: str, branch_id: str | None) -> BranchRecord:
        thread = self._thread(principal, thread_id)
        bid = branch_id or thread.main_branch_id
        rec = self.index.branch_of(principal.tenant, thread_id, bid)
        if rec is None or rec.state in HIDDEN:
            raise not_found(f"branch {bid} not found in thread {thread_id}")
        return rec

    def _load(self, rec: BranchRecord) -> View:
        """The cached view (hold `_lock` while walking it: module docstring)."""
        with self._lock:
            return self.writer.load(rec.branch_id, record=rec)

    def _wake(self, branch_id: str, reason: str) -> None:
        if self.steps is None:
            return
        try:
            self.steps.enqueue(branch_id, reason=reason)
        except Exception:  # noqa: BLE001 - the append is durable; a later wake or replay recovers
            log.exception("could not enqueue a run step for branch %s", branch_id)

    # ------------------------------------------------------------------ commits
    def _commit(
        self, view: View, makers: Sequence[Maker], companions: CompanionsOf | None = None
    ) -> list[StoredLine]:
        """Commit `makers` (each sees the lines built before it) with `companions` in one fenced
        transaction under the view's writer epoch."""
        _, lines = self.writer.append(
            view.branch_id,
            makers,
            view=view,
            now=self.clock(),
            companions=(lambda _view, built: companions(built)) if companions is not None else None,
        )
        return lines

    def _control(self, rec: BranchRecord, decide: Callable[[View], list[StoredLine]]) -> list[StoredLine]:
        """Load, decide and commit; on a lost race (seq_conflict/stale_epoch) re-load and decide
        again. `decide` raises the route's typed failure, or commits via `_commit`."""
        if rec.state in NOT_WRITABLE:
            raise ApiError("forbidden", f"branch {rec.branch_id} is {rec.state}: this host cannot write it")
        for _ in range(RETRIES):
            with self._lock:
                view = self.writer.load(rec.branch_id)
                try:
                    return decide(view)
                except LogError as exc:
                    if exc.code not in ("seq_conflict", "stale_epoch"):
                        raise
        raise ApiError("branch_busy", "the branch kept moving; retry")

    @staticmethod
    def _appended(lines: list[StoredLine]) -> dict[str, str]:
        assert lines[0].event_id is not None
        return {"event_id": lines[0].event_id}

    def _pinned_agent(self, view: View) -> Agent | None:
        """The deployed agent the branch's thread_started names (by name; callers that need the
        pinned config compare `config_hash`)."""
        started = view.fold.started
        return None if started is None else self.agents.get(started.get("agent_name", ""))
