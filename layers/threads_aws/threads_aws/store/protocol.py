"""The store seam: what the writer, the host and the engine ask of persistence, as typed
Protocols, and `Stores`, the bundle they receive.

The DynamoDB/S3 implementations are the row-kind modules of this package (`store.aws.stores`
builds them); another adapter (sqlite, in memory) would implement these Protocols and nothing
above `store/` would change. Side rows that must commit with an append are `Companion`s the
row-kind store builds; `EventLog.append` and `EventLog.create_branch` commit them atomically with
the lines and raise `CompanionFailed(tag, stored_item)` when one's condition fails.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..core.lines import StoredLine
from .api_keys import ApiKeyRow
from .approvals import ApprovalRow
from .branches import BranchRecord, NewBranch
from .budget_ledger import LedgerRow
from .channel_threads import ChannelRoute
from .deltas import DeltaRow
from .inbox import InboxRow
from .index import ThreadRecord
from .memory import Deleted, MemoryRow, MemoryWrite
from .notes import Note
from .questions import QuestionRow
from .receipts import Receipt
from .records import Companion, Head, Lease
from .resources import ResourceRow
from .schedule_occurrences import OccurrenceRow
from .schedule_threads import ScheduleThread
from .schedules import ScheduleRow
from .thread_query import ThreadFilter
from .tombstones import Tombstone


class EventLog(Protocol):
    """Branches, their lines and heads, and leases (`store.events.EventStore`)."""

    def head(self, branch_id: str) -> BranchRecord | None: ...

    def read(
        self, branch_id: str, from_seq: int, to_seq: int, *, head_seq: int | None = None
    ) -> list[StoredLine]: ...

    def segments(self, branch_id: str, rec: BranchRecord | None = None) -> list[tuple[str, int, int]]: ...

    def resolved_chain(
        self, branch_id: str, after_seq: int = 0, limit: int | None = None, *, rec: BranchRecord | None = None
    ) -> list[tuple[str, StoredLine]]: ...

    def export(self, branch_id: str) -> bytes: ...

    def append(
        self,
        branch_id: str,
        lines: Sequence[StoredLine],
        *,
        expected_head_seq: int,
        epoch: int,
        now_ms: int | None = None,
        companions: Sequence[Companion] = (),
    ) -> Head: ...

    def create_branch(self, spec: NewBranch) -> BranchRecord: ...

    def set_state(
        self,
        branch_id: str,
        state: str,
        *,
        expected_state: str | None = None,
        head_verified: bool | None = None,
        dropped_ref: str | None = None,
    ) -> BranchRecord: ...

    def discard_branch(self, branch_id: str, *, states: Sequence[str] = ...) -> bool: ...

    def acquire_lease(
        self, branch_id: str, holder_id: str, *, ttl_ms: int, now_ms: int | None = None
    ) -> Lease: ...

    def renew(
        self, branch_id: str, lease: Lease, now_ms: int | None = None, ttl_ms: int = 30_000
    ) -> Lease: ...

    def release(self, branch_id: str, lease: Lease) -> bool: ...


class Artifacts(Protocol):
    """Content-addressed, verified blobs (`store.artifacts.ArtifactStore`)."""

    def put(self, data: bytes, media_type: str) -> dict[str, Any]: ...

    def get(self, sha256: str, length: int | None = None) -> bytes: ...

    def get_ref(self, ref: dict[str, Any]) -> bytes: ...

    def exists(self, sha256: str) -> bool: ...

    def size(self, sha256: str) -> int | None: ...


class Threads(Protocol):
    """The thread index, tenant-scoped (`store.index.ThreadIndex`)."""

    def get_thread(self, tenant: str, thread_id: str) -> ThreadRecord | None: ...

    def list_threads(
        self,
        tenant: str,
        *,
        limit: int = 50,
        before: str | None = None,
        filters: ThreadFilter | None = None,
    ) -> tuple[list[ThreadRecord], str | None]: ...

    def update_meta(
        self,
        tenant: str,
        thread_id: str,
        *,
        title: str | None = None,
        metadata: Mapping[str, str | None] | None = None,
        max_keys: int = 16,
    ) -> ThreadRecord | None: ...

    def last_activity(self, threads: Sequence[ThreadRecord]) -> dict[str, int]: ...

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

    def ttl_s(self, agent: str | None, at: int) -> int | None: ...

    def list_branches(self, tenant: str, thread_id: str) -> list[BranchRecord]: ...

    def branch_of(self, tenant: str, thread_id: str | None, branch_id: str) -> BranchRecord | None: ...


class ReceiptStore(Protocol):
    def get(self, tenant: str, idempotency_key: str) -> Receipt | None: ...

    def companion(
        self, tenant: str, idempotency_key: str, receipt: Receipt, created_at: int
    ) -> Companion: ...


class ApprovalStore(Protocol):
    def get(self, challenge_id: str) -> ApprovalRow | None: ...

    def open(self, row: ApprovalRow) -> Companion: ...

    def consume(self, challenge_id: str, state: str, decided_by: str, now: int) -> Companion: ...


class QuestionStore(Protocol):
    def get(self, branch_id: str, call_id: str) -> QuestionRow | None: ...

    def open(self, row: QuestionRow) -> Companion: ...

    def answered(self, branch_id: str, call_id: str, now: int) -> Companion: ...


class NoteStore(Protocol):
    def store(self, note: Note) -> int: ...


class MemoryBank(Protocol):
    """A principal's memory, per (tenant, scope) (`store.memory.MemoryStore`)."""

    def remember(self, w: MemoryWrite, record_id: str) -> None: ...

    def forget(self, tenant: str, scope: str, key: str, effect_key: str, now: int) -> bool: ...

    def get(self, tenant: str, scope: str, key: str) -> MemoryRow | None: ...

    def search(self, tenant: str, scope: str, query: str, limit: int) -> tuple[list[MemoryRow], bool]: ...

    def delete_scope(self, tenant: str, scope: str) -> Deleted: ...

    def delete_tenant(self, tenant: str) -> Deleted: ...

    def delete_written_by(self, tenant: str, thread_id: str) -> Deleted: ...


