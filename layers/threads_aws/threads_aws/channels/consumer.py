"""The inbox consumer: applies a thread's pending inbox items, in inbox order, to its branch
(semantics.md §5, Channels, Delivery and Order).

A wake-up (store.inbox_queue) names a thread and the rows of one webhook; the consumer reads
those rows (strongly consistent) plus the thread's pending index, and walks the unconsumed ones
in inbox order:

- a message, under the branch LEASE (so it never interleaves with a run step's decisions):
  ``channel_delivery{channel, installation, conversation, delivery_id, item_key, text}`` (actor
  ``channel`` with the sender's principal), then ``user_input{source: channel,
  delivery_event_id}``, or ``steer`` when a turn is open (rule 12), with the row's
  ``consumed_seq`` set by a companion of that append: applied once, exactly as durable as its
  events. The branch busy (lease held) or parked: the item WAITS, and so does every later
  message of the thread (order);
- a decision (a button press), through the host's approval-decision path (`decisions`): it
  jumps ahead of messages that wait;
- a final refusal (a cancelled, handed-off or read-only branch; for a decision: forbidden,
  approval_duplicate, approval_expired, an unknown challenge) consumes the row with nothing
  appended (consumed_seq 0).

Whatever waits fails its SQS record, which comes back after a backoff of its receive count
(ChangeMessageVisibility; FIFO: the group's later records fail with it, keeping the order); the
rows stay pending in the inbox, so nothing is lost, and the run-step worker wakes the thread
again when its branch settles. After an item is applied the branch gets a run step.

Principals: the sender of an installation is ``{issuer: <channel>:<installation_id>, tenant,
subject: sender}`` (`Installation.principal`): the tenant is the installation's, never the text's.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ..core.errors import LogError
from ..core.lines import StoredLine
from ..store.inbox import InboxRow
from ..store.records import CompanionFailed, NotFound
from ..writer import Draft, View
from .model import InboxItem

log = logging.getLogger("threads_aws.channels")

LEASE_TTL_MS = 30_000
RETRIES = 5
NOT_WRITABLE = ("read_only", "corrupt", "fork_failed", "forking", "inspection_only")
RETRY_BASE_S = 2
RETRY_MAX_S = 300

Outcome = Literal["applied", "refused", "wait"]


def principal_of(row: InboxRow) -> dict[str, str]:
    """The sender's principal: issuer ``<channel>:<installation_id>``, the installation's tenant."""
    sender = str(row.item.get("sender", ""))
    return {"issuer": f"{row.channel}:{row.installation_id}", "subject": sender, "tenant": row.tenant}


@dataclass
class ThreadResult:
    applied: int = 0
    refused: int = 0
    waiting: int = 0


class Consumer:
    def __init__(self, services: Any, *, holder: str | None = None) -> None:
        self.services = services
        self.stores = services.stores
        self.writer = services.writer
        self.clock: Callable[[], int] = services.clock
        self.holder = holder or f"inbox:{uuid.uuid4().hex[:12]}"

    # ------------------------------------------------------------------ a thread
    def apply_thread(
        self, thread_id: str, branch_id: str, keys: list[str] | tuple[str, ...] = ()
    ) -> ThreadResult:
        rows = {r.pk: r for r in self.stores.inbox.rows(list(keys))} if keys else {}
        for r in self.stores.inbox.pending(thread_id):
            rows.setdefault(r.pk, r)
        todo = sorted((r for r in rows.values() if r.consumed_seq is None), key=lambda r: r.order)
        result = ThreadResult()
        blocked = False
        for row in todo:
            if row.thread_id != thread_id:  # a wake-up never applies another thread's rows
                continue
            if row.kind == "decision":
                outcome = self.decide(row)
            elif blocked:
                outcome = "wait"
            else:
                outcome = self.deliver(row)
                blocked = outcome == "wait"
            if outcome == "applied":
                result.applied += 1
            elif outcome == "refused":
                result.refused += 1
            else:
                result.waiting += 1
        if result.applied and self.services.steps is not None:
            self.services.steps.enqueue(branch_id, reason="channel")
        return result

    # ------------------------------------------------------------------ messages
    def deliver(self, row: InboxRow) -> Outcome:
        try:
            rec = self.writer.record(row.branch_id)
        except NotFound:
            return self.refuse(row, "its branch is gone")
        if rec.state in NOT_WRITABLE:
            return self.refuse(row, f"branch is {rec.state}")
        view = self.writer.load(row.branch_id, record=rec)
        why = _cannot_take(view)
        if why is not None:
            return self.refuse(row, why) if why != "parked" else "wait"
        try:
            lease = self.stores.events.acquire_lease(
                row.branch_id, self.holder, ttl_ms=LEASE_TTL_MS, now_ms=self.clock()
            )
        except LogError as exc:
            if exc.code == "branch_busy":
                return "wait"
            raise
        try:
            for _ in range(RETRIES):
                view = self.writer.load(row.branch_id)
                why = _cannot_take(view)
                if why == "parked":
                    return "wait"
                if why is not None:
                    return self.refuse(row, why)
                if row.item_key in view.fold.item_keys:  # applied, its row not marked: impossible
                    return self.refuse(row, "already delivered")  # by the companion, but be safe
                try:
                    self._append_message(view, row, lease.epoch)
                    return "applied"
                except CompanionFailed:
                    return "refused"  # another consumer applied it first: nothing appended here
                except LogError as exc:
                    if exc.code == "seq_conflict":
                        continue  # a control landed: re-load and decide again
                    if exc.code == "stale_epoch":
                        return "wait"
                    if exc.code == "invalid_transition":
                        return self.refuse(row, exc.message)
                    raise
            return "wait"
        finally:
            try:
                self.stores.events.release(row.branch_id, lease)
            except Exception:  # noqa: BLE001 - the lease lapses by itself
                log.warning("could not release the lease of %s", row.branch_id)

    def _append_message(self, view: View, row: InboxRow, epoch: int) -> list[StoredLine]:
        item = InboxItem.from_dict(row.item)
        principal = principal_of(row)
        delivery = item.channel_delivery_data(row.channel)
        kind = "steer" if view.fold.turn_open else "user_input"

        def opened(built: list[StoredLine]) -> Draft:
            data = {"source": "channel", "text": item.text or "", "delivery_event_id": built[0].event_id}
            return Draft(kind, data, {"kind": "user", "principal": principal})

        now = self.clock()
        _, lines = self.writer.append(
            row.branch_id,
            [Draft("channel_delivery", delivery, {"kind": "channel", "principal": principal}), opened],
            epoch=epoch,
            view=view,
            now=now,
            companions=lambda _v, built: [self.stores.inbox.consume(row, built[0].seq, now)],
        )
        return lines

    # ------------------------------------------------------------------ decisions
    def decide(self, row: InboxRow) -> Outcome:
        from .decisions import apply_decision

        return apply_decision(self, row)

    def refuse(self, row: InboxRow, why: str) -> Outcome:
        log.info("inbox item %s refused: %s", row.item_key, why)
        self.stores.inbox.refuse(row, self.clock())
        return "refused"


def _cannot_take(view: View) -> str | None:
    """Why a message can't be applied now: "parked" (wait) or a final reason (refuse)."""
    f = view.fold
    status = f.status()
    if status == "inspection_only":
        return "the branch is an inspection-only repair branch"
    if status == "cancelled":
        return "the thread was cancelled"
    if f.handed_off:
        return "the thread was handed off"
    if f.parked:
        return "parked"
    return None


