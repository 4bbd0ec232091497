"""The S3 workspace: manifests, the file tools through the run-step worker (demo model), the
exactly-once write across a crash between effect_begin and effect_commit, snapshots at turn
ends, and forks through the host with the S3 workspace provider (child and parent independent,
typed errors for missing / mismatching / expired snapshots)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers.engine import Crash, make_ctx, new_thread, of_type, run, say, types, verify_export
from helpers.host import ALICE, make_host
from threads_aws.core.canonical import canonical_bytes, canonical_hash, sha256_hex
from threads_aws.core.errors import LogError
from threads_aws.core.manifest import MAX_FILE_BYTES, Manifest, WorkspaceError, normalize_path
from threads_aws.engine import file_tools
from threads_aws.engine.tools import ToolContext, ToolOutput
from threads_aws.sandbox.workspace import Workspace


# ------------------------------------------------------------------ manifests, paths
@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ("../etc/passwd", "path_outside_workspace"),
        ("a/../../b", "path_outside_workspace"),
        ("/etc/passwd", "path_outside_workspace"),
        ("C:/x", "path_outside_workspace"),
        ("~/x", "path_outside_workspace"),
        ("a\\b", "path_invalid"),
        ("a\x00b", "path_invalid"),
        ("", "path_invalid"),
        (".", "path_invalid"),
        ("x" * 300, "path_invalid"),
        (7, "path_invalid"),
    ],
)
def test_paths_outside_or_malformed_are_typed(raw: Any, code: str) -> None:
    with pytest.raises(WorkspaceError) as exc:
        normalize_path(raw)
    assert exc.value.code == code


def test_paths_normalise() -> None:
    assert normalize_path("./a//b/./c.txt") == "a/b/c.txt"
    assert normalize_path("/workspace/notes.txt") == "notes.txt"
    assert normalize_path(" notes.txt ") == "notes.txt"


def test_manifest_order_is_utf16_and_hash_is_its_artifact_key() -> None:
    # U+FFFF sorts after U+1F600 in UTF-16 code units (surrogates D83D..) but before it by code point
    m = (
        Manifest()
        .with_file("\uffff", "a" * 64, 1)
        .with_file("\U0001f600", "b" * 64, 2)
        .with_file("B", "c" * 64, 3)
    )
    assert [e.path for e in m.entries()] == ["B", "\U0001f600", "\uffff"]
    assert m.hash == canonical_hash(m.as_json()) == sha256_hex(canonical_bytes(m.as_json()))
    assert m.to_bytes() == canonical_bytes(m.as_json())
    assert m.as_json()[0] == {"mode": 0o644, "path": "B", "sha256": "c" * 64, "size": 3}


def test_manifest_limits_and_conflicts() -> None:
    m = Manifest().with_file("a/b.txt", "a" * 64, 1)
    for path in ("a", "a/b.txt/c"):
        with pytest.raises(WorkspaceError) as exc:
            m.with_file(path, "b" * 64, 1)
        assert exc.value.code == "path_conflict"
    with pytest.raises(WorkspaceError) as exc:
        m.with_file("big", "b" * 64, MAX_FILE_BYTES + 1)
    assert exc.value.code == "file_too_large"


def test_workspace_store_once_and_verify(aws: Any) -> None:
    artifacts = aws.services().stores.artifacts
    ws = Workspace(artifacts)
    m1 = ws.write(ws.manifest(None), "x.txt", b"hello")
    m2 = Workspace(artifacts).write(Workspace(artifacts).manifest(None), "x.txt", b"hello")
    assert m1.hash == m2.hash  # a pure function of (base, input)
    assert Workspace(artifacts).manifest(m1.hash).as_json() == m1.as_json()
    assert ws.read(m1, "x.txt") == b"hello"
    with pytest.raises(LogError) as exc:
        Workspace(artifacts).manifest("f" * 64)
    assert exc.value.code == "snapshot_missing"
    bad = canonical_bytes(
        list(reversed(m1.as_json())) + [{"mode": 1, "path": "y", "sha256": "0" * 64, "size": 0}]
    )
    sha = artifacts.put(bad, "application/json")["sha256"]
    artifacts.seed(sha, b"not the manifest")
    with pytest.raises(LogError) as exc:
        Workspace(artifacts).manifest(sha)
    assert exc.value.code == "snapshot_manifest_mismatch"


# ------------------------------------------------------------------ the tools through the worker
def results(ctx: Any, b: str) -> list[dict[str, Any]]:
    return [e["data"] for e in of_type(ctx, b, "tool_result")]


def test_demo_write_read_ls_and_snapshot_at_turn_end(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    say(ctx, b, "write notes.txt: hello world")
    assert run(ctx, b).state == "idle"
    t = types(ctx, b)
    assert t[-3:] == ["model_response", "turn_completed", "snapshot"]
    assert "effect_begin" in t and "effect_commit" in t
    commit = of_type(ctx, b, "effect_commit")[0]["data"]
    snap = of_type(ctx, b, "snapshot")[0]["data"]
    assert commit["provider_receipt"] == "workspace:" + snap["manifest_hash"]
    assert snap["provider"] == "s3_workspace" and snap["capture_class"] == "filesystem"
    assert snap["expires_at"] == aws.clock() + 7 * 86_400_000
    assert snap["quiesced"] == {"excluded": [], "frozen": [], "stopped": []}
    manifest = json.loads(ctx.artifacts.get(snap["manifest_hash"]))
    assert manifest == [{"mode": 420, "path": "notes.txt", "sha256": sha256_hex(b"hello world"), "size": 11}]
    fold = ctx.writer.load(b).fold
    assert [p["seq"] for p in fold.fork_points()] == [len(t)]

    say(ctx, b, "read notes.txt")
    run(ctx, b)
    assert results(ctx, b)[-1]["preview"] == "hello world"
    say(ctx, b, "ls")
    run(ctx, b)
    assert results(ctx, b)[-1]["preview"] == "notes.txt\t11"
    assert len(of_type(ctx, b, "snapshot")) == 1  # reads change nothing: no new snapshot
    verify_export(ctx, b)


def call(ctx: Any, b: str, name: str, args: dict[str, Any]) -> ToolOutput:
    """Run a file tool's executor directly against the branch's current workspace."""
    rec = ctx.writer.load(b)
    tc = ToolContext("acme", rec.thread_id, b, "c1", f"{b}:c1", 1, ctx.clock, ctx.stores, rec.fold.workspace)
    return file_tools.FILE_EXECUTORS[name](args, tc)


def test_typed_errors_are_error_results(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    say(ctx, b, "write ../escape.txt: no")
    run(ctx, b)
    r = results(ctx, b)[-1]
    assert r["is_error"] and r["preview"].startswith("path_outside_workspace:")
    assert of_type(ctx, b, "snapshot") == []  # nothing changed
    say(ctx, b, "read missing.txt")
    run(ctx, b)
    assert results(ctx, b)[-1]["preview"].startswith("file_not_found:")

    big = call(ctx, b, "write_file", {"path": "big.bin", "content": "x" * (MAX_FILE_BYTES + 1)})
    assert big.is_error and big.text.startswith("file_too_large:") and big.receipt is None
    say(ctx, b, "write a.txt: one two one")
    run(ctx, b)
    assert call(
        ctx, b, "edit_file", {"path": "a.txt", "old_string": "three", "new_string": "3"}
    ).text.startswith("edit_no_match:")
    assert call(
        ctx, b, "edit_file", {"path": "a.txt", "old_string": "one", "new_string": "1"}
    ).text.startswith("edit_not_unique:")
    out = call(ctx, b, "edit_file", {"path": "a.txt", "old_string": "two", "new_string": "2"})
    assert not out.is_error and out.receipt is not None
    assert call(ctx, b, "write_file", {"path": "a.txt/b", "content": ""}).text.startswith("path_conflict:")
    assert call(ctx, b, "grep", {"pattern": "("}).text.startswith("pattern_invalid:")


def test_glob_grep_list(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    for text in ("write src/a.py: import os", "write src/pkg/b.py: x = 1\nimport re", "write README.md: hi"):
        say(ctx, b, text)
        run(ctx, b)
    assert call(ctx, b, "glob", {"pattern": "**/*.py"}).text == "src/a.py\nsrc/pkg/b.py"
    assert call(ctx, b, "glob", {"pattern": "src/*.py"}).text == "src/a.py"
    assert (
        call(ctx, b, "grep", {"pattern": "^import"}).text == "src/a.py:1:import os\nsrc/pkg/b.py:2:import re"
    )
    assert (
        call(ctx, b, "grep", {"pattern": "HI", "ignore_case": True, "glob": "*.md"}).text == "README.md:1:hi"
    )
    assert call(ctx, b, "list_files", {"path": "src"}).text == "src/a.py\t9\nsrc/pkg/b.py\t15"
    assert call(ctx, b, "read_file", {"path": "src/pkg/b.py", "offset": 1, "limit": 1}).text == "import re"
    assert len(of_type(ctx, b, "snapshot")) == 3  # one per turn that changed the workspace


def test_crash_between_begin_and_commit_writes_once(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    say(ctx, b, "write notes.txt: first")
    run(ctx, b)
    base = ctx.writer.load(b).fold.workspace
    say(ctx, b, "write notes.txt: second")
    stored: list[str] = []

    def write_then_crash(args: dict[str, Any], tc: ToolContext) -> ToolOutput:
        out = file_tools.run_write_file(args, tc)  # the bytes and the manifest are stored ...
        assert out.receipt is not None
        stored.append(out.receipt)
        raise Crash  # ... and the worker dies before effect_commit

    ctx.tools["write_file"] = write_then_crash
    with pytest.raises(Crash):
        run(ctx, b)
    assert types(ctx, b)[-1] == "effect_begin"
    assert ctx.writer.load(b).fold.workspace == base  # nothing uncommitted is visible

    aws.clock.advance(120_000)  # the dead worker's lease lapses
    fresh = make_ctx(aws)
    assert run(fresh, b, holder="worker-2").state == "idle"
    t = types(fresh, b)
    tail = t[t.index("effect_begin", t.index("snapshot")) :]
    assert tail[:6] == [
        "effect_begin",
        "effect_unknown",
        "effect_resolved",
        "effect_begin",
        "effect_commit",
        "tool_result",
    ]
    resolved = of_type(fresh, b, "effect_resolved")[0]["data"]
    assert resolved["outcome"] == "safe_to_retry" and resolved["by"] == "provider_dedup"
    commits = of_type(fresh, b, "effect_commit")
    assert len(commits) == 2  # one per write call: the crashed attempt committed nothing
    assert commits[-1]["data"]["provider_receipt"] == stored[0]  # the re-dispatch reproduced it
    f = fresh.writer.load(b).fold
    manifest = json.loads(fresh.artifacts.get(f.workspace))
    assert manifest == [{"mode": 420, "path": "notes.txt", "sha256": sha256_hex(b"second"), "size": 6}]
    assert of_type(fresh, b, "snapshot")[-1]["data"]["manifest_hash"] == f.workspace
    verify_export(fresh, b)


# ------------------------------------------------------------------ forks through the host
def test_fork_child_and_parent_are_independent(aws: Any) -> None:
    host = make_host(aws)
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    say(ctx, b, "write notes.txt: original")
    run(ctx, b)
    tid = ctx.writer.load(b).thread_id
    (point,) = host.fork_points(ALICE, tid, b)
    assert point["snapshot"]["provider"] == "s3_workspace"
    assert host.timeline(ALICE, tid, b)["entries"][-1]["fork_point"] is True
    child = host.fork(ALICE, tid, b, {"event_id": point["event_id"]})
    c = child["branch_id"]
    rows = [(r.kind, r.state, r.provider) for r in host.stores.resources.rows(c)]
    assert rows == [("sandbox", "live", "s3_workspace")]
    fork_ev = ctx.writer.load(c).fold.events[point["seq"]]
    assert fork_ev["type"] == "fork" and fork_ev["data"]["knowledge_policy"] == "pinned"

    say(ctx, c, "read notes.txt")
    run(ctx, c)
    assert results(ctx, c)[-1]["preview"] == "original"
    say(ctx, c, "write notes.txt: changed in the child")
    run(ctx, c)
    say(ctx, c, "read notes.txt")
    run(ctx, c)
    assert results(ctx, c)[-1]["preview"] == "changed in the child"
    say(ctx, b, "read notes.txt")
    run(ctx, b)
    assert results(ctx, b)[-1]["preview"] == "original"
    say(ctx, b, "write other.txt: parent only")
    run(ctx, b)
    assert call(ctx, c, "list_files", {}).text == "notes.txt\t20"
    assert len(host.fork_points(ALICE, tid, c)) == 2  # the inherited one and the child's own
    verify_export(ctx, b)
    verify_export(ctx, c)


def _snapshot_of(aws: Any) -> tuple[Any, Any, str, str, dict[str, Any]]:
    host = make_host(aws)
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    say(ctx, b, "write notes.txt: x")
    run(ctx, b)
    (point,) = host.fork_points(ALICE, ctx.writer.load(b).thread_id, b)
    return host, ctx, b, ctx.writer.load(b).thread_id, point


def _code(fn: Any, *a: Any) -> str:
    with pytest.raises(Exception) as exc:  # noqa: PT011 - ApiError or LogError, both typed
        fn(*a)
    return str(exc.value.code)  # type: ignore[attr-defined]


def test_fork_typed_errors(aws: Any) -> None:
    host, ctx, b, tid, point = _snapshot_of(aws)
    assert (
        _code(host.fork, ALICE, tid, b, {"event_id": "0192e000-0000-7000-8000-0000000000ff"})
        == "no_snapshot_boundary"
    )
    artifacts = ctx.artifacts
    manifest_hash = point["snapshot"]["manifest_hash"]
    good = artifacts.get(manifest_hash)
    artifacts.seed(manifest_hash, good.replace(b"notes", b"nodes"))
    assert _code(host.fork, ALICE, tid, b, {"event_id": point["event_id"]}) == "snapshot_manifest_mismatch"
    artifacts.s3.delete_object(Bucket=artifacts.bucket, Key=artifacts.key(manifest_hash))
    assert _code(host.fork, ALICE, tid, b, {"event_id": point["event_id"]}) == "snapshot_missing"
    assert [len(host.stores.resources.rows(x.branch_id)) for x in host.index.list_branches("acme", tid)] == [
        0
    ]
    # The restore reads only the manifest (it pins every file by sha256 and size; GC keeps an
    # unexpired snapshot's files): a file object deleted out of band is found, typed, on read.
    artifacts.seed(manifest_hash, good)
    blob = json.loads(good)[0]["sha256"]
    artifacts.s3.delete_object(Bucket=artifacts.bucket, Key=artifacts.key(blob))
    c = host.fork(ALICE, tid, b, {"event_id": point["event_id"]})["branch_id"]
    assert call(ctx, c, "read_file", {"path": "notes.txt"}).text.startswith("artifact_missing:")
    artifacts.seed(blob, b"y")  # altered bytes under the key: the read refuses them
    assert call(ctx, c, "read_file", {"path": "notes.txt"}).text.startswith("artifact_corrupt:")
    assert call(ctx, c, "grep", {"pattern": "x"}).text.startswith("artifact_corrupt:")
    aws.clock.advance(8 * 86_400_000)
    assert _code(host.fork, ALICE, tid, b, {"event_id": point["event_id"]}) == "snapshot_expired"
    assert host.fork_points(ALICE, tid, b) == []


# ------------------------------------------------------------------ retention and gc
def test_gc_keeps_what_live_logs_reference_and_follows_expiry(aws: Any) -> None:
    from threads_aws.sandbox.gc import collect
    from threads_aws.store.records import wall_ms
    from threads_aws.store.sweep import Sweep

    aws.clock.now = wall_ms()  # objects' LastModified is the real clock
    host, ctx, b, tid, first = _snapshot_of(aws)  # notes.txt = "x", snapshot S1
    m1 = first["snapshot"]["manifest_hash"]
    child = host.fork(ALICE, tid, b, {"event_id": first["event_id"]})["branch_id"]
    say(ctx, b, "write notes.txt: y")
    run(ctx, b)
    m2 = ctx.writer.load(b).fold.workspace
    orphan = ctx.artifacts.put(b"never referenced", "text/plain")["sha256"]
    ledger = host.stores.resources
    gone = ledger.open(
        tenant="acme", owner_branch_id="no-such-branch", provider="s3_workspace", kind="sandbox", now=0
    )
    ledger.move(gone, "live", ref="workspace:op")
    s = aws.services()
    sweep = Sweep(s.ddb, aws.resources.state_table, s.s3, aws.resources.bucket)

    def gc(**kw: Any) -> Any:
        return collect(ctx.store, ctx.artifacts, ledger, sweep, host.sandbox, now=aws.clock(), **kw)

    first_pass = gc()
    assert first_pass.deleted == [] and first_pass.kept_young >= 1  # all younger than the grace
    assert first_pass.released_rows == 1 and [r.state for r in ledger.rows("no-such-branch")] == ["released"]
    aws.clock.now = wall_ms() + 2_000  # LastModified has whole seconds
    dry = gc(grace_ms=0, dry_run=True)
    assert dry.deleted == [orphan] and ctx.artifacts.exists(orphan)
    report = gc(grace_ms=0)
    assert report.deleted == [orphan] and not ctx.artifacts.exists(orphan)
    assert report.released_rows == 0  # the row was released once; a later sweep leaves it
    blob_x, blob_y = sha256_hex(b"x"), sha256_hex(b"y")

    aws.clock.advance(8 * 86_400_000)  # both snapshots expired
    gc(grace_ms=0)
    # M1 is still the child's current workspace (it never wrote), M2 the parent's
    for sha in (m1, m2, blob_x, blob_y):
        assert ctx.artifacts.exists(sha), sha
    say(ctx, child, "write notes.txt: z")
    run(ctx, child)
    aws.clock.advance(8 * 86_400_000)
    report = gc(grace_ms=0)
    assert m1 in report.deleted and blob_x in report.deleted  # referenced by nothing live now
    assert ctx.artifacts.exists(m2) and ctx.artifacts.exists(blob_y)
    verify_export(ctx, b)  # every request and result artifact survived
    verify_export(ctx, child)
    say(ctx, b, "read notes.txt")
    run(ctx, b)
    assert results(ctx, b)[-1]["preview"] == "y"


def test_retention_setting() -> None:
    from threads_aws.engine.snapshots import retention_ms

    assert retention_ms({}) == 7 * 86_400_000
    assert retention_ms({"SNAPSHOT_RETENTION_MS": "60000"}) == 60_000
    assert retention_ms({"SNAPSHOT_RETENTION_MS": "0"}) is None  # expires_at: null
