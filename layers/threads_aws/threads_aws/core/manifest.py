"""Workspace manifests, the pure part (semantics.md §6): the list `[{path, mode, size, sha256}]`
sorted by path in UTF-16 code-unit order, its JCS bytes and `manifest_hash`, path
normalisation and the limits. The artifact I/O is `sandbox.workspace`; the fold reads the
current manifest from `provider_receipt` (`manifest_of_receipt`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .canonical import canonical_bytes, canonical_hash

RECEIPT_PREFIX = "workspace:"
MANIFEST_MEDIA_TYPE = "application/vnd.threads.manifest+json"
FILE_MEDIA_TYPE = "application/octet-stream"

MAX_FILE_BYTES = 1 << 20  # one file written by a tool
MAX_WORKSPACE_BYTES = 64 << 20
MAX_FILES = 10_000
MAX_PATH_CHARS = 1024
MAX_SEGMENT_CHARS = 255
DEFAULT_MODE = 0o644
#: agent_spawned.isolation: which workspace a subagent works in (`engine.isolation`)
ISOLATIONS = ("none", "shared_sandbox", "worktree", "forked_sandbox")


class WorkspaceError(Exception):
    """A typed failure a caller caused (bad path, too big, no such file, ...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class Entry:
    path: str
    mode: int
    size: int
    sha256: str

    def as_json(self) -> dict[str, Any]:
        return {"mode": self.mode, "path": self.path, "sha256": self.sha256, "size": self.size}


def utf16_key(path: str) -> bytes:
    """Sort key: UTF-16 code-unit order (big-endian code units compare like the units)."""
    return path.encode("utf-16-be", "surrogatepass")


def normalize_path(raw: Any) -> str:
    """The workspace-relative form of `raw`, or `path_invalid` / `path_outside_workspace`."""
    if not isinstance(raw, str) or not raw.strip():
        raise WorkspaceError("path_invalid", "a path is a non-empty string")
    p = raw.strip()
    if p.startswith("/workspace/"):
        p = p[len("/workspace/") :]
    if p.startswith(("/", "\\", "~")) or (len(p) > 1 and p[1] == ":"):
        raise WorkspaceError(
            "path_outside_workspace", f"{raw!r} is absolute"
        )
    if any(ord(c) < 0x20 or c in "\x7f\\" for c in p):
        raise WorkspaceError("path_invalid", f"{raw!r} holds a control character or a backslash")
    parts = [s for s in p.split("/") if s not in ("", ".")]
    if any(s == ".." for s in parts):
        raise WorkspaceError("path_outside_workspace", f"{raw!r} leaves the workspace ('..')")
    if not parts:
        raise WorkspaceError("path_invalid", f"{raw!r} names the workspace root, not a file")
    out = "/".join(parts)
    if len(out) > MAX_PATH_CHARS or any(len(s) > MAX_SEGMENT_CHARS for s in parts):
        raise WorkspaceError(
            "path_invalid", f"longer than {MAX_PATH_CHARS} chars (a segment: 255)"
        )
    return out


class Manifest:
    """An immutable file tree: path → Entry."""

    __slots__ = ("_entries", "_hash")

    def __init__(self, entries: dict[str, Entry] | None = None) -> None:
        self._entries = dict(entries or {})
        self._hash: str | None = None

    @classmethod
    def parse(cls, data: bytes) -> Manifest:
        items = json.loads(data)
        if not isinstance(items, list):
            raise ValueError("a manifest is a list")
        entries: dict[str, Entry] = {}
        for it in items:
            e = Entry(str(it["path"]), int(it["mode"]), int(it["size"]), str(it["sha256"]))
            entries[e.path] = e
        return cls(entries)

    def entries(self) -> list[Entry]:
        return [self._entries[p] for p in sorted(self._entries, key=utf16_key)]

    def as_json(self) -> list[dict[str, Any]]:
        return [e.as_json() for e in self.entries()]

    def to_bytes(self) -> bytes:
        return canonical_bytes(self.as_json())

    @property
    def hash(self) -> str:
        if self._hash is None:
            self._hash = canonical_hash(self.as_json())
        return self._hash

    @property
    def total_bytes(self) -> int:
        return sum(e.size for e in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, path: str) -> Entry | None:
        return self._entries.get(path)

    def paths(self) -> list[str]:
        return sorted(self._entries, key=utf16_key)

    def with_file(self, path: str, sha256: str, size: int, mode: int | None = None) -> Manifest:
        """The tree with `path` set (its mode kept when it exists): the pure half of a write."""
        if size > MAX_FILE_BYTES:
            raise WorkspaceError("file_too_large", f"{path}: {size} bytes > the {MAX_FILE_BYTES} byte limit")
        old = self._entries.get(path)
        prefix = path + "/"
        if any(p.startswith(prefix) for p in self._entries):
            raise WorkspaceError("path_conflict", f"{path} is a directory")
        parts = path.split("/")
        for i in range(1, len(parts)):
            if "/".join(parts[:i]) in self._entries:
                raise WorkspaceError("path_conflict", f"{'/'.join(parts[:i])} is a file, not a directory")
        if old is None and len(self._entries) >= MAX_FILES:
            raise WorkspaceError("workspace_full", f"the workspace holds {MAX_FILES} files already")
        total = self.total_bytes - (old.size if old else 0) + size
        if total > MAX_WORKSPACE_BYTES:
            raise WorkspaceError(
                "workspace_full", f"{total} bytes > {MAX_WORKSPACE_BYTES}"
            )
        m = mode if mode is not None else (old.mode if old else DEFAULT_MODE)
        entries = dict(self._entries)
        entries[path] = Entry(path, m, size, sha256)
        return Manifest(entries)

    def without(self, path: str) -> Manifest:
        entries = dict(self._entries)
        entries.pop(path, None)
        return Manifest(entries)


EMPTY = Manifest()


def receipt(manifest: Manifest) -> str:
    return RECEIPT_PREFIX + manifest.hash


def manifest_of_receipt(value: Any) -> str | None:
    """The manifest hash a workspace write's `provider_receipt` names (None for other tools')."""
    if isinstance(value, str) and value.startswith(RECEIPT_PREFIX):
        return value[len(RECEIPT_PREFIX) :]
    return None
