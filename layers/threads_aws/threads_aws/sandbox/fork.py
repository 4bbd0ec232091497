"""The fork procedure (semantics.md §6) over the store, the resources ledger and a sandbox
provider: child `forking` → pending ledger row → restore + manifest check → header and `fork`
event → `ready`. Any failure leaves no child and releases what it wrote; a create whose outcome
cannot be established stays `unknown` for an operator (`resource_unknown`). A crash mid-fork is
never resumed: `recover_fork` marks the child `fork_failed` and releases its rows.

A `mode: stub` fork (`fork_stub`, semantics.md §6 "stub mode") restores no sandbox and writes no
ledger row (nothing is created): it records the parent's external operations after the fork point
as the child's stubs (`sandbox.stubs`), then creates the child `forking` naming them, appends the
header and `fork` event (`sandbox_id: stub`) and makes it `ready`. A crash between is recovered
the same way (`fork_failed`; there are no rows to release)."""

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
    parent, point, child_id, header = _begin(
        store,
        tenant=tenant,
        branch_id=branch_id,
        event_id=event_id,
        new_branch_id=new_branch_id,
        knowledge_policy=knowledge_policy,
        now=now,
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
    return _finish(store, parent, point, child_id, header, restored.sandbox_id, knowledge_policy, now)


def fork_stub(
    store: EventLog,
    artifacts: Any,
    *,
    tenant: str,
    branch_id: str,
    event_id: str,
    new_branch_id: str | None = None,
    knowledge_policy: str = "pinned",
    now: int,
    failpoint: Callable[[str], None] | None = None,
) -> ForkResult:
    """A stub-mode child (module docstring): no restore, no ledger row, recorded stubs."""
    from . import stubs

    parent = import_log(store.export(branch_id), now=now)
    point = fork_point(parent.fold, _hashes(parent), event_id, now)  # typed errors before any write
    stubs_sha = stubs.store_recordings(stubs.recordings(parent.fold, point.seq, artifacts), artifacts)
    parent, point, child_id, header = _begin(
        store,
        tenant=tenant,
        branch_id=branch_id,
        event_id=event_id,
        new_branch_id=new_branch_id,
        knowledge_policy=knowledge_policy,
        now=now,
        parent=parent,
        stubs_sha256=stubs_sha,
    )
    if failpoint is not None:
        failpoint("before_fork_event")
    return _finish(store, parent, point, child_id, header, stubs.STUB_SANDBOX_ID, knowledge_policy, now)


def header_thread(parent: Any) -> str:
    thread_id = parent.fold.thread_id
    assert thread_id is not None
    return str(thread_id)


def _hashes(parent: Any) -> dict[int, str]:
    return {line.seq: line.hash for seg in parent.segments for line in seg.lines}


def _begin(
    store: EventLog,
    *,
    tenant: str,
    branch_id: str,
    event_id: str,
    new_branch_id: str | None,
    knowledge_policy: str,
    now: int,
    parent: Any = None,
    stubs_sha256: str | None = None,
) -> tuple[Any, Any, str, Any]:
    """Step 1: the fork point (typed errors first), then the child branch in state `forking`."""
    if parent is None:
        parent = import_log(store.export(branch_id), now=now)
    fold = parent.fold
    point = fork_point(fold, _hashes(parent), event_id, now)
    thread_id = header_thread(parent)
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
            stubs_sha256=stubs_sha256,
        )
    )
    return parent, point, child_id, header


def _finish(
    store: EventLog,
    parent: Any,
    point: Any,
    child_id: str,
    header: Any,
    sandbox_id: str,
    knowledge_policy: str,
    now: int,
) -> ForkResult:
    """Step 4: the `fork` event under the child's first lease, then `ready`."""
    thread_id = header_thread(parent)
    branch_id = str(parent.fold.branch_id)
    lease = store.acquire_lease(child_id, "fork:" + new_uuid7(), ttl_ms=60_000, now_ms=now)
    _, fork_line = child_lines(
        thread_id=thread_id,
        parent_branch_id=branch_id,
        point=point,
        new_branch_id=child_id,
        epoch=lease.epoch,
        now=now,
        sandbox_id=sandbox_id,
        knowledge_policy=knowledge_policy,
    )
    # The fork event must pass validate_next over the resolved chain like any other line.
    import_log(_chain_through(parent, point.seq) + header.raw + b"\n" + fork_line.raw + b"\n", now=now)
    store.append(child_id, [fork_line], expected_head_seq=point.seq, epoch=lease.epoch)
    store.set_state(child_id, "ready")
    store.release(child_id, lease)
    snapshot = point.event["data"]
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
