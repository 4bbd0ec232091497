"""Streamed import of a branch export (semantics.md §1 "Export and import").

Line k passes every stage before line k+1 is read, so the earliest failure wins:
1. alone: UTF-8, JSON, nesting, JCS, format admission, schema (incl. the critical rule);
2. across lines: segment structure, seq, prev_hash, fork links, then `Fold.apply`
   (validate_next);
3. the head checkpoint.
A torn tail (bytes after the last newline) is dropped, kept, and marks the head unverified.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass, field
from hashlib import sha256 as _sha256
from typing import Any

from . import schema
from ._validators import EVENT_VALIDATORS as _VALIDATORS
from ._validators import SchemaError
from ._validators import validate_envelope as _validate_envelope
from .canonical import MAX_INT, NotCanonical, admit, admit_fast, sha256_hex
from .errors import LogError
from .fold import Fold
from .lines import HEAD_FORMAT, HEADER_FORMAT, StoredLine


@dataclass(slots=True)
class Segment:
    """One branch's own stored lines: its header (seq 0) and events."""

    branch_id: str
    thread_id: str
    header: StoredLine
    writer: dict[str, str]
    parent_branch_id: str | None = None
    fork_at_seq: int | None = None
    lines: list[StoredLine] = field(default_factory=list)

    @property
    def last(self) -> StoredLine:
        return self.lines[-1] if self.lines else self.header


@dataclass(slots=True)
class Imported:
    segments: list[Segment]
    fold: Fold
    head_verified: bool
    committed_bytes: int
    torn: bytes | None = None
    torn_offset: int | None = None

    @property
    def branch_id(self) -> str:
        return self.segments[-1].branch_id

    @property
    def head(self) -> StoredLine:
        seg = self.segments[-1]
        return seg.last if seg.lines or seg.parent_branch_id is None else seg.last

    def events(self) -> list[dict[str, Any]]:
        return self.fold.events


_new_line = tuple.__new__


def _readable_seq(value: Any) -> int | None:
    """A seq an error can name: an integer in 0..2^53-1 (the error's seq is an Int)."""
    return value if type(value) is int and 0 <= value <= MAX_INT else None


