"""Subagent isolation (semantics §8 "Subagents": `agent_spawned.isolation`): which workspace a
child works in, and what of its work comes back to the parent.

A workspace is a manifest hash in the log (`sandbox.workspace`), so every value is a matter of
which manifest the child starts from and which one the parent holds after `agent_finished`:

- `none`: the child has its own empty workspace; nothing is shared either way.
- `forked_sandbox`: a copy-on-write copy of the parent's workspace as of its `agent_spawned`
  (copying is copying the hash): the child's line starts with a `snapshot` of it (after
  `thread_started`, before its task), so its fold's workspace is that manifest and its writes
  make new manifests of its own. Nothing reaches the parent.
- `worktree`: the same copy, and at `agent_finished` the child's changes (its final manifest
  against the copy it started from) are offered back as git worktrees are: listed in the
  output, and merged into the parent's workspace when the child completed and no path it changed
  was also changed by the parent since the spawn (a background parent goes on writing). A
  conflict, or a child that did not complete, merges nothing and says which paths; the child's
  workspace stays readable in its own thread.
- `shared_sandbox`: the child works in the parent's workspace. It starts from the parent's
  workspace and its writes are the parent's: at `agent_finished` the parent's workspace becomes
  the child's writes applied over it, whatever the child's status (the writes happened). For a
  foreground child that is exactly one workspace written by both, since the parent does nothing
  while it waits; a background child's writes land in the parent at its end, over whatever the
  parent wrote meanwhile (a path both wrote takes the child's, the later write).

The parent records its new workspace with a `snapshot` of its sandbox appended with
`agent_finished` (a snapshot captures the sandbox state before it, and the shared sandbox now
holds the child's files). Appended inside an open turn it is not a fork point; the turn's end
then captures one (`engine.snapshots`). Every manifest here is a pure function of the logs
(the base, the child's final workspace, the parent's), so a step that dies before its append
recomputes the same one.
"""

from __future__ import annotations

from typing import Any

from ..core.fold import Fold
from ..core.manifest import ISOLATIONS, Entry, Manifest, WorkspaceError, manifest_of_receipt
from ..sandbox.provider import S3WorkspaceProvider
from ..writer import Draft
from .loop import HOST
from .snapshots import retention_ms

__all__ = ["ISOLATIONS", "base_snapshot", "write_back"]
COPIES = frozenset({"shared_sandbox", "worktree", "forked_sandbox"})  # start from the parent's
WRITES_BACK = frozenset({"shared_sandbox", "worktree"})

Changes = dict[str, Entry | None]  # path -> its new entry, or None: deleted


def workspace_at(f: Fold, seq: int) -> str | None:
    """The branch's workspace manifest as of `seq` (the fold's rule: the latest workspace
    write's receipt or snapshot at or before it)."""
    for ev in reversed(f.events[:seq]):
        if ev["type"] == "snapshot":
            return str(ev["data"]["manifest_hash"])
        if ev["type"] == "effect_commit":
            m = manifest_of_receipt(ev["data"].get("provider_receipt"))
            if m is not None:
                return m
    return None


def base_snapshot(
    provider: S3WorkspaceProvider, parent: Fold, spawned: dict[str, Any], child_branch_id: str, now: int
) -> Draft | None:
    """The child's first `snapshot`: its sandbox restored from the parent's workspace at the spawn
    (None: `none`, or the parent had no workspace). The manifest is read (verified) first, so a
    missing one fails typed (`snapshot_missing`) rather than starting the child without it."""
    if spawned["data"].get("isolation", "none") not in COPIES:
        return None
    manifest = workspace_at(parent, parent.seq_of[spawned["event_id"]])
    if manifest is None:
        return None
    provider.workspace.manifest(manifest)
    data = provider.snapshot_data(child_branch_id, manifest, now=now, retention_ms=retention_ms())
    return Draft("snapshot", data, HOST)


def child_base(cf: Fold) -> str | None:
    """The manifest an isolated child started from: its line's snapshot before its task."""
    for ev in cf.events:
        if ev["type"] == "snapshot":
            return str(ev["data"]["manifest_hash"])
        if ev["type"] == "user_input":
            return None
    return None


def diff(old: Manifest, new: Manifest) -> Changes:
    out: Changes = {}
    for p in sorted(set(old.paths()) | set(new.paths())):
        if old.get(p) != new.get(p):
            out[p] = new.get(p)
    return out


def apply(m: Manifest, changes: Changes) -> Manifest:
    for path in [p for p, e in changes.items() if e is None]:  # deletions first: a file may become a dir
        m = m.without(path)
    for e in changes.values():
        if e is not None:
            m = m.with_file(e.path, e.sha256, e.size, e.mode)
    return m


def listing(old: Manifest, changes: Changes) -> str:
    words = []
    for p, e in changes.items():
        words.append(f"{p} ({'deleted' if e is None else 'modified' if old.get(p) else 'added'})")
    return ", ".join(words)


def write_back(
    provider: S3WorkspaceProvider, view: Any, child: Any, isolation: str, status: str, now: int
) -> tuple[Draft | None, str]:
    """(the parent's `snapshot` of its new workspace or None, the note for the child's output)
    for a child that ended."""
    if isolation not in WRITES_BACK:
        return None, ""
    ws = provider.workspace
    base = ws.manifest(child_base(child.fold))
    theirs = ws.manifest(child.fold.workspace)
    changes = diff(base, theirs)
    if not changes:
        return None, f"\n\n[{isolation}: no files changed]"
    ours = ws.manifest(view.fold.workspace)
    files = listing(base, changes)
    if isolation == "worktree":
        if status != "completed":
            return None, f"\n\n[worktree: not merged (the child {status}); its changes: {files}]"
        mine = diff(base, ours)
        clash = [p for p, e in changes.items() if p in mine and mine[p] != e]
        if clash:
            return None, (
                f"\n\n[worktree: not merged, changed here too: {', '.join(clash)}; its changes: {files}]"
            )
    try:
        merged = apply(ours, changes)
    except WorkspaceError as exc:  # e.g. the child's file where the parent made a directory
        return None, f"\n\n[{isolation}: not applied ({exc}); its changes: {files}]"
    note = (
        f"\n\n[worktree: merged into your workspace: {files}]"
        if isolation == "worktree"
        else f"\n\n[shared_sandbox: the child changed {files}]"
    )
    if merged.hash == ours.hash:
        return None, note
    ws.commit(merged)  # the manifest object first: the snapshot is appended only once durable
    if not provider.capture(merged.hash):
        raise RuntimeError(f"manifest {merged.hash} not readable after its put")
    data = provider.snapshot_data(view.branch_id, merged.hash, now=now, retention_ms=retention_ms())
    return Draft("snapshot", data, HOST), note
