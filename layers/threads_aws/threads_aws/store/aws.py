"""The DynamoDB/S3 implementation of every store, built from the deployed resource names."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .api_keys import ApiKeyRows
from .approvals import Approvals
from .artifacts import ArtifactStore
from .budget_ledger import BudgetLedger
from .channel_threads import ChannelThreads
from .deltas import DeltaRows
from .events import EventStore
from .inbox import Inbox
from .index import ThreadIndex
from .memory import MemoryStore
from .names import ResourceNames
from .notes import Notes
from .protocol import Stores
from .provider_requests import ProviderRequests
from .questions import Questions
from .receipts import RunReceipts
from .records import Clock, wall_ms
from .resources import ResourceLedger
from .retention import Retention, retention_ms
from .schedule_occurrences import Occurrences
from .schedule_threads import ScheduleThreads
from .schedules import Schedules
from .tombstones import Tombstones


def stores(
    ddb: Any,
    s3: Any,
    names: ResourceNames,
    *,
    clock: Clock = wall_ms,
    agent_retention: Callable[[], Mapping[str, int]] | None = None,
    **event_store: Any,
) -> Stores:
    """Every store on these clients (`dynamo.LazyClient`s keep them uncreated until first use).
    `agent_retention` gives the agents' own retentions (name -> ms, `store.retention`), read on
    first use; `event_store` passes EventStore tuning (spill threshold, chunk sizes) through."""
    artifacts = ArtifactStore(s3, names.bucket)
    events = EventStore(ddb, names.events_table, names.state_table, artifacts, clock=clock, **event_store)
    table = names.state_table
    return Stores(
        events=events,
        artifacts=artifacts,
        threads=ThreadIndex(
            ddb, table, events.branches, retention=Retention(retention_ms(), agent_retention)
        ),
        receipts=RunReceipts(ddb, table),
        approvals=Approvals(ddb, table),
        questions=Questions(ddb, table),
        notes=Notes(ddb, table),
        api_keys=ApiKeyRows(ddb, table),
        resources=ResourceLedger(ddb, table),
        inbox=Inbox(ddb, table),
        channel_threads=ChannelThreads(ddb, table),
        deltas=DeltaRows(ddb, table, clock=clock),
        provider_requests=ProviderRequests(ddb, table, clock=clock),
        budget_ledger=BudgetLedger(ddb, table),
        schedules=Schedules(ddb, table),
        occurrences=Occurrences(ddb, table),
        schedule_threads=ScheduleThreads(ddb, table),
        memory=MemoryStore(ddb, table, artifacts),
        tombstones=Tombstones(ddb, table),
    )
