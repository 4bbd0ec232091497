"""The S3 workspace sandbox provider (`sandbox.fork.SandboxProvider`): snapshots and restores
of a branch's workspace, whose files live content-addressed in the artifact store.

- Capture (`capture`): a workspace changes only through committed writes, which stored the file
  bytes and then the manifest before their `effect_commit`; the capture is therefore durable
  and restorable once the manifest object exists (one HeadObject). Nothing runs in the
  workspace between calls, so there is nothing to freeze: `quiesced` lists no process.
- Restore (`restore`): read the manifest by its hash (verified: its bytes hash to the
  snapshot's `manifest_hash`), then check each file object exists with the manifest's size
  (one HeadObject per file). Absent manifest or file → `snapshot_missing`; bytes or sizes that
  differ → `snapshot_manifest_mismatch`. The child's workspace IS the snapshot's manifest (its
  fold inherits it through the fork point), so a restore copies nothing and creates nothing:
  `lookup` after a lost answer is a final not-found and `release` has nothing to delete (the
  objects are shared; `sandbox.gc` collects the unreferenced ones).
"""

from __future__ import annotations

from typing import Any

from ..core.canonical import new_uuid7
from ..core.errors import LogError
from .fork import Restored
from .workspace import PROVIDER, Workspace

DEFAULT_RETENTION_MS = 7 * 86_400_000


class S3WorkspaceProvider:
    name = PROVIDER

    def __init__(self, artifacts: Any, workspace: Workspace | None = None) -> None:
        self.artifacts = artifacts
        self.workspace = workspace or Workspace(artifacts)
        self.calls = 0  # S3 requests this provider made (benchmarks)

    def capture(self, manifest_hash: str) -> bool:
        """Whether the manifest is stored (the capture is durable and restorable)."""
        self.calls += 1
        return bool(self.artifacts.exists(manifest_hash))

    def snapshot_data(
        self, branch_id: str, manifest_hash: str, *, now: int, retention_ms: int | None
    ) -> dict[str, Any]:
        return {
            "capture_class": "filesystem",
            "expires_at": None if retention_ms is None else now + retention_ms,
            "manifest_hash": manifest_hash,
            "provider": self.name,
            "quiesced": {"excluded": [], "frozen": [], "stopped": []},
            "sandbox_id": f"workspace:{branch_id}",
            "snapshot_id": new_uuid7(),
        }

    def restore(self, snapshot: dict[str, Any], operation_key: str) -> Restored:
        manifest_hash = snapshot["manifest_hash"]
        self.calls += 1
        manifest = self.workspace.manifest(manifest_hash)
        for entry in manifest.entries():
            self.calls += 1
            size = self.artifacts.size(entry.sha256)
            if size is None:
                raise LogError("snapshot_missing", None, f"{entry.path}: object {entry.sha256} is gone")
            if size != entry.size:
                raise LogError(
                    "snapshot_manifest_mismatch",
                    None,
                    f"{entry.path}: {size} bytes stored, {entry.size} listed",
                )
        return Restored(f"workspace:{operation_key}", manifest.as_json())

    def lookup(self, operation_key: str) -> Restored | None:
        return None  # a restore creates nothing: not found is final

    def release(self, sandbox_id: str) -> None:
        return None  # nothing to delete: a workspace is a manifest hash in the log