# ---------------------------------------------------------------------- the SQS batch
def retry_delay_s(receive_count: int) -> int:
    return min(RETRY_BASE_S * 3 ** max(0, receive_count - 1), RETRY_MAX_S)


def handle_batch(event: dict[str, Any], services: Any) -> dict[str, Any]:
    """An SQS FIFO batch of wake-ups: partial batch failures for the threads whose items wait
    (made visible again after their backoff); once a record of a group fails, the group's later
    records fail with it, so a thread's wake-ups keep their order."""
    consumer = Consumer(services)
    failures: list[dict[str, str]] = []
    handles: list[tuple[str, int]] = []
    failed_groups: set[str] = set()
    for record in event.get("Records") or []:
        attrs = record.get("attributes") or {}
        group = attrs.get("MessageGroupId") or ""
        ok = False
        if group not in failed_groups:
            try:
                body = json.loads(record["body"])
                res = consumer.apply_thread(body["thread_id"], body["branch_id"], body.get("keys") or ())
                ok = res.waiting == 0
            except Exception:  # noqa: BLE001 - retried by the queue; the rows stay pending
                log.exception("inbox wake-up %s failed", record.get("messageId"))
        if not ok:
            failed_groups.add(group)
            failures.append({"itemIdentifier": record["messageId"]})
            count = int(attrs.get("ApproximateReceiveCount") or 1)
            handles.append((record["receiptHandle"], retry_delay_s(count)))
    if handles:
        try:
            services.inbox_queue.retry_later(handles)
        except Exception:  # noqa: BLE001 - they come back after the visibility timeout anyway
            log.warning("could not back off %d inbox wake-up(s)", len(handles))
    return {"batchItemFailures": failures}
