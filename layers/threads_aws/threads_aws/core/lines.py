"""The three line kinds of a branch export: Header, event, Head checkpoint (semantics.md §1)."""

from __future__ import annotations

from hashlib import sha256 as _sha256
from typing import Any, NamedTuple

from .. import WRITER
from .canonical import canonical_bytes, sha256_hex

HEADER_FORMAT = "threads.log"
HEAD_FORMAT = "threads.head"
FORMAT_VERSION = 1
READABLE_IMPLS = ("threads-py", "threads-ts", "threads-aws")


class StoredLine(NamedTuple):
    """One stored line: its exact bytes (no newline) and what the store indexes them by.

    A header is seq 0 of its segment with no event_id/type. Immutable; a NamedTuple rather than
    a frozen dataclass because one is built per imported line, and a frozen dataclass's
    `__init__` (one `object.__setattr__` per field) costs several times a tuple's.
    """

    seq: int
    raw: bytes
    hash: str
    event_id: str | None = None
    type: str | None = None
    epoch: int = 0
    critical: bool = True
    event: dict[str, Any] | None = None

    @classmethod
    def of_event(cls, raw: bytes, event: dict[str, Any]) -> StoredLine:
        return cls(
            event["seq"],
            raw,
            _sha256(raw).hexdigest(),
            event["event_id"],
            event["type"],
            event["epoch"],
            event["critical"],
            event,
        )

    @classmethod
    def of_header(cls, raw: bytes) -> StoredLine:
        return cls(seq=0, raw=raw, hash=sha256_hex(raw))


def header_value(thread_id: str, branch_id: str, created_at: int) -> dict[str, Any]:
    return {
        "branch_id": branch_id,
        "created_at": created_at,
        "format": HEADER_FORMAT,
        "format_version": FORMAT_VERSION,
        "thread_id": thread_id,
        "writer": dict(WRITER),
    }


def header_line(thread_id: str, branch_id: str, created_at: int) -> bytes:
    return canonical_bytes(header_value(thread_id, branch_id, created_at))


def head_line(branch_id: str, seq: int, hash_: str) -> bytes:
    return canonical_bytes(
        {
            "branch_id": branch_id,
            "format": HEAD_FORMAT,
            "format_version": FORMAT_VERSION,
            "hash": hash_,
            "seq": seq,
        }
    )
