"""Persistence: the only code that calls DynamoDB, S3 or SQS client methods. One module per row
kind, each spelling its keys once:

- `lines` (EventsTable items, spills), `branches` (head records, `NewBranch`), `append` (the
  fenced append), `leases`, `events` (`EventStore`: one object over those four);
- `index` (thread META + branch membership), `receipts` (run receipts), `approvals`,
  `questions`, `notes`, `api_keys`, `resources` (the cleanup ledger);
- `artifacts` (S3, content-addressed), `run_steps` (the run-step SQS queue);
- `dynamo` (encoders, expressions, lazy clients, the tagged transaction runner), `records`
  (value types, errors, `Companion`), `protocol` (the typed seam and the `Stores` bundle),
  `aws` (builds every store), `names` (the deployed resource names), `ingest` (a verified export
  into the store).
"""

from .artifacts import ArtifactStore
from .branches import BRANCH_STATES, BranchRecord, NewBranch
from .events import EventStore
from .index import ThreadIndex, ThreadRecord
from .names import ResourceNames
from .records import (
    AlreadyExists,
    Companion,
    CompanionFailed,
    Head,
    Lease,
    NotFound,
    StateConflict,
    StoreError,
)

__all__ = [
    "BRANCH_STATES",
    "AlreadyExists",
    "ArtifactStore",
    "BranchRecord",
    "Companion",
    "CompanionFailed",
    "EventStore",
    "Head",
    "Lease",
    "NewBranch",
    "NotFound",
    "ResourceNames",
    "StateConflict",
    "StoreError",
    "ThreadIndex",
    "ThreadRecord",
]
