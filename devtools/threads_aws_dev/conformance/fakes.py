"""Scripted stand-ins for what cannot run here (conformance `sandbox.json`). The real adapters
implement the same protocols (`forking.SandboxProvider`)."""

from __future__ import annotations

from typing import Any

from threads_aws.sandbox.fork import LookupUnsupported, ResponseLost, Restored


class ScriptedSandbox:
    """A fake sandbox provider driven by a case's `sandbox.json` (`$defs/SandboxScript`)."""

    name = "fake"

    def __init__(self, script: dict[str, Any]) -> None:
        self.snapshots: dict[str, Any] = script.get("snapshots", {})
        self.creates = 0
        self.released: list[str] = []
        self._by_key: dict[str, Restored] = {}

    def restore(self, snapshot: dict[str, Any], operation_key: str) -> Restored:
        spec = self.snapshots[snapshot["snapshot_id"]]
        self.creates += 1
        restored = Restored(spec["restore_sandbox_id"], spec["manifest"])
        self._by_key[operation_key] = restored
        if spec.get("restore_response", "ok") == "lost":
            self._lookup_mode = spec.get("create_lookup", "unsupported")
            raise ResponseLost(operation_key)
        return restored

    def lookup(self, operation_key: str) -> Restored | None:
        if getattr(self, "_lookup_mode", "unsupported") != "found":
            raise LookupUnsupported(operation_key)
        return self._by_key.get(operation_key)

    def release(self, sandbox_id: str) -> None:
        self.released.append(sandbox_id)

    def crashes_after_restore(self, snapshot_id: str) -> bool:
        return self.snapshots.get(snapshot_id, {}).get("restore_response") == "crash"
