"""Records of the StateTable and the key layout shared by the stores.

StateTable items (pk, sk):
- ``BRANCH#<branch_id>`` / ``HEAD``: the branch head, its state and its lease (BranchRecord).
- ``THREAD#<thread_id>`` / ``META``: the thread (ThreadRecord); gsi1 = ``TENANT#<tenant>`` /
  ``<created_at:016d>#<thread_id>`` lists a tenant's threads.
- ``THREAD#<thread_id>`` / ``BRANCH#<branch_id>``: membership of a branch in its thread.

EventsTable items: (branch_id, seq) with the line bytes (see events.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

BRANCH_STATES = ("forking", "ready", "inspection_only", "read_only", "corrupt", "fork_failed")

Clock = Callable[[], int]


def wall_ms() -> int:
    """The default clock (epoch ms). Stores read time only through an injectable clock."""
    return time.time_ns() // 1_000_000


class StoreError(Exception):
    """A store failure that is not a log ErrorCode (those are `threads_aws.core.errors.LogError`)."""


class NotFound(StoreError, LookupError):
    """The branch/thread does not exist (the API maps this to `not_found`)."""


class AlreadyExists(StoreError):
    """A conditional create found the item already there."""


class StateConflict(StoreError):
    """A conditional state change found another state."""


class SideConditionFailed(StoreError):
    """A caller-supplied item committed with an append (a receipt, an approval row, ...) failed
    its condition, so nothing of the transaction was written. `index` is its position in the
    caller's `extra_items`; `item` the stored item, when the service returned it."""

    def __init__(self, index: int, item: dict | None = None) -> None:  # type: ignore[type-arg]
        super().__init__(f"side item {index} failed its condition")
        self.index = index
        self.item = item


# ---------------------------------------------------------------- keys


def branch_key(branch_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"BRANCH#{branch_id}"}, "sk": {"S": "HEAD"}}


def thread_key(thread_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"THREAD#{thread_id}"}, "sk": {"S": "META"}}


def thread_branch_key(thread_id: str, branch_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"THREAD#{thread_id}"}, "sk": {"S": f"BRANCH#{branch_id}"}}


def tenant_gsi_pk(tenant: str) -> str:
    return f"TENANT#{tenant}"


# ---------------------------------------------------------------- attribute helpers


def _s(item: dict[str, Any], name: str) -> str | None:
    v = item.get(name)
    return None if v is None or "NULL" in v else v["S"]


def _n(item: dict[str, Any], name: str) -> int | None:
    v = item.get(name)
    return None if v is None or "NULL" in v else int(v["N"])


def _b(item: dict[str, Any], name: str, default: bool = False) -> bool:
    v = item.get(name)
    return default if v is None or "NULL" in v else bool(v["BOOL"])


@dataclass(frozen=True, slots=True)
class Lease:
    epoch: int
    expires_at: int
    holder_id: str


@dataclass(frozen=True, slots=True)
class Head:
    """A branch head after an append: the last committed seq/hash and the epoch of that line."""

    branch_id: str
    seq: int
    hash: str
    epoch: int


@dataclass(frozen=True, slots=True)
class BranchRecord:
    branch_id: str
    thread_id: str
    tenant: str
    parent_branch_id: str | None
    fork_at_seq: int | None
    state: str
    head_seq: int
    head_hash: str
    head_epoch: int
    head_verified: bool
    writer_impl: str
    header_hash: str
    created_at: int
    lease_holder: str | None = None
    lease_epoch: int = 0
    lease_expires_at: int = 0
    stage_token: str | None = None
    stage_expires_at: int = 0
    stage_epoch: int = 0
    dropped_ref: str | None = None  # canonical JSON of an ArtifactRef (torn tail)

    @property
    def lease(self) -> Lease | None:
        if self.lease_holder is None:
            return None
        return Lease(self.lease_epoch, self.lease_expires_at, self.lease_holder)

    def as_head(self) -> Head:
        return Head(self.branch_id, self.head_seq, self.head_hash, self.head_epoch)

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> BranchRecord:
        return cls(
            branch_id=item["branch_id"]["S"],
            thread_id=item["thread_id"]["S"],
            tenant=item["tenant"]["S"],
            parent_branch_id=_s(item, "parent_branch_id"),
            fork_at_seq=_n(item, "fork_at_seq"),
            state=item["state"]["S"],
            head_seq=int(item["head_seq"]["N"]),
            head_hash=item["head_hash"]["S"],
            head_epoch=_n(item, "head_epoch") or 0,
            head_verified=_b(item, "head_verified", True),
            writer_impl=_s(item, "writer_impl") or "threads-aws",
            header_hash=_s(item, "header_hash") or "",
            created_at=_n(item, "created_at") or 0,
            lease_holder=_s(item, "lease_holder"),
            lease_epoch=_n(item, "lease_epoch") or 0,
            lease_expires_at=_n(item, "lease_expires_at") or 0,
            stage_token=_s(item, "stage_token"),
            stage_expires_at=_n(item, "stage_expires_at") or 0,
            stage_epoch=_n(item, "stage_epoch") or 0,
            dropped_ref=_s(item, "dropped_ref"),
        )


@dataclass(frozen=True, slots=True)
class ThreadRecord:
    thread_id: str
    tenant: str
    main_branch_id: str
    created_at: int

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> ThreadRecord:
        return cls(
            thread_id=item["thread_id"]["S"],
            tenant=item["tenant"]["S"],
            main_branch_id=item["main_branch_id"]["S"],
            created_at=int(item["created_at"]["N"]),
        )


def thread_meta_item(tenant: str, thread_id: str, main_branch_id: str, created_at: int) -> dict[str, Any]:
    return {
        **thread_key(thread_id),
        "kind": {"S": "thread"},
        "thread_id": {"S": thread_id},
        "tenant": {"S": tenant},
        "main_branch_id": {"S": main_branch_id},
        "created_at": {"N": str(created_at)},
        "gsi1pk": {"S": tenant_gsi_pk(tenant)},
        "gsi1sk": {"S": f"{created_at:016d}#{thread_id}"},
    }


def thread_branch_item(tenant: str, thread_id: str, branch_id: str, created_at: int) -> dict[str, Any]:
    return {
        **thread_branch_key(thread_id, branch_id),
        "kind": {"S": "thread_branch"},
        "thread_id": {"S": thread_id},
        "branch_id": {"S": branch_id},
        "tenant": {"S": tenant},
        "created_at": {"N": str(created_at)},
    }
