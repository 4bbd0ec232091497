"""The store's value types and errors, shared by every row-kind module and its callers (they
import no boto3, so the Protocols of `store.protocol` and the pure core can name them)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Clock = Callable[[], int]
Item = dict[str, Any]


def wall_ms() -> int:
    """The default clock (epoch ms). Stores read time only through an injectable clock."""
    return time.time_ns() // 1_000_000


# A row that copies content from the log (a call's input, a question) keeps at most this much of it
# inline: DynamoDB refuses an item over 400 KB, and a log line may be 1 MiB (the log holds it).
INLINE_COPY_MAX = 64 * 1024


class StoreError(Exception):
    """A store failure that is not a log ErrorCode (those are `threads_aws.core.errors.LogError`)."""


class NotFound(StoreError, LookupError):
    """The branch/thread does not exist (the API maps this to `not_found`)."""


class AlreadyExists(StoreError):
    """A conditional create found the item already there."""


class StateConflict(StoreError):
    """A conditional state change found another state."""


@dataclass(frozen=True, slots=True)
class Companion:
    """A side row that commits in the same transaction as an append or a branch creation (a run
    receipt with its `user_input`, an approval row with its park, ...). Built by the row kind's
    store module: `item` is its TransactItem, `tag` names it when its condition fails."""

    tag: str
    item: Item


class CompanionFailed(StoreError):
    """A companion's condition failed, so nothing of the transaction was written. `tag` names the
    companion; `item` is the stored item when the service returned it (ALL_OLD)."""

    def __init__(self, tag: str, item: Item | None = None) -> None:
        super().__init__(f"companion {tag} failed its condition")
        self.tag = tag
        self.item = item


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
