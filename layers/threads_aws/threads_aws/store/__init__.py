"""Durable stores on AWS: the event log and leases (DynamoDB), artifacts (S3), the thread index,
and the loader that creates template.yaml's resources (moto/local)."""

from .artifacts import ArtifactStore
from .events import EventStore
from .index import ThreadIndex
from .infra import Resources, create_resources, load_template
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
    "Resources",
    "StateConflict",
    "StoreError",
    "ThreadIndex",
    "ThreadRecord",
    "create_resources",
    "load_template",
]
