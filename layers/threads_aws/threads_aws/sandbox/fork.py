"""The fork procedure (semantics.md §6) over the store, the resources ledger and a sandbox
provider: child `forking` → pending ledger row → restore + manifest check → header and `fork`
event → `ready`. Any failure leaves no child and releases what it wrote; a create whose outcome
cannot be established stays `unknown` for an operator (`resource_unknown`). A crash mid-fork is
never resumed: `recover_fork` marks the child `fork_failed` and releases its rows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ..core.canonical import canonical_hash, new_uuid7
from ..core.errors import LogError
from ..core.fork_points import child_lines, fork_point
from ..core.importer import import_log
from ..store.branches import NewBranch
from ..store.protocol import EventLog
from ..store.protocol import ResourceStore as ResourceLedger


class ResponseLost(Exception):
    """The provider may have created the resource, but its answer never arrived."""


class LookupUnsupported(Exception):
    """The adapter can neither create idempotently by operation_key nor look the key up."""


@dataclass(frozen=True, slots=True)
class Restored:
    sandbox_id: str
    manifest: list[dict[str, Any]]


class SandboxProvider(Protocol):
    name: str

    def restore(self, snapshot: dict[str, Any], operation_key: str) -> Restored: ...

    def lookup(self, operation_key: str) -> Restored | None: ...

    def release(self, sandbox_id: str) -> None: ...


@dataclass(frozen=True, slots=True)
class ForkResult:
    thread_id: str
    branch_id: str
    at_seq: int
    fork_event: dict[str, Any]
    knowledge_revision: int | None


class Crash(Exception):
    """Raised by a failpoint to simulate the host dying mid-operation (tests only)."""


def fork(
    store: EventLog,
    ledger: ResourceLedger,
    sandbox: SandboxProvider,
    *,
    tenant: str,
    branch_id: str,
    event_id: str,
    new_branch_id: str | None = None,
    knowledge_policy: str = "pinned",
    now: int,
    failpoint: Callable[[str], None] | None = None,
) -> ForkResult:
    parent = import_log(store.export(branch_id), now=now)
    fold = parent.fold
    hashes = {line.seq: line.hash for seg in parent.segments for line in seg.lines}
    point = fork_point(fold, hashes, event_id, now)
    thread_id = fold.thread_id
    assert thread_id is not None
    child_id = new_branch_id or new_uuid7()
    header, _ = child_lines(
        thread_id=thread_id,
        parent_branch_id=branch_id,
        point=point,
        new_branch_id=child_id,
        epoch=1,
        now=now,
        sandbox_id="-",
        knowledge_policy=knowledge_policy,
    )
    chain_epoch = max(ev["epoch"] for ev in fold.events if ev["seq"] <= point.seq)
    store.create_branch(
        NewBranch(
            thread_id=thread_id,
            tenant=tenant,
            branch_id=child_id,
            header=header,
            parent_branch_id=branch_id,
            fork_at_seq=point.seq,
            state="forking",
            head_hash=point.line_hash,
            head_epoch=chain_epoch,
        )
    )
    row = ledger.open(tenant=tenant, owner_branch_id=child_id, provider=sandbox.name, kind="sandbox", now=now)
    snapshot = point.event["data"]
    try:
        restored = sandbox.restore(snapshot, row.operation_key)
    except ResponseLost:
        try:
            found = sandbox.lookup(row.operation_key)
        except LookupUnsupported:
            found = None
            ledger.move(row, "unknown")
            store.discard_branch(child_id)
            raise LogError("resource_unknown", point.seq, "the sandbox create's outcome is unknown") from None
        if found is None:  # a final not-found: nothing was created
            ledger.move(row, "released")
            store.discard_branch(child_id)
            raise LogError("snapshot_restore_failed", point.seq, "restore did not create a sandbox") from None
        restored = found
    except LogError:
        ledger.move(row, "released")
        store.discard_branch(child_id)
        raise
    ledger.move(row, "live", ref=restored.sandbox_id)
    if canonical_hash(restored.manifest) != snapshot["manifest_hash"]:
        _release(ledger, sandbox, row, restored.sandbox_id)
        store.discard_branch(child_id)
        raise LogError("snapshot_manifest_mismatch", point.seq, "restored tree differs from the snapshot")
    if failpoint is not None:
        failpoint("before_fork_event")
    lease = store.acquire_lease(child_id, "fork:" + new_uuid7(), ttl_ms=60_000, now_ms=now)
    _, fork_line = child_lines(
        thread_id=thread_id,
        parent_branch_id=branch_id,
        point=point,
        new_branch_id=child_id,
        epoch=lease.epoch,
        now=now,
        sandbox_id=restored.sandbox_id,
        knowledge_policy=knowledge_policy,
    )
    # The fork event must pass validate_next over the resolved chain like any other line.
    import_log(_chain_through(parent, point.seq) + header.raw + b"\n" + fork_line.raw + b"\n", now=now)
    store.append(child_id, [fork_line], expected_head_seq=point.seq, epoch=lease.epoch)
    store.set_state(child_id, "ready")
    store.release(child_id, lease)
    revision = snapshot.get("knowledge_revision") if knowledge_policy == "pinned" else None
    assert fork_line.event is not None
    return ForkResult(thread_id, child_id, point.seq, fork_line.event, revision)


def _chain_through(parent: Any, at_seq: int) -> bytes:
    out: list[bytes] = []
    for seg in parent.segments:
        out.append(seg.header.raw)
        out.extend(line.raw for line in seg.lines if line.seq <= at_seq)
    return b"\n".join(out) + b"\n"


def _release(ledger: ResourceLedger, sandbox: SandboxProvider, row: Any, sandbox_id: str) -> None:
    ledger.move(row, "releasing")
    try:
        sandbox.release(sandbox_id)
    except Exception:  # noqa: BLE001 - a failed release is recorded, never hidden
        ledger.move(row, "release_failed")
        return
    ledger.move(row, "released")


def recover_fork(store: EventLog, ledger: ResourceLedger, sandbox: SandboxProvider, child_id: str) -> None:
    """A child still `forking` after a crash is never resumed: mark it `fork_failed` and
    release every ledger row it wrote."""
    record = store.head(child_id)
    if record is None or record.state != "forking":
        return
    store.set_state(child_id, "fork_failed")
    for row in ledger.rows(child_id):
        if row.state in ("pending", "live"):
            if row.ref is not None:
                _release(ledger, sandbox, row, row.ref)
            else:
                ledger.move(row, "released")
