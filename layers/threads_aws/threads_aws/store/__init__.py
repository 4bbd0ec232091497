"""Durable stores on AWS: the event log and leases (DynamoDB), artifacts (S3), the thread index,
and the names of the deployed resources."""

from .artifacts import ArtifactStore
from .events import EventStore
from .index import ThreadIndex
from .names import ResourceNames
from .records import (
    BRANCH_STATES,
    AlreadyExists,
    BranchRecord,
    Head,
    Lease,
    NotFound,
    StateConflict,
    StoreError,
    ThreadRecord,
)

__all__ = [
    "BRANCH_STATES",
    "AlreadyExists",
    "ArtifactStore",
    "BranchRecord",
    "EventStore",
    "Head",
    "Lease",
    "NotFound",
    "ResourceNames",
    "StateConflict",
    "StoreError",
    "ThreadIndex",
    "ThreadRecord",
]
