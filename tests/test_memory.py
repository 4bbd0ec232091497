"""The memory tools (remember / recall / forget) on the demo agent: per principal scope, per
tenant, effects recorded like the other built-in tools (exactly once across a crash), recalled
memory rendered as untrusted references and hidden from another principal, and the deletions
(scope, thread, tenant) that thread and tenant deletion call."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.engine import (
    USER,
    Crash,
    CrashingWriter,
    events,
    make_ctx,
    new_thread,
    of_type,
    run,
    say,
    types,
    verify_export,
)
from threads_aws.agents import load_agents
from threads_aws.core.canonical import new_uuid7
from threads_aws.core.lines import StoredLine, header_line
from threads_aws.engine.memory_tools import run_forget, run_recall, run_remember
from threads_aws.engine.step import EngineContext
from threads_aws.engine.tools import ToolContext, ToolOutput
from threads_aws.store import NewBranch
from threads_aws.store.memory import INLINE_MAX, SEARCH_ROWS, TEXT_MAX, MemoryWrite, memory_scope, scope_pk
from threads_aws.writer import Draft

ALICE = USER["principal"]
BOB = {"issuer": "api", "subject": "bob", "tenant": "acme"}
ALICE_AT_GLOBEX = {"issuer": "api", "subject": "alice", "tenant": "globex"}
ALICE_SCOPE = memory_scope("api", "alice")


def say_as(ctx: EngineContext, b: str, principal: dict[str, str], text: str) -> None:
    actor = {"kind": "user", "principal": principal}
    ctx.writer.append(b, [Draft("user_input", {"source": "api", "text": text}, actor)])


def thread_in(ctx: EngineContext, tenant: str) -> str:
    thread_id, branch_id = new_uuid7(), new_uuid7()
    header = StoredLine.of_header(header_line(thread_id, branch_id, ctx.clock()))
    ctx.store.create_branch(
        NewBranch(thread_id=thread_id, tenant=tenant, branch_id=branch_id, header=header, create_thread=True)
    )
    started = load_agents()["demo"].thread_started()
    ctx.writer.append(branch_id, [Draft("thread_started", started, {"kind": "host"})])
    return branch_id


def answer(ctx: EngineContext, b: str) -> str:
    text: str = of_type(ctx, b, "model_response")[-1]["data"]["content"][0]["text"]
    return text


def memory_rows(aws: Any, tenant: str = "acme", scope: str = ALICE_SCOPE) -> list[dict[str, Any]]:
    out = aws.ddb.query(
        TableName=aws.resources.state_table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": scope_pk(tenant, scope)}},
        ConsistentRead=True,
    )
    return list(out["Items"])


def turn(ctx: EngineContext, b: str, text: str, principal: dict[str, str] = ALICE) -> str:
    say_as(ctx, b, principal, text)
    assert run(ctx, b).state == "idle"
    return answer(ctx, b)


def test_scope_escapes_percent_then_slash() -> None:
    assert memory_scope("https://idp/x", "a%2Fb") == "https:%2F%2Fidp%2Fx/a%252Fb"
    # one issuer/subject split can't spell another's scope
    assert memory_scope("a/b", "c") != memory_scope("a", "b/c")
    assert scope_pk("t", memory_scope("a", "b")) != scope_pk("t/a", "b")


def test_remember_recall_forget_through_the_demo_agent(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    assert turn(ctx, b, "remember colour: blue") == "Done: Remembered 'colour' (4 bytes)."
    tail = types(ctx, b)[types(ctx, b).index("tool_call") :]
    assert tail[:5] == ["tool_call", "permission_decision", "effect_begin", "effect_commit", "tool_result"]
    (row,) = memory_rows(aws)
    assert row["text"]["S"] == "blue" and row["state"]["S"] == "live"
    assert row["tenant"]["S"] == "acme" and row["scope"]["S"] == ALICE_SCOPE
    assert row["thread_id"]["S"] == ctx.writer.load(b).record.thread_id

    assert turn(ctx, b, "recall colour") == "Done: Recalled 1 memory (shown as memory references).\n- blue"
    # read-only: no effect events; the value is an untrusted memory reference, not the result
    n = len(of_type(ctx, b, "effect_begin"))
    assert n == 1
    (inj,) = of_type(ctx, b, "injected")
    assert inj["data"]["source"] == "memory" and inj["data"]["trust"] == "untrusted_reference"
    assert inj["data"]["text"] == "blue" and inj["data"]["origin"]["id"] == "colour"
    assert inj["actor"] == {"kind": "tool", "principal": ALICE}
    recall_result = of_type(ctx, b, "tool_result")[-1]
    assert "blue" not in recall_result["data"]["preview"]
    assert events(ctx, b)[inj["seq"] - 2]["type"] == "tool_result"  # right after the result
    # Render v1 wraps it: the next request holds the reference line
    req = of_type(ctx, b, "model_request")[-1]["data"]["request_ref"]
    assert b'<reference source=\\"memory\\" id=\\"colour\\" untrusted=\\"true\\">\\nblue\\n</reference>' in (
        ctx.artifacts.get_ref(req)
    )

    assert turn(ctx, b, "recall: what colour") == (
        "Done: Recalled 1 memory (shown as memory references).\n- blue"
    )
    assert turn(ctx, b, "forget colour") == "Done: Forgot 'colour'."
    assert turn(ctx, b, "recall colour") == "Done: Nothing is remembered under 'colour'."
    assert turn(ctx, b, "forget colour") == "Done: Nothing was remembered under 'colour'."
    (row,) = memory_rows(aws)  # a tombstone: no value, expires by TTL
    assert row["state"]["S"] == "forgotten" and "text" not in row and int(row["ttl"]["N"]) > 0
    verify_export(ctx, b)


def test_another_principal_and_another_tenant_see_nothing(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    turn(ctx, b, "remember colour: blue")
    turn(ctx, b, "recall colour")
    # Bob on the same thread: his own (empty) scope, and Alice's recalled memory is hidden
    assert turn(ctx, b, "recall colour", BOB) == "Done: Nothing is remembered under 'colour'."
    assert turn(ctx, b, "recall: colour blue", BOB) == "Done: No memory matches the query."
    bob_req = ctx.artifacts.get_ref(of_type(ctx, b, "model_request")[-1]["data"]["request_ref"])
    assert b'source=\\"memory\\"' not in bob_req
    # Alice again: her memory shows again (visibility follows the principal answered)
    turn(ctx, b, "hello")
    alice_req = ctx.artifacts.get_ref(of_type(ctx, b, "model_request")[-1]["data"]["request_ref"])
    assert b'source=\\"memory\\"' in alice_req
    verify_export(ctx, b)

    # the same issuer and subject under another tenant: a different scope partition
    g = thread_in(ctx, "globex")
    assert turn(ctx, g, "recall colour", ALICE_AT_GLOBEX) == "Done: Nothing is remembered under 'colour'."
    assert turn(ctx, g, "recall: colour", ALICE_AT_GLOBEX) == "Done: No memory matches the query."
    assert turn(ctx, g, "remember colour: green", ALICE_AT_GLOBEX).startswith("Done: Remembered")
    assert [r["text"]["S"] for r in memory_rows(aws)] == ["blue"]
    assert [r["text"]["S"] for r in memory_rows(aws, "globex")] == ["green"]
    # a principal of another tenant in an acme thread has no memory here at all
    assert turn(ctx, b, "recall colour", ALICE_AT_GLOBEX).startswith(
        "Done: No memory: the principal belongs to another tenant."
    )
    verify_export(ctx, g)


def test_search_is_bounded_and_ranked(aws: Any) -> None:
    stores = aws.stores()
    mem = stores.memory
    for i, (key, text) in enumerate(
        [("colour", "blue is my colour"), ("pet", "a cat named Blue"), ("city", "Lisbon")]
    ):
        w = MemoryWrite("acme", ALICE_SCOPE, key, text, f"ek{i}", "t1", "b1", f"c{i}", 1000 + i)
        mem.remember(w, new_uuid7())
    rows, more = mem.search("acme", ALICE_SCOPE, "BLUE colour", 5)
    assert [r.key for r in rows] == ["colour", "pet"] and not more  # 2 terms before 1
    assert mem.search("acme", ALICE_SCOPE, "   ", 5) == ([], False)
    assert mem.search("acme", memory_scope("api", "bob"), "blue", 5) == ([], False)
    assert mem.search("globex", ALICE_SCOPE, "blue", 5) == ([], False)
    # a scope of more than one page: only SEARCH_ROWS rows are read, and the caller is told
    for i in range(SEARCH_ROWS + 1):
        mem.remember(MemoryWrite("acme", "x/y", f"k{i:04}", "zzz", f"e{i}", "t", "b", "c", i), new_uuid7())
    rows, more = mem.search("acme", "x/y", "zzz", 5)
    assert len(rows) == 5 and more


def test_large_value_lives_in_s3_and_renders(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    big = "word " * (INLINE_MAX // 5 + 100)
    assert turn(ctx, b, f"remember essay: {big}").startswith("Done: Remembered 'essay'")
    (row,) = memory_rows(aws)
    assert "text" not in row and int(row["ref_bytes"]["N"]) == len(big.strip().encode())
    assert ctx.artifacts.get(row["ref_sha256"]["S"]).decode() == big.strip()
    turn(ctx, b, "recall essay")
    (inj,) = of_type(ctx, b, "injected")
    assert "text" not in inj["data"] and inj["data"]["ref"]["sha256"] == row["ref_sha256"]["S"]
    assert answer(ctx, b).endswith(big.strip()[-40:])
    verify_export(ctx, b)  # Render v1 reads and verifies the artifact


def _tc(aws: Any, principal: dict[str, str] | None, effect_key: str | None = "b1:c1") -> ToolContext:
    return ToolContext("acme", "t1", "b1", "c1", effect_key, 1, aws.clock, aws.stores(), principal=principal)


def test_refusals_store_nothing(aws: Any) -> None:
    no_one = _tc(aws, None)
    for fn, args in ((run_remember, {"key": "k", "text": "v"}), (run_forget, {"key": "k"})):
        assert fn(args, no_one).is_error
    assert run_recall({"key": "k"}, _tc(aws, None, None)).is_error
    alice = _tc(aws, ALICE)
    out = run_remember({"key": "k", "text": "x" * (TEXT_MAX + 1)}, alice)
    assert out.is_error and "limit" in out.text
    assert run_remember({"key": "k" * 300, "text": "v"}, alice).is_error
    assert run_recall({"key": "k", "query": "q"}, _tc(aws, ALICE, None)).is_error
    assert run_recall({}, _tc(aws, ALICE, None)).is_error
    assert memory_rows(aws) == []


@pytest.mark.parametrize("tool", ["remember", "forget"])
def test_crash_after_the_write_applies_it_once(aws: Any, tool: str) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    turn(ctx, b, "remember colour: blue")
    (first,) = memory_rows(aws)
    text = "remember colour: blue" if tool == "remember" else "forget colour"
    say(ctx, b, text)
    real = ctx.tools[tool]

    def write_then_crash(args: dict[str, Any], tc: ToolContext) -> ToolOutput:
        real(args, tc)  # the write lands ...
        raise Crash  # ... and the worker dies before effect_commit

    ctx.tools[tool] = write_then_crash
    with pytest.raises(Crash):
        run(ctx, b)
    assert types(ctx, b)[-1] == "effect_begin"
    aws.clock.advance(120_000)  # the dead worker's lease lapses
    fresh = make_ctx(aws)
    assert run(fresh, b, holder="worker-2").state == "idle"
    resolved = of_type(fresh, b, "effect_resolved")[-1]["data"]
    assert resolved["outcome"] == "safe_to_retry" and resolved["by"] == "provider_dedup"
    (row,) = memory_rows(aws)
    if tool == "remember":
        assert answer(fresh, b) == "Done: Remembered 'colour' (4 bytes)."
        assert row["record_id"] != first["record_id"]  # the second remember wrote once ...
        call_id = of_type(fresh, b, "tool_call")[-1]["data"]["call_id"]
        assert row["effect_key"]["S"] == f"{b}:{call_id}"  # ... under its effect key
    else:
        assert answer(fresh, b) == "Done: Forgot 'colour'."  # the re-dispatch found its own forget
        assert row["state"]["S"] == "forgotten"
    verify_export(fresh, b)


def test_remember_redispatch_does_not_write_again(aws: Any) -> None:
    mem = aws.stores().memory
    w = MemoryWrite("acme", ALICE_SCOPE, "k", "v", "b:c1", "t1", "b", "c1", 1)
    mem.remember(w, "r1")
    mem.remember(w, "r2")  # attempt 2 of the same effect: nothing new stored
    (row,) = memory_rows(aws)
    assert row["record_id"]["S"] == "r1"
    mem.remember(MemoryWrite("acme", ALICE_SCOPE, "k", "v2", "b:c2", "t1", "b", "c2", 2), "r3")
    assert memory_rows(aws)[0]["text"]["S"] == "v2"


def test_deletions_by_scope_thread_and_tenant(aws: Any) -> None:
    mem = aws.stores().memory
    bob = memory_scope("api", "bob")

    def put(tenant: str, scope: str, key: str, thread: str, text: str = "v") -> None:
        mem.remember(MemoryWrite(tenant, scope, key, text, new_uuid7(), thread, "b", "c", 1), new_uuid7())

    put("acme", ALICE_SCOPE, "a1", "T1")
    put("acme", ALICE_SCOPE, "a2", "T1")
    put("acme", ALICE_SCOPE, "a3", "T2")
    put("acme", bob, "b1", "T1")
    put("acme", ALICE_SCOPE, "a2", "T2")  # T2 overwrote what T1 wrote: T2's now
    put("acme", ALICE_SCOPE, "big", "T1", "x" * (INLINE_MAX + 1))
    put("globex", ALICE_SCOPE, "g1", "T1")  # a thread id is no key across tenants

    gone = mem.delete_written_by("acme", "T1")
    assert gone.rows == 3 and len(gone.refs) == 1  # a1, big, Bob's b1; its S3 value's ref
    assert sorted(r["sk"]["S"] for r in memory_rows(aws)) == ["a2", "a3"]
    assert memory_rows(aws, scope=bob) == []
    assert mem.delete_written_by("acme", "T1").rows == 0  # idempotent
    assert [r["sk"]["S"] for r in memory_rows(aws, "globex")] == ["g1"]

    put("acme", bob, "b2", "T3")
    assert mem.delete_scope("acme", ALICE_SCOPE).rows == 2
    assert memory_rows(aws) == [] and len(memory_rows(aws, scope=bob)) == 1
    assert mem.delete_tenant("acme").rows == 1
    assert memory_rows(aws, scope=bob) == []
    assert [r["sk"]["S"] for r in memory_rows(aws, "globex")] == ["g1"]  # another tenant's stay
    assert mem.delete_tenant("globex").rows == 1 and memory_rows(aws, "globex") == []


def test_aws_calls_per_memory_operation(aws: Any) -> None:
    calls: list[str] = []
    for client in (aws.ddb, aws.s3):
        client.meta.events.register("before-call", lambda model, **kw: calls.append(model.name))
    mem = aws.stores().memory

    def count(fn: Any, *args: Any) -> list[str]:
        calls.clear()
        fn(*args)
        return sorted(calls)

    w = MemoryWrite("acme", ALICE_SCOPE, "k", "v", "b:c1", "t1", "b", "c1", 1)
    assert count(mem.remember, w, "r1") == ["PutItem"]
    big = MemoryWrite("acme", ALICE_SCOPE, "big", "x" * (INLINE_MAX + 1), "b:c2", "t1", "b", "c2", 1)
    assert count(mem.remember, big, "r2") == ["PutItem", "PutObject"]
    assert count(mem.get, "acme", ALICE_SCOPE, "k") == ["GetItem"]
    assert count(mem.search, "acme", ALICE_SCOPE, "v x", 5) == ["Query"]
    assert count(mem.forget, "acme", ALICE_SCOPE, "k", "b:c3", 2) == ["UpdateItem"]
    # a re-dispatch of that forget: its condition fails, the old item comes back with the error
    assert count(mem.forget, "acme", ALICE_SCOPE, "k", "b:c3", 2) == ["UpdateItem"]


def test_a_steer_from_another_principal_moves_the_scope(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    say_as(ctx, b, ALICE, "hello")
    assert ctx.writer.load(b).fold.turn.principal == ALICE
    steer = Draft("steer", {"source": "api", "text": "me too"}, {"kind": "user", "principal": BOB})
    ctx.writer.append(b, [steer])
    assert ctx.writer.load(b).fold.turn.principal == BOB  # whom the model now answers (Render v1)


def _appends(aws: Any, b: str, text: str) -> int:
    ctx = make_ctx(aws)
    counter = CrashingWriter(ctx.writer, at=-1, when="after")
    ctx.writer = counter
    say_as(ctx, b, ALICE, text)
    n0 = counter.n
    assert run(ctx, b).state == "idle"
    return counter.n - n0


# (crash before an append = after the previous one: "before" adds the first append's case)
@pytest.mark.parametrize(
    ("tool", "when"),
    [("remember", "before"), ("remember", "after"), ("recall", "after"), ("forget", "after")],
)
def test_worker_crash_at_every_append_of_a_memory_call(aws: Any, tool: str, when: str) -> None:
    total = _appends(aws, new_thread(make_ctx(aws)), "remember k0: v0")
    assert total > 3
    for at in range(1, total + 1):
        key = f"k{when}{at}"
        b = new_thread(make_ctx(aws))
        if tool != "remember":
            turn(make_ctx(aws), b, f"remember {key}: value {at}")
        text = f"remember {key}: value {at}" if tool == "remember" else f"{tool} {key}"
        ctx = make_ctx(aws)
        say_as(ctx, b, ALICE, text)  # the API's append: never crashes
        ctx.writer = CrashingWriter(ctx.writer, at=at, when=when)
        n_results = len(of_type(ctx, b, "tool_result"))
        label = f"{tool} crash {when} append {at}"
        try:
            run(ctx, b, holder="w1")
        except Crash:
            pass
        aws.clock.advance(120_000)  # the dead worker's lease lapses
        fresh = make_ctx(aws)
        assert run(fresh, b, holder="w2").state == "idle", label
        assert len(of_type(fresh, b, "tool_result")) == n_results + 1, label
        rows = [r for r in memory_rows(aws) if r["sk"]["S"] == key]
        assert len(rows) == 1, label
        if tool == "forget":
            assert rows[0]["state"]["S"] == "forgotten", label
            assert answer(fresh, b) == f"Done: Forgot {key!r}.", label
        else:
            assert rows[0]["state"]["S"] == "live" and rows[0]["text"]["S"] == f"value {at}", label
        if tool == "recall":
            assert len(of_type(fresh, b, "injected")) == 1, label  # recorded once, with its result
            assert answer(fresh, b).endswith(f"- value {at}"), label
        assert fresh.writer.load(b).fold.quiescent(), label
        verify_export(fresh, b)
