"""Thread deletion on moto (issue 17 §1; semantics.md §8 "Thread deletion"): DELETE removes the
thread, its branches and its subagent children (never a handoff target) in one transaction,
refuses `busy` while a branch is leased or has an effect in doubt, answers 204 again for the
tenant's deleted thread, and afterwards nothing of it is readable: no route, no DynamoDB item, no
S3 object by key (once the sweeper ran); retention deletes idle threads the same way."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from helpers.engine import make_ctx, new_thread, of_type, run, say
from helpers.host import ALICE, MALLORY, make_host
from threads_aws.core.canonical import new_uuid7
from threads_aws.engine.models import adapter_for
from threads_aws.host.errors import ApiError
from threads_aws.store.artifacts import ArtifactStore
from threads_aws.store.memory import INLINE_MAX
from threads_aws.store.records import wall_ms
from threads_aws.store.sweep import Sweep


def _code(fn: Any, *args: Any) -> str:
    with pytest.raises(ApiError) as exc:
        fn(*args)
    return exc.value.code


def _items(aws: Any, table: str) -> list[dict[str, Any]]:
    out, kwargs = [], {"TableName": table}
    while True:
        page = aws.ddb.scan(**kwargs)
        out.extend(page["Items"])
        if "LastEvaluatedKey" not in page:
            return out
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def naming(aws: Any, ids: set[str]) -> list[dict[str, Any]]:
    """Every item of both tables whose serialised form names one of `ids`."""
    tables = (aws.resources.events_table, aws.resources.state_table)
    return [it for t in tables for it in _items(aws, t) if any(i in json.dumps(it, default=str) for i in ids)]


def keys(aws: Any) -> set[str]:
    out = aws.s3.list_objects_v2(Bucket=aws.resources.bucket).get("Contents", [])
    return {o["Key"] for o in out}


def sweep(aws: Any, host: Any, **kw: Any) -> Any:
    from threads_aws.sweeper import sweep as run_sweep

    s = aws.services()
    store = Sweep(s.ddb, aws.resources.state_table, s.s3, aws.resources.bucket)
    return run_sweep(host.stores, store, host.sandbox, now=aws.clock(), grace_ms=0, **kw)


def _thread_with_child(aws: Any, ctx: Any, host: Any) -> tuple[str, str, str, str]:
    """A parent that spawned a demo child whose note was granted: both threads finished."""
    parent = new_thread(ctx)
    say(ctx, parent, "spawn: demo: note: buy milk")
    assert run(ctx, parent).state == "parked"
    spawned = of_type(ctx, parent, "agent_spawned")[0]
    child_tid = spawned["data"]["child_thread_id"]
    child = host.stores.threads.get_thread("acme", child_tid).main_branch_id
    assert run(ctx, child).state == "parked"
    f = ctx.writer.load(child).fold
    challenge = next(k for k, c in f.challenges.items() if not c.consumed)
    host.decide_approval(ALICE, child_tid, challenge, {"decision": "grant"})
    assert run(ctx, child).state == "idle"
    assert run(ctx, parent).state == "idle"
    return spawned["thread_id"], parent, child_tid, child


def test_delete_leaves_nothing_readable_and_is_idempotent(aws: Any) -> None:
    aws.clock.now = wall_ms()  # S3 LastModified is the real clock (the sweeper's grace)
    ctx, host = aws.services(spill_threshold=2048).engine(models=adapter_for), make_host(aws)
    tid, parent, child_tid, child = _thread_with_child(aws, ctx, host)
    say(ctx, parent, "x" * 5000)  # a line past the spill threshold: its bytes live in S3
    run(ctx, parent)
    say(ctx, parent, "write notes.txt: only in the deleted thread")  # a workspace file + snapshot
    run(ctx, parent)
    point = host.fork_points(ALICE, tid, parent)[-1]
    fork = host.fork(ALICE, tid, parent, {"event_id": point["event_id"]})
    (row,) = host.stores.resources.rows(fork["branch_id"])
    assert row.state == "live"  # the fork's workspace, in the ledger
    keep = new_thread(ctx)  # another thread: untouched throughout
    say(ctx, keep, "keep me")
    run(ctx, keep)
    say(ctx, keep, "y" * 5000)  # its spilled line: the sweeper keeps what a live branch needs
    run(ctx, keep)
    keep_tid = ctx.writer.load(keep).fold.thread_id
    before_keep = naming(aws, {keep})
    ids = {tid, child_tid, parent, child, fork["branch_id"]}
    before = keys(aws)
    assert naming(aws, ids) and before

    assert _code(host.delete_thread, MALLORY, tid) == "not_found"  # another tenant's
    assert host.delete_thread(ALICE, tid) is True
    assert host.delete_thread(ALICE, tid) is False  # 204 again: the tenant's tombstone
    assert _code(host.delete_thread, MALLORY, tid) == "not_found"
    assert _code(host.delete_thread, ALICE, new_uuid7()) == "not_found"

    for t, b in ((tid, parent), (child_tid, child), (tid, fork["branch_id"])):
        assert _code(host.thread, ALICE, t) == "not_found"
        assert _code(host.timeline, ALICE, t, b) == "not_found"
        assert _code(host.branches, ALICE, t) == "not_found"
        assert _code(host.pending_approvals, ALICE, t, b) == "not_found"
        assert _code(host.fork_points, ALICE, t, b) == "not_found"
        assert _code(host.cancel, ALICE, t, b, {}) == "not_found"
        assert _code(
            host.start_run, ALICE, {"agent": "demo", "input": "hi", "thread_id": t}, new_uuid7()
        ) == ("not_found")
    page, _ = host.threads(ALICE, 50, None)
    assert {p["thread_id"] for p in page["threads"]} == {keep_tid}

    (row,) = host.stores.resources.rows(fork["branch_id"])
    assert row.state == "releasing"  # moved in the deletion's transaction
    aws.clock.now = wall_ms() + 2_000  # every object is past the grace (LastModified: whole seconds)
    report = sweep(aws, host)
    (row,) = host.stores.resources.rows(fork["branch_id"])
    assert row.state == "released" and report.gc is not None and report.gc.released_rows == 1
    assert set(report.finished) == {tid, child_tid}
    left = naming(aws, ids)
    # the ledger row of the fork's workspace stays as an audit of its release, until its TTL
    (ledger,) = [it for it in left if it["pk"]["S"].startswith("RES#")]
    assert ledger["state"]["S"] == "released" and int(ledger["ttl"]["N"]) > aws.clock() // 1000
    left.remove(ledger)
    # otherwise only the tombstones remain, holding (thread_id, tenant, deleted_at, reason)
    assert sorted(it["pk"]["S"] for it in left) == sorted(f"TOMBSTONE#{t}" for t in (tid, child_tid))
    assert all(
        set(it) == {"pk", "sk", "kind", "thread_id", "tenant", "deleted_at", "reason", "state"} for it in left
    )
    # S3: every object of the deleted threads is gone; the other thread's are all there
    live = keys_of_thread(ctx, keep) | {f"sha256/{h}" for h in _spills(ctx, keep)}
    assert live - keys_of_thread(ctx, keep)  # its spilled lines (the input and what echoes it)
    after = keys(aws)
    assert live and live <= after and after == live
    assert before - live  # the deleted threads' requests, results, spilled line, workspace file
    assert naming(aws, {keep}) == before_keep  # the other thread's rows are byte-unchanged


def _spills(ctx: Any, branch: str) -> set[str]:
    return {
        hashlib.sha256(line).hexdigest() for line in ctx.store.export(branch).split(b"\n") if len(line) > 2048
    }


def keys_of_thread(ctx: Any, branch: str) -> set[str]:
    from threads_aws.sandbox.gc import artifact_refs

    return {
        f"sha256/{s}" for ev in ctx.writer.load(branch).fold.events for s in artifact_refs(ev.get("data"))
    }


def test_busy_while_leased_or_an_effect_is_in_doubt(aws: Any) -> None:
    from helpers.host import append, start, tool_turn

    host = make_host(aws)
    run_ = start(host)
    tid, bid = run_["thread_id"], run_["branch_id"]
    lease = host.store.acquire_lease(bid, "worker-1", ttl_ms=60_000)
    assert _code(host.delete_thread, ALICE, tid) == "busy"  # a worker holds the branch
    host.store.release_lease(bid, lease)
    tool_turn(host, bid, "c1", "note", {"text": "x"}, "allow")
    append(host, bid, ("effect_begin", {"attempt": 1, "call_id": "c1"}))
    assert _code(host.delete_thread, ALICE, tid) == "busy"  # begun, never committed: in doubt
    assert host.thread(ALICE, tid)["thread_id"] == tid  # nothing was deleted
    ref = {"bytes": 2, "media_type": "application/json", "sha256": "0" * 64}
    append(host, bid, ("effect_commit", {"call_id": "c1", "result_ref": ref}))
    aws.clock.advance(61_000)
    lease = host.store.acquire_lease(bid, "worker-2", ttl_ms=1_000)
    aws.clock.advance(2_000)  # an expired lease does not hold the thread
    assert host.delete_thread(ALICE, tid) is True
    assert _code(host.thread, ALICE, tid) == "not_found"


def test_handoff_target_survives_and_children_cascade(aws: Any) -> None:
    ctx, host = make_ctx(aws), make_host(aws)
    source = new_thread(ctx)
    say(ctx, source, "handoff: demo")
    assert run(ctx, source).state == "idle"
    target_tid = of_type(ctx, source, "handoff")[0]["data"]["to_thread_id"]
    source_tid = ctx.writer.load(source).fold.thread_id
    assert host.delete_thread(ALICE, source_tid) is True
    assert host.thread(ALICE, target_tid)["thread_id"] == target_tid  # never cascaded
    assert _code(host.thread, ALICE, source_tid) == "not_found"
    assert run(ctx, source).state == "idle"  # a wake queued before the delete finds nothing to do


def test_a_parent_whose_log_is_unreadable_still_takes_its_children(aws: Any) -> None:
    """A corrupt tail makes the parent's log unreadable; the lines before it name its child,
    which is deleted with it rather than left without a parent."""
    ctx, host = make_ctx(aws), make_host(aws)
    tid, parent, child_tid, child = _thread_with_child(aws, ctx, host)
    last = host.store.head(parent).head_seq
    aws.ddb.update_item(
        TableName=aws.resources.events_table,
        Key={"branch_id": {"S": parent}, "seq": {"N": str(last)}},
        UpdateExpression="SET #l = :b",
        ExpressionAttributeNames={"#l": "line"},
        ExpressionAttributeValues={":b": {"B": b"{not json"}},
    )
    assert host.delete_thread(ALICE, tid) is True
    for t in (tid, child_tid):
        assert _code(host.thread, ALICE, t) == "not_found"


def test_oversize_cascade_is_fenced_then_purged(aws: Any) -> None:
    """More items than one transaction holds (here a limit of 6): the branches' leases fence the
    thread, one write holds the tombstones with the META deletes, the purge does the rest."""
    from threads_aws.store.deletion import ThreadDeletion

    ctx, host = make_ctx(aws), make_host(aws)
    tid, parent, child_tid, child = _thread_with_child(aws, ctx, host)
    deletion = ThreadDeletion(host.stores, clock=aws.clock, max_items=6)
    other = host.store.acquire_lease(child, "worker-1", ttl_ms=60_000)
    with pytest.raises(Exception) as busy:
        deletion.delete("acme", tid)
    assert getattr(busy.value, "code", None) == "busy"
    assert host.store.head(parent).lease_holder is None  # the fence it took was given back
    host.store.release_lease(child, other)
    assert deletion.delete("acme", tid) is True
    for t in (tid, child_tid):
        assert _code(host.thread, ALICE, t) == "not_found"
    left = naming(aws, {parent, child})  # heads, lines, side rows: purged; the tombstones
    assert {it["pk"]["S"] for it in left} == {f"TOMBSTONE#{tid}", f"TOMBSTONE#{child_tid}"}  # name them
    assert {s.thread_id for s in host.stores.tombstones.purging()} == {tid, child_tid}


def test_http_delete_answers_204_twice_and_404_for_others(aws: Any, monkeypatch: Any) -> None:
    from test_host_handlers import CONTEXT, load_handler, sample
    from threads_aws.host import runtime

    for k, v in aws.resources.env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "1")
    runtime.reset()
    out = load_handler("start_run")(sample("start_run"), CONTEXT)
    tid = json.loads(out["body"])["thread_id"]
    ev = sample("delete_thread")
    ev["pathParameters"] = {"thread_id": tid}
    handler = load_handler("delete_thread")
    assert [handler(ev, CONTEXT)["statusCode"] for _ in range(2)] == [204, 204]
    get = sample("get_thread")
    get["pathParameters"] = {"thread_id": tid}
    out = load_handler("get_thread")(get, CONTEXT)
    assert out["statusCode"] == 404 and json.loads(out["body"])["error"]["code"] == "not_found"
    ev["requestContext"]["authorizer"] = {**ev["requestContext"]["authorizer"], "tenant": "evil"}
    out = handler(ev, CONTEXT)
    assert out["statusCode"] == 404 and json.loads(out["body"])["error"]["code"] == "not_found"
    runtime.reset()


def test_retention_deletes_an_idle_thread(aws: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("THREAD_RETENTION_DAYS", "1")
    ctx, host = make_ctx(aws), make_host(aws)
    old = new_thread(ctx)
    say(ctx, old, "hello")
    run(ctx, old)
    old_tid = ctx.writer.load(old).fold.thread_id
    meta = aws.ddb.get_item(
        TableName=aws.resources.state_table, Key={"pk": {"S": f"THREAD#{old_tid}"}, "sk": {"S": "META"}}
    )
    assert int(meta["Item"]["retain_until"]["N"]) == (aws.clock() + 86_400_000) // 1000
    assert "ttl" not in meta["Item"]  # DynamoDB's TTL never deletes a thread behind `busy`
    aws.clock.advance(86_400_000 - 60_000)
    fresh = new_thread(ctx)
    say(ctx, fresh, "hello")
    run(ctx, fresh)
    fresh_tid = ctx.writer.load(fresh).fold.thread_id
    aws.clock.advance(120_000)
    report = sweep(aws, host)
    assert report.expired == [old_tid] and old_tid in report.finished
    assert _code(host.thread, ALICE, old_tid) == "not_found"
    assert host.thread(ALICE, fresh_tid)["thread_id"] == fresh_tid
    # branches left without their thread row (lost by hand): purged, but never under a worker
    aws.ddb.delete_item(
        TableName=aws.resources.state_table, Key={"pk": {"S": f"THREAD#{fresh_tid}"}, "sk": {"S": "META"}}
    )
    lease = host.store.acquire_lease(fresh, "worker-1", ttl_ms=60_000)
    report = sweep(aws, host)
    assert report.expired == [] and report.busy == [fresh_tid] and naming(aws, {fresh}) != []
    host.store.release_lease(fresh, lease)
    report = sweep(aws, host)
    assert report.expired == [fresh_tid] and naming(aws, {fresh}) == []


def test_retention_waits_for_a_thread_with_an_effect_in_doubt(aws: Any, monkeypatch: Any) -> None:
    from helpers.host import append, start, tool_turn

    monkeypatch.setenv("THREAD_RETENTION_DAYS", "1")
    host = make_host(aws)
    run_ = start(host)
    tid, bid = run_["thread_id"], run_["branch_id"]
    tool_turn(host, bid, "c1", "note", {"text": "x"}, "allow")
    append(host, bid, ("effect_begin", {"attempt": 1, "call_id": "c1"}))  # never committed
    aws.clock.advance(3 * 86_400_000)  # days past its retention
    report = sweep(aws, host)
    assert report.expired == [] and report.busy == [tid]
    assert host.thread(ALICE, tid)["thread_id"] == tid  # kept whole until the effect is settled
    ref = {"bytes": 2, "media_type": "application/json", "sha256": "0" * 64}
    append(host, bid, ("effect_commit", {"call_id": "c1", "result_ref": ref}))
    report = sweep(aws, host)
    assert tid in report.expired and _code(host.thread, ALICE, tid) == "not_found"


def test_delete_removes_the_memory_its_thread_wrote_and_the_sweeper_keeps_the_rest(aws: Any) -> None:
    aws.clock.now = wall_ms()
    ctx, host = aws.services().engine(models=adapter_for), make_host(aws)
    gone, kept = new_thread(ctx), new_thread(ctx)
    say(ctx, gone, "remember old: " + "a " * INLINE_MAX)  # a value held in S3
    run(ctx, gone)
    say(ctx, kept, "remember essay: " + "b " * INLINE_MAX)  # named by its row only, no log
    run(ctx, kept)
    rows = {it["sk"]["S"]: it for it in memory_rows(aws)}
    assert set(rows) == {"old", "essay"}
    objects = {k: ArtifactStore.key(rows[k]["ref_sha256"]["S"]) for k in rows}
    assert {objects["old"], objects["essay"]} <= keys(aws)
    tid = ctx.writer.load(gone).fold.thread_id
    assert host.delete_thread(ALICE, tid) is True
    assert [it["sk"]["S"] for it in memory_rows(aws)] == ["essay"]
    aws.clock.now = wall_ms() + 2_000
    sweep(aws, host)
    assert objects["essay"] in keys(aws) and objects["old"] not in keys(aws)


def memory_rows(aws: Any) -> list[dict[str, Any]]:
    return [it for it in _items(aws, aws.resources.state_table) if it["pk"]["S"].startswith("MEMORY#")]