class ApiKeyStore(Protocol):
    def create(self, key_id: str, row: ApiKeyRow, now: int) -> None: ...

    def revoke(self, key_id: str, now: int) -> bool: ...

    def live(self, key_id: str) -> ApiKeyRow | None: ...


class ResourceStore(Protocol):
    """The resources ledger (`store.resources.ResourceLedger`)."""

    def open(
        self, *, tenant: str, owner_branch_id: str, provider: str, kind: str, now: int
    ) -> ResourceRow: ...

    def move(
        self, row: ResourceRow, to: str, *, ref: str | None = None, expect: tuple[str, ...] = ()
    ) -> None: ...

    def rows(self, owner_branch_id: str) -> list[ResourceRow]: ...


class InboxStore(Protocol):
    """Channel inbox rows (`store.inbox.Inbox`)."""

    def put(self, row: InboxRow) -> Companion: ...

    def insert_batch(self, rows: Sequence[InboxRow]) -> list[InboxRow]: ...

    def consume(self, row: InboxRow, seq: int, now: int) -> Companion: ...

    def refuse(self, row: InboxRow, now: int) -> bool: ...

    def get(self, pk: str) -> InboxRow | None: ...

    def rows(self, pks: Sequence[str]) -> list[InboxRow]: ...

    def pending(self, thread_id: str, limit: int = 100) -> list[InboxRow]: ...


class ChannelThreadStore(Protocol):
    """Conversation → thread routes (`store.channel_threads.ChannelThreads`)."""

    def get(self, tenant: str, channel: str, installation_id: str, address: str) -> ChannelRoute | None: ...

    def create(self, route: ChannelRoute) -> Companion: ...

    def move(
        self,
        tenant: str,
        channel: str,
        installation_id: str,
        address: str,
        from_thread: str,
        to: tuple[str, str],
    ) -> Companion: ...


class DeltaStore(Protocol):
    """Live delta rows of model requests in flight (`store.deltas.DeltaRows`)."""

    def put(self, row: DeltaRow) -> bool: ...

    def head_and_rows(
        self, branch_id: str, request_event_ids: Sequence[str] = ()
    ) -> tuple[BranchRecord | None, dict[str, DeltaRow]]: ...


