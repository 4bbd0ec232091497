"""The on-disk state of `threads-aws dev`: a checksummed, append-only record file per generation,
content-addressed blobs beside it, one server per directory. Knows nothing of moto (that is
`persist_moto`); a record is ``(meta: dict, body: bytes)``.

Layout of a state directory::

    LOCK                    flock'ed by the one server using the directory
    snapshot-<G>.log        records that rebuild the state as of generation G (absent for G=0)
    journal-<G>.log         records accepted since; replayed after snapshot-<G>
    blobs/<ab>/<sha256>     bodies over BLOB_MIN bytes, referenced from records by sha256

Ordering and durability, up front:
- The current generation is the highest G with a ``snapshot-G.log`` (G=0 without one). A
  snapshot only ever appears whole, by rename after fsync, so a crash during compaction leaves
  the previous generation current; files of older generations and ``*.tmp`` are deleted on open.
- A record is ``>II`` (payload length, CRC-32 of payload) + payload, where payload is ``>I``
  (meta length) + meta JSON + body. Records are appended by one writer at a time (the caller
  holds its apply lock), so file order is apply order.
- ``append`` returns the end offset of its record; ``sync_to(end)`` returns once the file is
  durable up to there. It is a group commit: one fdatasync covers every record written before it
  began, so concurrent waiters share it. With ``fsync=False`` records are durable against a
  process crash (kill -9: the page cache survives) but not against power loss.
- A blob is written (tmp, fsync, rename) before the record that names it, so a durable record
  never names a missing blob.
- Reading: a final record that is short or fails its checksum is a torn write from a crash
  before its request was answered: it is dropped (and truncated away) with a warning. A bad
  record with valid-length data after it is corruption: PersistError, never a silent loss.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import orjson

log = logging.getLogger("threads_aws_dev.local")

FORMAT = "threads-aws-dev-state"
VERSION = 1
BLOB_MIN = 16 * 1024  # bodies above this live in blobs/ (S3 artifacts), smaller ones inline
_HEAD = struct.Struct(">II")
_META = struct.Struct(">I")
_FILE = re.compile(r"^(snapshot|journal)-(\d+)\.log$")


class PersistError(Exception):
    """The state directory cannot be used as it is (corrupt, newer format, in use)."""


def encode_record(meta: dict[str, Any], body: bytes = b"") -> bytes:
    m = orjson.dumps(meta)
    payload = _META.pack(len(m)) + m + body
    return _HEAD.pack(len(payload), zlib.crc32(payload)) + payload


def decode_payload(payload: bytes) -> tuple[dict[str, Any], bytes]:
    (n,) = _META.unpack_from(payload)
    return orjson.loads(payload[_META.size : _META.size + n]), payload[_META.size + n :]


@dataclass
class ReadResult:
    records: int = 0
    valid_end: int = 0  # offset after the last good record
    torn_bytes: int = 0  # bytes after valid_end that were dropped


def read_records(
    fh: BinaryIO, size: int, result: ReadResult, name: str
) -> Iterator[tuple[dict[str, Any], bytes]]:
    """Yield the records of an open file; fill `result` (torn tail, valid end) as it goes."""
    pos = 0
    while pos < size:
        head = fh.read(_HEAD.size)
        if len(head) < _HEAD.size:
            break
        length, crc = _HEAD.unpack(head)
        end = pos + _HEAD.size + length
        if end > size:
            break  # the record's tail never reached the file
        payload = fh.read(length)
        if len(payload) < length:
            break
        if zlib.crc32(payload) != crc:
            if end < size:
                raise PersistError(
                    f"{name}: record at offset {pos} fails its checksum and {size - end} bytes follow "
                    "(corruption, not a torn write); move the directory away to start fresh"
                )
            break
        try:
            meta, body = decode_payload(payload)
        except (struct.error, orjson.JSONDecodeError) as exc:
            raise PersistError(f"{name}: record at offset {pos} is unreadable ({exc})") from None
        pos = end
        result.records += 1
        result.valid_end = pos
        yield meta, body
    result.torn_bytes = size - result.valid_end


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _sync(fd: int) -> None:
    (getattr(os, "fdatasync", None) or os.fsync)(fd)


class Journal:
    """An append-only record file; `append` under the caller's lock, `sync_to` from any thread."""

    def __init__(self, path: Path, *, fsync: bool = True) -> None:
        self.path = path
        self.fsync = fsync
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.written = os.fstat(self._fd).st_size  # end of what write(2) has accepted
        self._durable = self.written
        import threading

        self._sync_lock = threading.Lock()

    def append(self, meta: dict[str, Any], body: bytes = b"") -> int:
        data = encode_record(meta, body)
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
        self.written += len(data)
        return self.written

    def sync_to(self, end: int) -> None:
        if not self.fsync or self._durable >= end:
            return
        with self._sync_lock:
            if self._durable >= end:
                return
            target = self.written
            _sync(self._fd)
            self._durable = target

    def close(self) -> None:
        if self._fd >= 0:
            if self.fsync:
                _sync(self._fd)
            os.close(self._fd)
            self._fd = -1


