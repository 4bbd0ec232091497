"""The S3 workspace sandbox provider (`sandbox.fork.SandboxProvider`): snapshots and restores
of a branch's workspace, whose files live content-addressed in the artifact store.

- Capture (`capture`): a workspace changes only through committed writes, which stored the file
  bytes and then the manifest before their `effect_commit`; the capture is therefore durable
  and restorable once the manifest object exists (one HeadObject). Nothing runs in the
  workspace between calls, so there is nothing to freeze: `quiesced` lists no process.
- Restore (`restore`): read the manifest by its hash, verified (its bytes hash to the
  snapshot's `manifest_hash` and are the canonical form): absent → `snapshot_missing`, not
  verifying → `snapshot_manifest_mismatch`. That one GetObject verifies the whole tree: every
  entry names its file by sha256 and size, and a file object is its key's content (stored
  content-addressed, conditional puts, bytes and length verified again on every read), so the
  manifest pins every byte. Presence needs no HeadObject per file either: `sandbox.gc` never
  deletes an object an unexpired snapshot's manifest or a live branch's log references, and the
  fork is refused once the snapshot expired. (Out-of-band damage to the bucket still surfaces,
  typed, when a file is read: `artifact_missing` / `artifact_corrupt`.) The child's workspace
  IS the snapshot's manifest (its fold inherits it through the fork point), so a restore copies
  nothing and creates nothing: `lookup` after a lost answer is a final not-found and `release`
  has nothing to delete (the objects are shared; `sandbox.gc` collects the unreferenced ones).
"""

from __future__ import annotations

from typing import Any

from ..core.canonical import new_uuid7
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
        self.calls += 1
        manifest = self.workspace.manifest(snapshot["manifest_hash"])  # verified (module docstring)
        return Restored(f"workspace:{operation_key}", manifest.as_json())

    def lookup(self, operation_key: str) -> Restored | None:
        return None  # a restore creates nothing: not found is final

    def release(self, sandbox_id: str) -> None:
        return None  # nothing to delete: a workspace is a manifest hash in the log
