"""A branch's workspace: a manifest of files whose bytes live in the content-addressed artifact
store (semantics.md §6).

- A manifest is the list `[{path, mode, size, sha256}]` sorted by path in UTF-16 code-unit
  order; stored as an artifact of its JCS bytes, so its artifact key IS its `manifest_hash`
  (`canonical_hash(entries)`). Copying a workspace is copying that hash; a fork copies nothing.
- Writing a file stores its bytes once by hash (`ArtifactStore.put`: conditional, and a repeat
  of the same bytes is a no-op), then the new manifest (the same).
- Every operation is a pure function of (base manifest, input): the same call over the same base
  produces the same bytes and the same hashes. That is what makes a write exactly-once under
  re-dispatch (see `engine.file_tools`): nothing a write stores is visible until the log's
  `effect_commit` names the new manifest, and re-running it stores nothing new.

Where the current manifest lives: in the log. The branch's fold keeps the manifest hash of the
latest `effect_commit` whose `provider_receipt` is `workspace:<hash>` (or the latest snapshot's
`manifest_hash`, which a child inherits through its fork point), so the log and the "row" can
never disagree and a child starts from exactly the snapshot it forked at (`core.fold`).

Paths are relative to `/workspace`, normalised (`./` and empty segments dropped), never absolute,
never `..`, no control characters; limits on sizes and counts give typed errors
(`WorkspaceError.code`), which the file tools return as error results.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any

from ..core.errors import LogError
from ..core.manifest import EMPTY, FILE_MEDIA_TYPE, MANIFEST_MEDIA_TYPE, Manifest, WorkspaceError

PROVIDER = "s3_workspace"
_CACHE = 256  # manifests a process keeps (immutable: keyed by hash)

__all__ = ["PROVIDER", "Workspace"]


class Workspace:
    """Workspace reads and writes over the artifact store (`store.artifacts.ArtifactStore`)."""

    def __init__(self, artifacts: Any) -> None:
        self.artifacts = artifacts
        self._manifests: OrderedDict[str, Manifest] = OrderedDict()

    def manifest(self, manifest_hash: str | None) -> Manifest:
        """The manifest stored under `manifest_hash` (None: the empty workspace), verified:
        absent → `snapshot_missing`, bytes that don't hash to it → `snapshot_manifest_mismatch`."""
        if manifest_hash is None:
            return EMPTY
        m = self._manifests.get(manifest_hash)
        if m is not None:
            self._manifests.move_to_end(manifest_hash)
            return m
        try:
            data = self.artifacts.get(manifest_hash)
        except LogError as exc:
            if exc.code == "artifact_missing":
                raise LogError("snapshot_missing", None, f"no manifest {manifest_hash}") from None
            raise LogError(
                "snapshot_manifest_mismatch", None, f"manifest {manifest_hash}: {exc.message}"
            ) from None
        try:
            m = Manifest.parse(data)
        except (ValueError, KeyError, TypeError) as exc:
            raise LogError(
                "snapshot_manifest_mismatch", None, f"manifest {manifest_hash} unreadable: {exc}"
            ) from None
        if m.hash != manifest_hash:  # a stored list not in canonical order / form
            raise LogError("snapshot_manifest_mismatch", None, f"manifest {manifest_hash} is not canonical")
        self._keep(m)
        return m

    def _keep(self, m: Manifest) -> None:
        self._manifests[m.hash] = m
        while len(self._manifests) > _CACHE:
            self._manifests.popitem(last=False)

    def read(self, manifest: Manifest, path: str) -> bytes:
        entry = manifest.get(path)
        if entry is None:
            raise WorkspaceError("file_not_found", f"{path} does not exist")
        data: bytes = self.artifacts.get(entry.sha256, entry.size)
        return data

    def write(self, manifest: Manifest, path: str, data: bytes, mode: int | None = None) -> Manifest:
        """Store `data` once by hash and the new manifest; returns it (its hash is the receipt)."""
        sha = hashlib.sha256(data).hexdigest()
        new = manifest.with_file(path, sha, len(data), mode)  # limits checked before any put
        self.artifacts.put(data, FILE_MEDIA_TYPE)
        return self.commit(new)

    def commit(self, new: Manifest) -> Manifest:
        """Store the manifest itself (content-addressed: a repeat is a no-op)."""
        ref = self.artifacts.put(new.to_bytes(), MANIFEST_MEDIA_TYPE)
        assert ref["sha256"] == new.hash
        self._keep(new)
        return new