class Importer:
    """Feed terminated lines one by one; `finish` checks the head checkpoint."""

    def __init__(self, *, now: int | None = None, fold: Fold | None = None) -> None:
        self.fold = fold or Fold(now=now)
        self.segments: list[Segment] = []
        self.last_seq = 0  # last readable seq, for naming unreadable lines
        self.expect_fork = False
        self.head_value: dict[str, Any] | None = None
        self.lines_seen = 0
        self.committed_bytes = 0
        self.last_hash = ""  # hash of the last stored line (the chain's prev_hash for the next)

    # -- stage 1 -----------------------------------------------------------
    def _admit(self, raw: bytes) -> dict[str, Any]:
        try:
            return admit(raw)
        except NotCanonical as exc:
            raise LogError("invalid_line", self._seq_of(exc.value), str(exc)) from None

    def _seq_of(self, value: Any) -> int:
        """The seq an error names for this line. A readable seq (an event's, or a head
        checkpoint's own) names itself; a header is 0 when it is the first line. Anything else
        (not JSON, nested too deep, no readable seq, a child header) is named by its position:
        0 for the first line, else the last readable seq plus 1 (a child header doesn't restart
        the count). Inferred: a child header's errors, format admission included, name the
        child's first seq, as rule 4 does ("0 for a header" read as the root header)."""
        if isinstance(value, dict) and value.get("format") != HEADER_FORMAT:
            seq = _readable_seq(value.get("seq"))
            if seq is not None:
                return seq
        return 0 if self.lines_seen == 0 else self.last_seq + 1

    def feed(self, raw: bytes) -> None:
        """Admit, check and apply one line (without its newline), in the order of the module
        docstring. An event line takes this one function end to end (it runs once per line of
        every import): the fast admission leaf, its type's generated validator, `Fold.apply`."""
        if self.head_value is not None:
            # The head checkpoint is the last line of an export: one followed by any line is
            # misplaced (valid alone), named by its own seq (inferred).
            raise LogError("invalid_transition", self.head_value["seq"], "a line follows the head checkpoint")
        value = admit_fast(raw)
        if value is None:
            value = self._admit(raw)  # the exact path: admits, or names the failure
        if "format" in value or "seq" not in value:
            self._meta(raw, value)
            self.lines_seen += 1
            return
        # Schema (rule 5 included). Every known type is at version 1: (type, 2) is unknown and
        # meets the envelope only.
        type_ = value.get("type")
        validator = _VALIDATORS.get(type_) if type(type_) is str else None
        if value.get("type_version") != 1:
            validator = None
        try:
            (validator or _validate_envelope)(value)
        except SchemaError as exc:
            raise LogError("invalid_line", self._seq_of(value), exc.message) from None
        seq = value["seq"]  # the envelope holds it to 1..2^53-1
        known = validator is not None
        if not known and value["critical"]:
            raise LogError("unsupported_critical_event", seq, f"unknown critical type {type_!r}")
        self.last_seq = seq
        # Across lines: segment structure, seq, prev_hash, fork link, then validate_next.
        segments = self.segments
        if not segments:
            raise LogError("invalid_transition", seq, "the first line is not a header")
        is_fork = known and type_ == "fork"  # an unknown (type, type_version) is no fork
        if is_fork is not self.expect_fork:
            if self.expect_fork:
                raise LogError("invalid_transition", seq, "a child header must be followed by its fork")
            raise LogError("invalid_transition", seq, "fork is only the first event of a child segment")
        fold = self.fold
        if seq != fold.head_seq + 1:
            raise LogError("seq_mismatch", seq, f"expected seq {fold.head_seq + 1}")
        if value["prev_hash"] != self.last_hash:
            raise LogError("prev_hash_mismatch", seq, "prev_hash does not chain")
        seg = segments[-1]
        if is_fork:
            self._fork(seg, seq, value["data"])
        fold.apply(value, known=known)
        hash_ = _sha256(raw).hexdigest()
        # tuple.__new__ directly: the NamedTuple's own __new__ is a Python frame per line
        seg.lines.append(
            _new_line(
                StoredLine,
                (seq, raw, hash_, value["event_id"], type_, value["epoch"], value["critical"], value),
            )
        )
        self.last_hash = hash_
        self.committed_bytes += len(raw) + 1
        self.lines_seen += 1

    def _fork(self, seg: Segment, seq: int, d: dict[str, Any]) -> None:
        parent = self.segments[-2]
        if d["parent_branch_id"] != parent.branch_id or d["at_hash"] != parent.last.hash:
            raise LogError("prev_hash_mismatch", seq, "fork does not link to the parent line")
        seg.parent_branch_id, seg.fork_at_seq = parent.branch_id, seq - 1
        self.expect_fork = False

    def _meta(self, raw: bytes, value: dict[str, Any]) -> None:
        seq = self._seq_of(value)
        fmt = schema.admit_format(value, seq)
        if fmt == HEAD_FORMAT:
            schema.check_head(value, seq)
            if self.lines_seen == 0:
                raise LogError("invalid_transition", seq, "the first line is not a header")
            self.head_value = value
            return
        schema.check_header(value, seq)
        self.committed_bytes += len(raw) + 1
        if self.segments:
            # A root segment may end at its header: a repair fork of a parent whose first event
            # is corrupt sits at seq 0 (fork.at_hash = the header's hash).
            if self.expect_fork:
                raise LogError("invalid_transition", seq, "a child header must be followed by its fork")
            if value["thread_id"] != self.segments[0].thread_id:
                raise LogError("invalid_transition", seq, "child header names another thread")  # rule 4
        header = StoredLine.of_header(raw)
        self.segments.append(Segment(value["branch_id"], value["thread_id"], header, value["writer"]))
        self.last_hash = header.hash
        self.expect_fork = len(self.segments) > 1
        self.fold.begin_segment(value["thread_id"], value["branch_id"])

    # -- stage 3 ------------------------------------------------------------
    def finish(self, *, torn: bool) -> bool:
        """Check the head checkpoint; returns head_verified."""
        if not self.segments:
            raise LogError("invalid_transition", 0, "empty log")  # no header line (inferred)
        if self.expect_fork:
            raise LogError(
                "invalid_transition", self.last_seq + 1, "a child header must be followed by its fork"
            )
        head = self.head_value
        if head is None:
            return False
        seg = self.segments[-1]
        last = seg.last
        last_seq = self.fold.head_seq if seg.lines or len(self.segments) > 1 else 0
        if head["seq"] != last_seq or head["hash"] != last.hash or head["branch_id"] != seg.branch_id:
            raise LogError("head_mismatch", head["seq"], "the head checkpoint does not match the last line")
        return not torn


def import_log(
    data: bytes,
    *,
    now: int | None = None,
    verify: Callable[[Imported], None] | None = None,
) -> Imported:
    """Import a JSONL export; raises LogError(code, seq) at the earliest failing line."""
    imp = Importer(now=now)
    # Import allocates many long-lived objects and no cycles: generational collections would
    # rescan the growing fold for nothing.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        torn, torn_offset = _feed_all(imp, data)
    finally:
        if gc_was_enabled:
            gc.enable()
    verified = imp.finish(torn=torn is not None)
    result = Imported(imp.segments, imp.fold, verified, imp.committed_bytes, torn, torn_offset)
    if verify is not None:
        verify(result)
    return result


def _feed_all(imp: Importer, data: bytes) -> tuple[bytes | None, int | None]:
    # One split in C rather than a find and a slice per line: every line's bytes are kept by
    # its StoredLine anyway, and lines are still fed (and fail) one by one, in order.
    lines = data.split(b"\n")
    tail = lines.pop()  # bytes after the last newline (the newline is the commit marker)
    feed = imp.feed
    for raw in lines:
        feed(raw)
    if tail:
        return tail, len(data) - len(tail)
    return None, None


def export_bytes(segments: list[Segment], head_line: bytes) -> bytes:
    parts: list[bytes] = []
    for seg in segments:
        parts.append(seg.header.raw)
        parts.extend(line.raw for line in seg.lines)
    parts.append(head_line)
    return b"\n".join(parts) + b"\n"


def chain_hash(raw: bytes) -> str:
    return sha256_hex(raw)