@dataclass
class OpenStats:
    generation: int = 0
    snapshot_records: int = 0
    journal_records: int = 0
    journal_bytes: int = 0
    snapshot_bytes: int = 0
    torn_bytes: int = 0
    warnings: list[str] = field(default_factory=list)


class StateDir:
    """One server's state directory. `open()` locks it and tidies it; `records()` yields the
    current generation's records (snapshot, then journal); then `start_journal()` for appends;
    `compact(records)` starts a new generation from a rebuilt record stream."""

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self.generation = 0
        self.journal: Journal | None = None
        self.stats = OpenStats()
        self._lock_fd = -1

    # -- files

    def _file(self, kind: str, gen: int) -> Path:
        return self.path / f"{kind}-{gen}.log"

    def blob_path(self, sha: str) -> Path:
        return self.path / "blobs" / sha[:2] / sha

    def open(self) -> OpenStats:
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock()
        gens = {"snapshot": set(), "journal": set()}  # type: dict[str, set[int]]
        for p in self.path.iterdir():
            m = _FILE.match(p.name)
            if m:
                gens[m.group(1)].add(int(m.group(2)))
            elif p.name.endswith(".tmp"):
                p.unlink()
        self.generation = max(gens["snapshot"], default=0)
        for kind, found in gens.items():
            for g in found:
                if g < self.generation:
                    self._file(kind, g).unlink()
        blobs = self.path / "blobs"
        if blobs.is_dir():
            for p in blobs.glob("*/*.tmp"):
                p.unlink()
        self.stats = OpenStats(generation=self.generation)
        return self.stats

    def _lock(self) -> None:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - no advisory locks on this platform
            return
        fd = os.open(self.path / "LOCK", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            other = os.read(fd, 64).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise PersistError(f"{self.path} is in use by pid {other} (one server per state dir)") from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._lock_fd = fd

    def records(self) -> Iterator[tuple[dict[str, Any], bytes]]:
        """The records of the current generation in apply order, headers checked and skipped;
        a torn journal tail is truncated away."""
        snap = self._file("snapshot", self.generation)
        if self.generation:
            self.stats.snapshot_bytes = snap.stat().st_size
            res = ReadResult()
            with open(snap, "rb") as fh:
                yield from self._checked(
                    read_records(fh, self.stats.snapshot_bytes, res, snap.name), snap.name
                )
            if res.torn_bytes:  # snapshots appear only whole (rename after fsync)
                raise PersistError(f"{snap.name}: truncated at offset {res.valid_end}")
            self.stats.snapshot_records = res.records
        jpath = self._file("journal", self.generation)
        if not jpath.exists():
            return
        size = jpath.stat().st_size
        res = ReadResult()
        with open(jpath, "rb") as fh:
            yield from self._checked(read_records(fh, size, res, jpath.name), jpath.name)
        self.stats.journal_records = res.records
        self.stats.journal_bytes = res.valid_end
        if res.torn_bytes:
            self.stats.torn_bytes = res.torn_bytes
            msg = (
                f"{jpath.name}: dropped a torn final record ({res.torn_bytes} bytes at offset "
                f"{res.valid_end}): a write cut off by a crash, whose request was never answered"
            )
            log.warning("%s", msg)
            self.stats.warnings.append(msg)
            with open(jpath, "r+b") as fh:
                fh.truncate(res.valid_end)
                if self.fsync:
                    _sync(fh.fileno())

    def _checked(
        self, it: Iterator[tuple[dict[str, Any], bytes]], name: str
    ) -> Iterator[tuple[dict[str, Any], bytes]]:
        first = True
        for meta, body in it:
            if first:
                first = False
                if meta.get("format") != FORMAT:
                    raise PersistError(f"{name}: not a {FORMAT} file")
                if int(meta.get("version", 0)) > VERSION:
                    raise PersistError(
                        f"{name}: written by a newer threads-aws (format {meta.get('version')}); "
                        "upgrade, or move the directory away"
                    )
                continue
            if "blob" in meta:
                body = self.read_blob(meta["blob"])
            yield meta, body

    def header(self, kind: str, gen: int) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "file": kind, "generation": gen}

    def start_journal(self) -> Journal:
        """Open the current generation's journal for appends (creating it with its header)."""
        path = self._file("journal", self.generation)
        fresh = not path.exists() or path.stat().st_size == 0
        self.journal = Journal(path, fsync=self.fsync)
        if fresh:
            self.journal.append(self.header("journal", self.generation))
            self.journal.sync_to(self.journal.written)
            if self.fsync:
                _fsync_dir(self.path)
        return self.journal

    # -- blobs

    def put_blob(self, body: bytes) -> str:
        """Store `body` by sha256 (durably, before any record names it); return the sha."""
        sha = hashlib.sha256(body).hexdigest()
        path = self.blob_path(sha)
        if path.exists() and path.stat().st_size == len(body):
            return sha
        new_dir = not path.parent.exists()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{sha}.{os.getpid()}.{id(body)}.tmp")
        with open(tmp, "wb") as fh:
            fh.write(body)
            fh.flush()
            if self.fsync:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
        if self.fsync:
            _fsync_dir(path.parent)
            if new_dir:
                _fsync_dir(path.parent.parent)
                _fsync_dir(self.path)
        return sha

    def read_blob(self, sha: str) -> bytes:
        try:
            data = self.blob_path(sha).read_bytes()
        except FileNotFoundError:
            raise PersistError(f"blob {sha} named by a record is missing") from None
        if hashlib.sha256(data).hexdigest() != sha:
            raise PersistError(f"blob {sha} is damaged (content hash differs)")
        return data

    def split_body(self, meta: dict[str, Any], body: bytes) -> tuple[dict[str, Any], bytes]:
        """Move a large body to blobs/ and name it in the meta."""
        if len(body) <= BLOB_MIN:
            return meta, body
        return {**meta, "blob": self.put_blob(body)}, b""

    # -- compaction

    def compact(self, records: Iterable[tuple[dict[str, Any], bytes]]) -> int:
        """Write `records` as snapshot-<G+1> and make G+1 current (empty journal); returns the
        count. Call with no journal open and nothing appending."""
        assert self.journal is None, "close the journal before compacting"
        gen = self.generation + 1
        final = self._file("snapshot", gen)
        tmp = final.with_name(final.name + ".tmp")
        keep: set[str] = set()
        n = 0
        with open(tmp, "wb") as fh:
            fh.write(encode_record(self.header("snapshot", gen)))
            for meta, body in records:
                meta, body = self.split_body(meta, body)
                if "blob" in meta:
                    keep.add(meta["blob"])
                fh.write(encode_record(meta, body))
                n += 1
            fh.flush()
            os.fsync(fh.fileno())  # always: the old generation is deleted next
        os.replace(tmp, final)
        _fsync_dir(self.path)
        old = self.generation
        self.generation = gen
        for kind in ("snapshot", "journal"):
            p = self._file(kind, old)
            if p.exists():
                p.unlink()
        self._collect_blobs(keep)
        return n

    def _collect_blobs(self, keep: set[str]) -> None:
        blobs = self.path / "blobs"
        if not blobs.is_dir():
            return
        for p in blobs.glob("*/*"):
            if p.name not in keep:
                p.unlink()

    def close(self) -> None:
        if self.journal is not None:
            self.journal.close()
            self.journal = None
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = -1
