"""The branch writer over the real store (moto): lines built, validated and fenced."""

from __future__ import annotations

from typing import Any

import pytest
from threads_aws.core.canonical import new_uuid7
from threads_aws.core.errors import LogError
from threads_aws.core.importer import import_log
from threads_aws.core.lines import StoredLine, header_line
from threads_aws.store import NewBranch
from threads_aws.writer import Draft, Writer

ALICE = {"issuer": "api", "subject": "alice", "tenant": "acme"}
STARTED = {
    "adapter": {"name": "scripted", "settings": {}, "version": "1"},
    "agent_name": "demo",
    "config_hash": "0" * 64,
    "instructions": "Be brief.",
    "model": {"name": "m", "provider": "p"},
    "model_params": {},
    "tools": [],
}


def new_thread(aws: Any, writer: Writer) -> str:
    thread_id, branch_id = new_uuid7(), new_uuid7()
    header = StoredLine.of_header(header_line(thread_id, branch_id, 1))
    writer.store.create_branch(
        NewBranch(thread_id=thread_id, tenant="acme", branch_id=branch_id, header=header, create_thread=True)
    )
    writer.append(branch_id, [Draft("thread_started", STARTED, {"kind": "host"})])
    return branch_id


def test_append_validates_and_chains(aws: Any) -> None:
    writer = Writer(aws.events(), clock=aws.clock)
    b = new_thread(aws, writer)
    user = {"kind": "user", "principal": ALICE}
    writer.append(b, [Draft("user_input", {"source": "api", "text": "hi"}, user)])
    with pytest.raises(LogError) as info:  # rule 12: a second user_input during the turn
        writer.append(b, [Draft("user_input", {"source": "api", "text": "again"}, user)])
    assert info.value.code == "invalid_transition"
    writer.append(b, [Draft("turn_completed", {"reason": "end_turn"}, {"kind": "host"})])
    imp = import_log(writer.store.export(b))
    assert imp.fold.turns_completed == 1 and imp.fold.head_seq == 3


def test_lost_race_is_seq_conflict_and_view_recovers(aws: Any) -> None:
    store = aws.events()
    w1, w2 = Writer(store, clock=aws.clock), Writer(store, clock=aws.clock)
    b = new_thread(aws, w1)
    v1, v2 = w1.load(b), w2.load(b)
    w1.append(b, [Draft("heartbeat", {"running_call_ids": []}, {"kind": "host"})], view=v1)
    with pytest.raises(LogError) as info:
        w2.append(b, [Draft("heartbeat", {"running_call_ids": []}, {"kind": "host"})], view=v2)
    assert info.value.code == "seq_conflict"
    view, lines = w2.append(b, [Draft("heartbeat", {"running_call_ids": []}, {"kind": "host"})])
    assert lines[0].seq == 3 and view.head_seq == 3


def test_stale_epoch_after_takeover(aws: Any) -> None:
    store = aws.events()
    writer = Writer(store, clock=aws.clock)
    b = new_thread(aws, writer)
    old = store.acquire_lease(b, "worker-1", ttl_ms=1000, now_ms=aws.clock())
    aws.clock.advance(5000)
    new = store.acquire_lease(b, "worker-2", ttl_ms=1000, now_ms=aws.clock())
    assert new.epoch == old.epoch + 1
    with pytest.raises(LogError) as info:
        writer.append(b, [Draft("heartbeat", {"running_call_ids": []}, {"kind": "host"})], epoch=old.epoch)
    assert info.value.code == "stale_epoch"
    _, lines = writer.append(b, [Draft("heartbeat", {"running_call_ids": []}, {"kind": "host"})])
    assert lines[0].epoch == new.epoch  # a control appends under the live lease's epoch


def test_a_branch_replaced_under_the_cache_is_read_again(aws: Any) -> None:
    """Deleted, then imported again under the same id and appended to up to the same seq: the
    cached view (same seq, another hash) is not served."""
    from helpers.engine import make_ctx, new_thread
    from threads_aws.store.deletion import ThreadDeletion
    from threads_aws.store.ingest import import_into_store

    ctx = make_ctx(aws)
    b = new_thread(ctx)
    user = {"kind": "user", "principal": {"issuer": "api", "subject": "alice", "tenant": "acme"}}
    earlier = ctx.store.export(b)
    ctx.writer.append(b, [Draft("user_input", {"source": "api", "text": "first"}, user)])
    cached = ctx.writer.load(b)  # the cache holds "first" at the head
    thread_id = cached.thread_id
    assert ThreadDeletion(ctx.stores, clock=ctx.clock).delete("acme", thread_id)
    import_into_store(
        ctx.store, ctx.artifacts, import_log(earlier, now=ctx.clock()), tenant="acme", now=ctx.clock()
    )
    other = make_ctx(aws).writer  # another container appends the same seq anew
    other.append(b, [Draft("user_input", {"source": "api", "text": "second"}, user)])
    again = ctx.writer.load(b)
    assert again.head_seq == cached.head_seq
    assert again.fold.events[-1]["data"]["text"] == "second"
