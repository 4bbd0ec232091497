"""Persistence: the only code that calls DynamoDB, S3 or SQS client methods. One module per row
kind, each spelling its keys once:

- `lines` (EventsTable items, spills), `branches` (head records, `NewBranch`), `append` (the
  fenced append), `leases`, `events` (`EventStore`: one object over those four);
- `index` (thread META + branch membership), `receipts` (run receipts), `approvals`,
  `questions`, `notes`, `memory` (a principal's memory), `api_keys`, `resources` (the cleanup
  ledger);
- `artifacts` (S3, content-addressed), `run_steps` (the run-step SQS queue);
- `tombstones`, `deletion` (a thread's deletion: one transaction), `purge` (its rows, by kind),
  `retention` (idle threads' lifetime), `sweep` (the sweeper's whole-store listings);
- `dynamo` (encoders, expressions, lazy clients, the tagged transaction runner), `records`
  (value types, errors, `Companion`), `protocol` (the typed seam and the `Stores` bundle),
  `aws` (builds every store), `names` (the deployed resource names), `ingest` (a verified export
  into the store).
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

# Each name is loaded from its module on first use (PEP 562): importing one store module (say
# `store.dynamo` or `store.names` on a handler's import path) must not load every row kind.
_HOME = {
    "ArtifactStore": "artifacts",
    "BRANCH_STATES": "branches",
    "BranchRecord": "branches",
    "NewBranch": "branches",
    "EventStore": "events",
    "ThreadIndex": "index",
    "ThreadRecord": "index",
    "ResourceNames": "names",
    **dict.fromkeys(
        ("AlreadyExists", "Companion", "CompanionFailed", "Head", "Lease", "NotFound", "StateConflict"),
        "records",
    ),
    "StoreError": "records",
}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{_HOME[name]}"), name)
    globals()[name] = value
    return value


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