class ProviderRequestStore(Protocol):
    """The provider's id of each accepted model request (`store.provider_requests.ProviderRequests`)."""

    def put(self, branch_id: str, request_event_id: str, provider_request_id: str) -> bool: ...

    def get(self, branch_id: str, request_event_id: str) -> str | None: ...


class BudgetLedgerStore(Protocol):
    """Budget reservations and their running totals (`store.budget_ledger.BudgetLedger`)."""

    def reserve(
        self,
        tag: str,
        budget_id: str,
        limit: str,
        attempt_key: str,
        amount: int,
        limit_value: int,
        *,
        exact: bool,
    ) -> list[Companion]: ...

    def settle(
        self, tag: str, budget_id: str, limit: str, attempt_key: str, amount: int, delta: int
    ) -> list[Companion]: ...

    def used(self, budget_id: str, limit: str) -> int: ...

    def rows(self, budget_id: str) -> list[LedgerRow]: ...


class ScheduleStore(Protocol):
    """Thread schedules (`store.schedules.Schedules`)."""

    def create(self, row: ScheduleRow) -> None: ...

    def get(self, schedule_id: str) -> ScheduleRow | None: ...

    def of_thread(self, thread_id: str) -> list[ScheduleRow]: ...

    def active_ids(self) -> list[str]: ...

    def delete(self, schedule_id: str, now: int) -> bool: ...

    def checked(self, schedule_id: str, until: int) -> None: ...


class OccurrenceStore(Protocol):
    """Occurrence reservations (`store.schedule_occurrences.Occurrences`)."""

    def reserve(self, row: OccurrenceRow) -> bool: ...

    def get(self, tenant: str, schedule_id: str, occurrence_at: int) -> OccurrenceRow | None: ...

    def pending(self, thread_id: str) -> list[OccurrenceRow]: ...

    def decide(self, row: OccurrenceRow, state: str, reason: str | None, seq: int, now: int) -> Companion: ...

    def retire(self, row: OccurrenceRow, reason: str, now: int) -> bool: ...


class ScheduleThreadStore(Protocol):
    """The current thread of an agent-declared schedule (`store.schedule_threads`)."""

    def get(self, tenant: str, schedule_id: str) -> ScheduleThread | None: ...

    def create(self, row: ScheduleThread) -> Companion: ...


class TombstoneStore(Protocol):
    """Deleted threads (`store.tombstones.Tombstones`)."""

    def get(self, tenant: str, thread_id: str) -> Tombstone | None: ...

    def ensure(self, stone: Tombstone) -> Tombstone: ...

    def add_branches(self, thread_id: str, branch_ids: Sequence[str]) -> None: ...

    def done(self, thread_id: str) -> None: ...

    def purging(self, limit: int = 100) -> list[Tombstone]: ...


class StepQueue(Protocol):
    """The run-step queue (`store.run_steps.RunStepQueue`)."""

    def enqueue(self, branch_id: str, *, reason: str, head_seq: int | None = None) -> None: ...

    def retry_later(self, handles: Sequence[tuple[str, int]]) -> list[str]: ...


class StepTimer(Protocol):
    """Delayed wake-ups of a branch (`store.step_timer.StepTimer`): a retry's not_before."""

    def wake_at(self, branch_id: str, not_before_ms: int, *, now_ms: int, park: bool = False) -> None: ...


@dataclass(frozen=True)
class Stores:
    """Every store, by row kind: what the host and the engine receive (never a client)."""

    events: EventLog
    artifacts: Artifacts
    threads: Threads
    receipts: ReceiptStore
    approvals: ApprovalStore
    questions: QuestionStore
    notes: NoteStore
    api_keys: ApiKeyStore
    resources: ResourceStore
    inbox: InboxStore
    channel_threads: ChannelThreadStore
    budget_ledger: BudgetLedgerStore
    schedules: ScheduleStore
    occurrences: OccurrenceStore
    schedule_threads: ScheduleThreadStore
    memory: MemoryBank
    tombstones: TombstoneStore
    deltas: DeltaStore | None = None  # live surfaces only: none means no token deltas
    provider_requests: ProviderRequestStore | None = None  # none: no answer is recovered
