"""The step's plumbing every concern shares: the lease (renewed before it runs low, right
before anything is dispatched, and by a heartbeat thread while a model call or a tool body runs),
appends under the lease epoch, and sticky appends.

A lost head race (`seq_conflict`) before a dispatch re-loads and re-decides (the run loop in
`engine.step`); after a dispatch (a model answer, an effect's result) the same facts are
re-appended on the new head ("sticky"), because they happened. A `stale_epoch` means another
worker took the lease: stop at once and dispatch nothing more.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from .. import observability
from ..core.errors import LogError
from ..core.fold import Fold
from ..core.lines import StoredLine
from ..store.records import CompanionFailed, Lease
from ..writer import Companions, Draft, DraftLike, View
from . import retry
from .budget_plan import is_settlement, with_settlement
from .context import EngineContext

log = logging.getLogger("threads_aws.engine")

STICKY_RETRIES = 8

HOST = {"kind": "host"}
MODEL = {"kind": "model"}
TOOL = {"kind": "tool"}
RECOVERY = {"kind": "recovery"}


class Stop(Exception):
    """End the step now with `state` (a lost lease, or sticky retries exhausted)."""

    def __init__(self, state: str) -> None:
        self.state = state


def result(call_id: str, text: str, origin: str, is_error: bool) -> Draft:
    """A call's `tool_result` (the tool's actor when it executed, the host's otherwise)."""
    data = {
        "call_id": call_id,
        "completeness": "complete",
        "is_error": is_error,
        "origin": origin,
        "preview": text,
    }
    return Draft("tool_result", data, TOOL if origin == "executed" else HOST)


class StepBase:
    def __init__(self, ctx: EngineContext, branch_id: str, lease: Lease) -> None:
        self.ctx = ctx
        self.branch_id = branch_id
        self.lease = lease
        self.appended = 0
        self.wake_at: int | None = None  # a retry's not_before, when the step ends `wait`
        self.armed = False  # its wake-up is scheduled (engine.retry_turn)
        self.last_fold: Fold | None = None  # the fold of the step's latest decision

    def maybe_renew(self, force: bool = False) -> None:
        now = self.ctx.clock()
        if force or self.lease.expires_at - now < self.ctx.lease_ttl_ms // 2:
            self.lease = self.ctx.store.renew(
                self.branch_id, self.lease, now_ms=now, ttl_ms=self.ctx.lease_ttl_ms
            )

    @contextmanager
    def heartbeat(self, view: View) -> Iterator[None]:
        """Renew the lease every policy.retry.heartbeat_ms while a long call runs (a model
        answer, a tool body): it outlives the lease TTL otherwise, and a concurrent step would
        take the branch over and abandon the live call as a crash."""
        interval_ms = int(retry.policy(view.fold)["heartbeat_ms"])
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(interval_ms / 1000):
                try:
                    ttl = max(self.ctx.lease_ttl_ms, 2 * interval_ms)
                    now = self.ctx.clock()
                    self.lease = self.ctx.store.renew(self.branch_id, self.lease, now_ms=now, ttl_ms=ttl)
                except LogError:  # taken over: the answer's append will fail stale_epoch
                    return
                except Exception:  # noqa: BLE001 - a missed beat; the next one tries again
                    log.warning("lease heartbeat of %s failed", self.branch_id, exc_info=True)

        # contextvars.copy_context: the beat belongs to this invocation (the local host signs its
        # requests as the running function, local.iam)
        t = threading.Thread(
            target=contextvars.copy_context().run, args=(beat,), name="lease-heartbeat", daemon=True
        )
        t.start()
        try:
            yield
        finally:
            stop.set()
            t.join(5)

    def append(
        self, view: View, drafts: Sequence[DraftLike], companions: Companions | None = None
    ) -> list[StoredLine]:
        """Append under the lease epoch; a model attempt's answer settles its budget rows in the
        same transaction (`budget_plan`)."""
        try:
            _, lines = self.ctx.writer.append(
                self.branch_id,
                drafts,
                epoch=self.lease.epoch,
                view=view,
                companions=with_settlement(self.ctx, companions),
            )
        except CompanionFailed as exc:
            if not is_settlement(exc.tag):
                raise
            # Rows the attempt never reserved (a request older than its budget's ledger): the
            # answer is a fact and commits without them; the ledger keeps the bound.
            log.warning("budget rows of an answer on %s were not reserved: settling skipped", self.branch_id)
            view = self.ctx.writer.load(self.branch_id)
            _, lines = self.ctx.writer.append(
                self.branch_id, drafts, epoch=self.lease.epoch, view=view, companions=companions
            )
        self.appended += len(lines)
        # RunsSettled by reason (a turn_completed is always a plain Draft; built drafts are not)
        observability.turn_ends((d.type, d.data) for d in drafts if isinstance(d, Draft))
        return lines

    def append_sticky(self, build: Callable[[View], Sequence[DraftLike]]) -> list[StoredLine]:
        """Record facts that already happened (a model answer, an effect's result): a lost head
        race re-appends them on the new head; a lost lease stops (recovery takes over)."""
        for _ in range(STICKY_RETRIES):
            view = self.ctx.writer.load(self.branch_id)
            try:
                return self.append(view, build(view))
            except LogError as exc:
                if exc.code == "seq_conflict":
                    continue
                if exc.code == "stale_epoch":
                    raise Stop("busy") from exc
                raise
        raise Stop("more")
