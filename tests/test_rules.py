"""One focused test per rule of the pure log core: admission order and error seqs (semantics.md
§1), segment structure, seq / prev_hash / fork links, semantic rules 1-30 (§3), torn tail, the
head checkpoint, and every ReducedState field (conformance README). Each builds a small log and
asserts the exact code and seq, or the exact state."""

from __future__ import annotations

import functools
import hashlib
import json
from typing import Any

import pytest
from helpers.log import ALICE, B2, TOOL, B, LogBuilder, T, eid, snapshot_data, started, turn
from threads_aws.core.canonical import canonical_bytes, canonical_hash, sha256_hex
from threads_aws.core.errors import LogError
from threads_aws.core.fork_points import fork_point
from threads_aws.core.importer import Imported, import_log
from threads_aws.core.lines import head_line, header_line
from threads_aws.core.reduced_state import reduce

NOW = 10**13
T2 = "0192a000-0000-7000-8000-000000000002"
B3 = "0192b000-0000-7000-8000-000000000003"
USER = {"kind": "user", "principal": ALICE}
APPROVER = {"kind": "approver", "principal": ALICE}
RO_TOOL = {**TOOL, "name": "read", "effect_class": "read_only"}
ASK_TOOL = {**TOOL, "name": "ask_user", "effect_class": "read_only"}


def err(data: bytes, now: int = NOW) -> tuple[str, int | None]:
    with pytest.raises(LogError) as info:
        import_log(data, now=now)
    return info.value.code, info.value.seq


def ok(data: bytes, now: int = NOW) -> Imported:
    return import_log(data, now=now)


def state(data: bytes, now: int = NOW) -> dict[str, Any]:
    imp = import_log(data, now=now)
    return reduce(imp.fold, imp.segments[-1].last.hash)


def sha(label: str) -> str:
    return hashlib.sha256(label.encode()).hexdigest()


def ref(label: str = "x", media_type: str = "application/x-ndjson") -> dict[str, Any]:
    return {"bytes": 10, "media_type": media_type, "sha256": sha(label)}


def request(b: LogBuilder, **extra: Any) -> str:
    b.add(
        "model_request",
        {"attempt": 1, "declared_prefix": {"bytes": 1, "sha256": sha("p")}, "request_ref": ref(), **extra},
    )
    return eid(b.n)


def response(
    b: LogBuilder, req: str, usage: tuple[int | None, int | None] = (1, 1), text: str = "ok"
) -> None:
    b.add(
        "model_response",
        {
            "completeness": "complete",
            "content": [{"text": text, "type": "text"}],
            "request_event_id": req,
            "stop_reason": "end_turn",
            "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
        },
        actor={"kind": "model"},
    )


def result(b: LogBuilder, call_id: str, origin: str = "executed", preview: str = "done", **kw: Any) -> None:
    b.add(
        "tool_result",
        {
            "call_id": call_id,
            "completeness": "complete",
            "is_error": False,
            "origin": origin,
            "preview": preview,
        },
        **kw,
    )


def late(b: LogBuilder, call_id: str) -> None:
    b.add(
        "tool_result_late",
        {"call_id": call_id, "completeness": "complete", "is_error": False, "preview": "x"},
    )


def done(b: LogBuilder) -> None:
    b.add("turn_completed", {"reason": "end_turn"})


def tool_call(
    b: LogBuilder, call_id: str, name: str = "send", decision: str | None = "allow", **inp: Any
) -> None:
    b.add(
        "tool_call", {"call_id": call_id, "input": inp or {"x": 1}, "name": name, "request_event_id": eid(1)}
    )
    if decision is not None:
        b.add("permission_decision", {"call_id": call_id, "decision": decision, "source": "policy"})


def park(b: LogBuilder, kind: str, id_: str, reason: str = "awaiting_input") -> None:
    b.add("parked", {"address": {"id": id_, "kind": kind}, "reason": reason})


def resume(b: LogBuilder, kind: str, id_: str) -> None:
    b.add("resumed", {"address": {"id": id_, "kind": kind}, "cause_event_id": eid(b.n)})


def snapshot(b: LogBuilder, expires: int | None = None) -> None:
    b.add("snapshot", snapshot_data(expires))


def idle_log() -> LogBuilder:
    b = LogBuilder()
    started(b, [TOOL, RO_TOOL, ASK_TOOL])
    turn(b)
    done(b)
    return b


# ----------------------------------------------------------------- child segments
def child(
    parent: LogBuilder,
    at_seq: int,
    *,
    reason: str = "snapshot",
    branch: str = B2,
    thread: str = T,
    time: int | None = None,
    **fork_over: Any,
) -> LogBuilder:
    """A child builder whose first event is its `fork` at `at_seq` + 1."""
    c = LogBuilder(branch)
    if thread != T:
        c.header = header_line(thread, branch, 1)
        c.lines = [c.header]
        c.prev = sha256_hex(c.header)
    c.seq = at_seq
    c.n = parent.n + 100
    data: dict[str, Any] = {
        "at_hash": sha256_hex(parent.lines[at_seq]),
        "parent_branch_id": parent.branch,
        "reason": reason,
    }
    if reason == "snapshot":
        data |= {"knowledge_policy": "pinned", "sandbox_id": "s2"}
    data |= fork_over
    c.add("fork", data, epoch=2, **({"time": time} if time is not None else {}))
    c.add = functools.partial(c.add, epoch=2)  # type: ignore[method-assign]
    c.parent, c.at_seq = parent, at_seq  # type: ignore[attr-defined]
    return c


def export_child(c: LogBuilder, head: bool = True) -> bytes:
    parent: LogBuilder = c.parent  # type: ignore[attr-defined]
    lines = parent.lines[: c.at_seq + 1] + c.lines  # type: ignore[attr-defined]
    out = b"\n".join(lines) + b"\n"
    return out + (head_line(c.branch, c.seq, c.prev) + b"\n" if head else b"")


def forkable() -> LogBuilder:
    b = idle_log()
    snapshot(b)  # seq 4
    return b


# ============================================================ §1 admission and format
def _header(**over: Any) -> bytes:
    value = json.loads(header_line(T, B, 1))
    value.update(over)
    for k in [k for k, v in over.items() if v is ...]:
        del value[k]
    return canonical_bytes(value)


@pytest.mark.parametrize(
    ("over", "code"),
    [
        ({"format_version": 2}, "unsupported_format"),
        ({"format_version": ...}, "invalid_line"),
        ({"format_version": 0}, "invalid_line"),
        ({"format_version": -1}, "invalid_line"),
        ({"format_version": "1"}, "invalid_line"),
        ({"format_version": True}, "invalid_line"),
        ({"format": "threads.other"}, "invalid_line"),
        ({"format": ["threads.log"]}, "invalid_line"),
        ({"extra": 1}, "invalid_line"),
        ({"writer": {"impl": "threads-go", "version": "1.0.0"}}, "invalid_line"),
    ],
)
def test_header_format_admission_seq_0(over: dict[str, Any], code: str) -> None:
    assert err(_header(**over) + b"\n") == (code, 0)


def test_format_admission_before_schema() -> None:
    # An unsupported version wins over a schema error of the same line.
    assert err(_header(format_version=2, extra=1) + b"\n") == ("unsupported_format", 0)


def _head(b: LogBuilder, **over: Any) -> bytes:
    value = json.loads(head_line(b.branch, b.seq, b.prev))
    value.update(over)
    return canonical_bytes(value)


@pytest.mark.parametrize(
    ("over", "code"),
    [
        ({"format_version": 2}, "unsupported_format"),
        ({"format_version": 1.5}, "invalid_line"),
        ({"format_version": "1"}, "invalid_line"),
        ({"format_version": 0}, "invalid_line"),
        ({"extra": 1}, "invalid_line"),
    ],
)
def test_head_format_admission_names_its_own_seq(over: dict[str, Any], code: str) -> None:
    b = idle_log()
    data = b.export(head=False) + _head(b, seq=7, **over) + b"\n"
    assert err(data) == (code, 7)


def test_noncanonical_event_named_by_its_seq() -> None:
    b = idle_log()
    raw = b.add("turn_completed", {"reason": "end_turn"})
    b.lines[-1] = json.dumps(json.loads(raw)).encode()  # whitespace
    assert err(b.export()) == ("invalid_line", 4)


@pytest.mark.parametrize(
    "raw", [b"not json", b"\xff\xfe", b"[1]", b"", b'{"a":' + b"[" * 64 + b"]" * 64 + b"}", b'{"seq":']
)
def test_unreadable_line_named_by_position(raw: bytes) -> None:
    b = idle_log()
    data = b"\n".join(b.lines) + b"\n" + raw + b"\n"
    assert err(data) == ("invalid_line", 4)
    assert err(raw + b"\n") == ("invalid_line", 0)


def test_deep_line_seq_is_not_read() -> None:
    b = idle_log()
    deep = canonical_bytes({"seq": 9, "x": json.loads("[" * 64 + "]" * 64)})
    assert err(b"\n".join(b.lines) + b"\n" + deep + b"\n") == ("invalid_line", 4)


def test_out_of_range_or_negative_seq_named_by_position() -> None:
    b = idle_log()
    big = b'{"seq":9007199254740992}'
    neg = canonical_bytes({"seq": -5, "type": "x"})
    assert err(b"\n".join(b.lines) + b"\n" + big + b"\n") == ("invalid_line", 4)
    assert err(b"\n".join(b.lines) + b"\n" + neg + b"\n") == ("invalid_line", 4)


def test_integer_out_of_range_in_data_is_invalid_line() -> None:
    b = idle_log()
    b.add("turn_completed", {"reason": "end_turn"})
    raw = b.lines[-1].replace(b'"end_turn"', b'"end_turn","n":9007199254740992')
    b.lines[-1] = raw
    assert err(b.export()) == ("invalid_line", 4)


def test_unreadable_line_after_child_header_does_not_restart_count() -> None:
    p = forkable()
    c = child(p, 4)
    data = b"\n".join(p.lines[:5]) + b"\n" + c.lines[0] + b"\n" + b"garbage\n"
    assert err(data) == ("invalid_line", 5)


def test_schema_error_wins_over_chain_error_on_the_same_line() -> None:
    b = idle_log()
    b.add("turn_completed", {"reason": "nope"}, prev_hash="0" * 64, seq=9)
    assert err(b.export()) == ("invalid_line", 9)


def test_known_type_with_wrong_critical_is_invalid_line() -> None:
    b = idle_log()
    b.add("turn_completed", {"reason": "end_turn"}, critical=False)
    assert err(b.export()) == ("invalid_line", 4)


def test_extra_envelope_key_and_uppercase_uuid_are_invalid_line() -> None:
    b = idle_log()
    b.add("turn_completed", {"reason": "end_turn"}, extra=1)
    assert err(b.export()) == ("invalid_line", 4)
    b = idle_log()
    b.add("turn_completed", {"reason": "end_turn"}, event_id=eid(99).upper())
    assert err(b.export()) == ("invalid_line", 4)


# ============================================================ §1 segment structure
def test_first_line_not_a_header() -> None:
    b = idle_log()
    assert err(b"\n".join(b.lines[1:]) + b"\n") == ("invalid_transition", 1)
    assert err(head_line(B, 0, "0" * 64) + b"\n") == ("invalid_transition", 0)


def test_empty_file() -> None:
    assert err(b"") == ("invalid_transition", 0)


def test_header_only_export_with_seq_0_head() -> None:
    b = LogBuilder()
    imp = ok(b.export())
    assert imp.head_verified and imp.fold.head_seq == 0
    assert state(b.export())["head"] == {"seq": 0, "hash": sha256_hex(b.header)}


def test_fork_in_root_segment_rejected() -> None:
    b = idle_log()
    b.add("fork", {"at_hash": b.prev, "parent_branch_id": B2, "reason": "repair"})
    assert err(b.export()) == ("invalid_transition", 4)


def test_second_fork_in_child_rejected() -> None:
    p = forkable()
    c = child(p, 4)
    c.add("fork", {"at_hash": "0" * 64, "parent_branch_id": B, "reason": "repair"}, epoch=2)
    assert err(export_child(c)) == ("invalid_transition", 6)


def test_child_header_without_fork_at_next_event() -> None:
    p = forkable()
    c = child(p, 4)
    c.lines.pop()  # drop the fork
    c.seq, c.prev = 4, sha256_hex(c.header)
    turn(c)
    assert err(export_child(c)) == ("invalid_transition", 5)


def test_child_header_at_the_end_without_fork() -> None:
    p = forkable()
    data = b"\n".join(p.lines[:5]) + b"\n" + header_line(T, B2, 1) + b"\n"
    assert err(data) == ("invalid_transition", 5)
    assert err(data + head_line(B2, 4, sha256_hex(p.lines[4])) + b"\n") == ("invalid_transition", 5)


def test_child_header_followed_by_header() -> None:
    p = forkable()
    data = b"\n".join(p.lines[:5]) + b"\n" + header_line(T, B2, 1) + b"\n" + header_line(T, B3, 1) + b"\n"
    assert err(data) == ("invalid_transition", 5)


def test_bad_fork_links_are_prev_hash_mismatch() -> None:
    p = forkable()
    assert err(export_child(child(p, 4, at_hash="1" * 64))) == ("prev_hash_mismatch", 5)
    assert err(export_child(child(p, 4, parent_branch_id=B3))) == ("prev_hash_mismatch", 5)
    c = child(p, 4)
    c.lines[1] = canonical_bytes({**json.loads(c.lines[1]), "prev_hash": "2" * 64})
    assert err(export_child(c)) == ("prev_hash_mismatch", 5)


def test_fork_seq_must_continue_parent() -> None:
    p = forkable()
    c = child(p, 4)
    c.lines[1] = canonical_bytes({**json.loads(c.lines[1]), "seq": 1})
    assert err(export_child(c)) == ("seq_mismatch", 1)


def test_rule_4_child_header_of_another_thread_fails_at_child_first_seq() -> None:
    p = forkable()
    assert err(export_child(child(p, 4, thread=T2))) == ("invalid_transition", 5)


def test_rule_4_event_branch_and_thread() -> None:
    p = forkable()
    c = child(p, 4)
    turn(c)
    c.lines[-1] = canonical_bytes({**json.loads(c.lines[-1]), "branch_id": B})
    c.prev = sha256_hex(c.lines[-1])
    assert err(export_child(c)) == ("invalid_transition", 6)
    b = idle_log()
    b.add("turn_completed", {"reason": "end_turn"}, thread_id=T2)
    assert err(b.export()) == ("invalid_transition", 4)
    b = idle_log()
    b.add("turn_completed", {"reason": "end_turn"}, branch_id=B2)
    assert err(b.export()) == ("invalid_transition", 4)


def test_child_export_reduces_over_resolved_chain() -> None:
    p = forkable()
    c = child(p, 4)
    turn(c)
    s = state(export_child(c))
    assert s["branch_id"] == B2 and s["head"]["seq"] == 6 and s["epoch"] == 2 and s["status"] == "in_turn"
    assert s["fork_points"] == [{"seq": 4, "snapshot_event_id": eid(4)}]
    assert [t["event_id"] for t in s["transcript"]] == [eid(2), eid(p.n + 102)]


def test_repair_fork_at_seq_0_of_an_empty_root() -> None:
    p = LogBuilder()
    c = child(p, 0, reason="repair")
    s = state(export_child(c))
    assert s["status"] == "inspection_only" and s["head"]["seq"] == 1


def test_grandchild_chain() -> None:
    p = forkable()
    c = child(p, 4)
    snapshot(c)  # seq 6
    g = LogBuilder(B3)
    g.seq, g.n = 6, c.n + 100
    g.add(
        "fork",
        {
            "at_hash": c.prev,
            "knowledge_policy": "pinned",
            "parent_branch_id": B2,
            "reason": "snapshot",
            "sandbox_id": "s3",
        },
        epoch=3,
    )
    data = export_child(c, head=False) + b"\n".join(g.lines) + b"\n" + head_line(B3, 7, g.prev) + b"\n"
    s = state(data)
    assert s["branch_id"] == B3 and s["head"]["seq"] == 7
    assert [p["seq"] for p in s["fork_points"]] == [4, 6]


def test_rule_28_and_rule_9_across_segments() -> None:
    p = forkable()
    c = child(p, 4)
    c.add("user_input", {"source": "api", "text": "x"}, actor=USER, epoch=2, event_id=eid(2))
    assert err(export_child(c)) == ("invalid_transition", 6)
    p = LogBuilder()
    started(p, [TOOL])
    turn(p)
    tool_call(p, "c1")
    result(p, "c1")
    done(p)
    snapshot(p)  # 7
    c = child(p, 7)
    turn(c)
    tool_call(c, "c1")
    assert err(export_child(c)) == ("invalid_transition", 10)


def test_rule_6_epoch_across_segments() -> None:
    p = LogBuilder()
    started(p)
    turn(p)
    p.add("turn_completed", {"reason": "end_turn"}, epoch=3)
    p.add("snapshot", snapshot_data(), epoch=3)
    c = child(p, 4)  # fork at epoch 2 < 3
    assert err(export_child(c)) == ("invalid_transition", 5)


# ============================================================ rules 1-3: seq, chain, head
def test_rule_1_seq_gap_and_repeat() -> None:
    b = idle_log()
    b.add("turn_completed", {"reason": "end_turn"}, seq=5)
    assert err(b.export()) == ("seq_mismatch", 5)
    b = idle_log()
    b.add("turn_completed", {"reason": "end_turn"}, seq=3)
    assert err(b.export()) == ("seq_mismatch", 3)


def test_rule_2_prev_hash_and_order_after_seq() -> None:
    b = idle_log()
    b.add("turn_completed", {"reason": "end_turn"}, prev_hash="0" * 64)
    assert err(b.export()) == ("prev_hash_mismatch", 4)
    b = idle_log()
    b.add("turn_completed", {"reason": "end_turn"}, prev_hash="0" * 64, seq=6)
    assert err(b.export()) == ("seq_mismatch", 6)


def test_rule_3_head_mismatch_variants() -> None:
    b = idle_log()
    body = b"\n".join(b.lines) + b"\n"
    assert err(body + head_line(B, 3, "0" * 64) + b"\n") == ("head_mismatch", 3)
    assert err(body + head_line(B, 2, sha256_hex(b.lines[2])) + b"\n") == ("head_mismatch", 2)
    assert err(body + head_line(B2, 3, b.prev) + b"\n") == ("head_mismatch", 3)


def test_no_head_line_is_unverified_but_readable() -> None:
    b = idle_log()
    data = b.export(head=False)
    imp = ok(data)
    assert not imp.head_verified and imp.torn is None and imp.committed_bytes == len(data)
    assert state(data)["status"] == "idle"


def test_head_line_in_the_middle() -> None:
    b = idle_log()
    data = (
        b"\n".join(b.lines[:3]) + b"\n" + head_line(B, 2, sha256_hex(b.lines[2])) + b"\n" + b.lines[3] + b"\n"
    )
    assert err(data) == ("invalid_transition", 2)


def test_two_head_lines() -> None:
    b = idle_log()
    data = b.export() + head_line(B, 3, b.prev) + b"\n"
    assert err(data) == ("invalid_transition", 3)


def test_torn_tail() -> None:
    b = idle_log()
    body = b.export(head=False)
    torn = b.add("turn_completed", {"reason": "end_turn"})  # complete JSON, but unterminated
    imp = ok(body + torn)
    assert not imp.head_verified and imp.torn == torn and imp.torn_offset == len(body)
    assert imp.committed_bytes == len(body) and imp.fold.head_seq == 3
    # a terminated head before the torn chunk must match
    assert err(body + head_line(B, 3, "0" * 64) + b"\n" + b'{"x":') == ("head_mismatch", 3)
    imp = ok(body + head_line(B, 3, sha256_hex(b.lines[3])) + b"\n" + b'{"x":')
    assert not imp.head_verified
    # every terminated line must be valid
    assert err(body + b"junk\n" + b'{"x":') == ("invalid_line", 4)


def test_committed_bytes_counts_headers_and_events_only() -> None:
    p = forkable()
    c = child(p, 4)
    data = export_child(c)
    imp = ok(data)
    assert imp.committed_bytes == len(data) - len(head_line(B2, 5, c.prev)) - 1


# ============================================================ rule 5, unknown events
def test_unknown_noncritical_is_kept_and_skipped_by_rules() -> None:
    b = idle_log()
    # an unknown type_version of a known type, data that would break rule 7 if read
    b.add("tool_result", {"call_id": "nope"}, critical=False, type_version=2, epoch=4)
    imp = ok(b.export())
    assert imp.fold.known[-1] is False
    s = state(b.export())
    assert s["head"] == {"seq": 4, "hash": b.prev} and s["epoch"] == 4 and s["status"] == "idle"
    assert s["transcript"] == [{"role": "user", "event_id": eid(2)}]


def test_unknown_event_does_not_break_rule_29_adjacency_or_reads() -> None:
    b = idle_log()
    b.add("model_response", {"garbage": True}, critical=False, type_version=3)
    b.add("tool_result", {"garbage": True}, critical=False, type_version=3)
    unknown = [b.seq - 1, b.seq]
    tool_call(b, "c1", name="read")
    result(b, "c1")
    b.add(
        "context_edited",
        {
            "edits": [{"action": "redact", "call_id": "c1", "part": 0, "spans": [{"end": 1, "start": 0}]}],
            "reason": "manual",
        },
    )
    fold = ok(b.export()).fold
    # the unknown versions are kept and skipped: the later known events read past them
    assert [e["seq"] for e, k in zip(fold.events, fold.known, strict=True) if not k] == unknown
    assert fold.head_seq == fold.last_known_seq == b.seq
    assert fold.calls["c1"].result_origin == "executed" and not fold.pending
    assert state(b.export())["head"] == {"seq": b.seq, "hash": b.prev}


def test_unknown_fork_version_is_not_a_fork() -> None:
    b = idle_log()
    b.add("fork", {"x": 1}, critical=False, type_version=2)  # kept, skipped: not misplaced
    assert state(b.export())["head"]["seq"] == 4
    p = forkable()
    c = child(p, 4)
    c.lines[1] = canonical_bytes({**json.loads(c.lines[1]), "critical": False, "data": {}, "type_version": 2})
    assert err(export_child(c)) == ("invalid_transition", 5)


def test_unknown_critical_and_teams_events_refuse() -> None:
    b = idle_log()
    b.add("future", {}, critical=True)
    assert err(b.export()) == ("unsupported_critical_event", 4)
    b = idle_log()
    b.add("team_opened", {}, critical=True)
    assert err(b.export()) == ("unsupported_critical_event", 4)
    b = idle_log()
    b.add("compaction_requested", {}, critical=True)
    assert err(b.export()) == ("unsupported_critical_event", 4)
    b = idle_log()
    b.add("turn_completed", {"reason": "end_turn"}, type_version=2)
    assert err(b.export()) == ("unsupported_critical_event", 4)


def test_unknown_event_with_bad_envelope_is_invalid_line() -> None:
    b = idle_log()
    b.add("future", {}, critical=False, actor={"kind": "alien"})
    assert err(b.export()) == ("invalid_line", 4)


# ============================================================ rules 6-9
def test_rule_6_epoch_never_decreases_unknown_included() -> None:
    b = LogBuilder()
    started(b)
    b.add("future", {}, critical=False, epoch=3)
    b.add("user_input", {"source": "api", "text": "x"}, actor=USER, epoch=2)
    assert err(b.export()) == ("invalid_transition", 3)


def test_rule_7_tool_result_needs_pending_call() -> None:
    b = idle_log()
    result(b, "nope")
    assert err(b.export()) == ("invalid_transition", 4)
    b = idle_log()
    tool_call(b, "c1")
    result(b, "c1")
    result(b, "c1")
    assert err(b.export()) == ("invalid_transition", 7)


def test_rule_7_tool_result_late_needs_deferred() -> None:
    b = idle_log()
    tool_call(b, "c1")
    result(b, "c1")
    late(b, "c1")
    assert err(b.export()) == ("invalid_transition", 7)
    b = idle_log()
    late(b, "c9")
    assert err(b.export()) == ("invalid_transition", 4)
    b = idle_log()
    tool_call(b, "c1")
    result(b, "c1", origin="deferred")
    late(b, "c1")
    late(b, "c1")  # the rule asks only for an earlier deferred result
    s = state(b.export())
    assert s["pending_calls"] == []


def test_rule_8_effect_begin_authorization() -> None:
    ch = "0192c000-0000-7000-8000-000000000001"

    def base(decision: str) -> LogBuilder:
        b = LogBuilder()
        started(b, [TOOL])
        turn(b)
        tool_call(b, "c1", decision=decision)
        return b

    b = base("deny")
    b.add("effect_begin", {"attempt": 1, "call_id": "c1"})
    assert err(b.export()) == ("invalid_transition", 5)
    b = base("ask")
    b.add("approval_requested", {"args_hash": "a" * 64, "call_id": "c1", "challenge_id": ch, "expires_at": 9})
    b.add("approval_denied", {"args_hash": "a" * 64, "call_id": "c1", "challenge_id": ch}, actor=APPROVER)
    b.add("effect_begin", {"attempt": 1, "call_id": "c1"})
    assert err(b.export()) == ("invalid_transition", 7)
    b = base("ask")
    b.add("approval_requested", {"args_hash": "a" * 64, "call_id": "c1", "challenge_id": ch, "expires_at": 9})
    b.add("effect_begin", {"attempt": 1, "call_id": "c1"})  # not yet consumed
    assert err(b.export()) == ("invalid_transition", 6)
    b = base("ask")
    b.add("approval_requested", {"args_hash": "a" * 64, "call_id": "c1", "challenge_id": ch, "expires_at": 9})
    b.add("approval_granted", {"args_hash": "a" * 64, "call_id": "c1", "challenge_id": ch}, actor=APPROVER)
    b.add("effect_begin", {"attempt": 1, "call_id": "c1"})
    ok(b.export())
    b = LogBuilder()
    started(b, [TOOL])
    turn(b)
    b.add("effect_begin", {"attempt": 1, "call_id": "c1"})  # no call at all
    assert err(b.export()) == ("invalid_transition", 3)


def test_rule_8_barrier_only_after_the_call() -> None:
    b = LogBuilder()
    started(b, [TOOL])
    turn(b)
    b.add("cancel_requested", {"scope": "turn"}, actor=USER)
    b.add("turn_completed", {"reason": "cancelled"})
    turn(b)
    tool_call(b, "c1")  # after the barrier: fine
    b.add("effect_begin", {"attempt": 1, "call_id": "c1"})
    fold = ok(b.export()).fold
    assert fold.last_cancel_seq < fold.calls["c1"].seq
    assert fold.effects[f"{B}:c1"]["status"] == "begun" and fold.open_effects == 1


def test_rule_8_read_only_calls_write_no_effect_events() -> None:
    for kind, data in [
        ("effect_begin", {"attempt": 1, "call_id": "c1"}),
        ("effect_commit", {"call_id": "c1", "result_ref": ref()}),
        ("effect_unknown", {"call_id": "c1", "reason": "timeout"}),
        ("effect_resolved", {"by": "adapter", "call_id": "c1", "outcome": "not_sent"}),
    ]:
        b = idle_log()
        tool_call(b, "c1", name="read")
        b.add(kind, data)
        assert err(b.export()) == ("invalid_transition", 6), kind


def test_rule_8_undeclared_tool_is_unguarded() -> None:
    b = idle_log()
    tool_call(b, "c1", name="mystery")
    b.add("effect_begin", {"attempt": 1, "call_id": "c1"})
    assert state(b.export())["effects"] == [{"effect_key": f"{B}:c1", "call_id": "c1", "status": "begun"}]


def test_effect_settlement_without_a_call_is_not_refused() -> None:
    # No rule asks for a tool_call before effect_commit/unknown/resolved (inferred key).
    b = idle_log()
    b.add("effect_commit", {"call_id": "x1", "result_ref": ref()})
    assert state(b.export())["effects"] == [{"effect_key": f"{B}:x1", "call_id": "x1", "status": "committed"}]


def test_rule_9_uniqueness() -> None:
    b = idle_log()
    tool_call(b, "c1")
    tool_call(b, "c1")
    assert err(b.export()) == ("invalid_transition", 6)

    def delivery(b: LogBuilder, key: str) -> None:
        b.add(
            "channel_delivery",
            {
                "channel": "slack",
                "conversation": "C",
                "delivery_id": "d",
                "installation": "I",
                "item_key": key,
                "text": "t",
            },
            actor={"kind": "channel", "principal": ALICE},
        )

    b = idle_log()
    delivery(b, "k1")
    delivery(b, "k2")
    delivery(b, "k1")
    assert err(b.export()) == ("invalid_transition", 6)

    def fired(b: LogBuilder, occ: str) -> None:
        b.add(
            "schedule_fired",
            {"occurrence_id": occ, "schedule_id": "s", "scheduled_for": 1, "timezone": "UTC"},
            actor={"kind": "scheduler"},
        )

    b = idle_log()
    fired(b, "o1")
    fired(b, "o1")
    assert err(b.export()) == ("invalid_transition", 5)


def test_rule_9_approval_consumed_once() -> None:
    ch = "0192c000-0000-7000-8000-000000000001"
    b = LogBuilder()
    started(b, [TOOL])
    turn(b)
    tool_call(b, "c1", decision="ask")
    b.add("approval_requested", {"args_hash": "a" * 64, "call_id": "c1", "challenge_id": ch, "expires_at": 9})
    b.add("approval_granted", {"args_hash": "a" * 64, "call_id": "c1", "challenge_id": ch}, actor=APPROVER)
    b.add("approval_denied", {"args_hash": "a" * 64, "call_id": "c1", "challenge_id": ch}, actor=APPROVER)
    assert err(b.export()) == ("invalid_transition", 7)


# ============================================================ rules 10-13
def compaction_base() -> LogBuilder:
    b = LogBuilder()
    started(b, [TOOL])
    turn(b)  # 2
    r = request(b)  # 3
    response(b, r)  # 4
    done(b)  # 5
    return b


def compacted(b: LogBuilder, lo: int, hi: int, **extra: Any) -> None:
    b.add(
        "compacted",
        {
            "from_event_id": eid(lo),
            "from_seq": lo,
            "summary_ref": ref("s", "text/plain"),
            "to_event_id": eid(hi),
            "to_seq": hi,
            **extra,
        },
    )


def test_rule_10_edges_are_step_boundaries() -> None:
    b = compaction_base()
    compacted(b, 2, 5)
    ok(b.export())
    b = compaction_base()
    compacted(b, 2, 3)  # the attempt at 3 awaits its response after 3
    assert err(b.export()) == ("invalid_transition", 6)
    b = compaction_base()
    compacted(b, 4, 5)  # before 4 the attempt still awaits
    assert err(b.export()) == ("invalid_transition", 6)
    b = compaction_base()
    turn(b)  # 6
    tool_call(b, "c1")  # 7, 8
    result(b, "c1")  # 9
    compacted(b, 2, 7)  # splits the tool pair
    assert err(b.export()) == ("invalid_transition", 10)
    b = compaction_base()
    compacted(b, 2, 6)  # the range reaches the compacted event itself
    assert err(b.export()) == ("invalid_transition", 6)


def test_rule_10_ranges_nest_but_never_partly_overlap() -> None:
    b = compaction_base()
    turn(b)  # 6
    done(b)  # 7
    compacted(b, 2, 5)  # 8
    compacted(b, 1, 7)  # nests 2..5
    ok(b.export())
    b = compaction_base()
    turn(b)
    done(b)
    compacted(b, 2, 5)
    compacted(b, 5, 7)  # partly overlaps 2..5
    assert err(b.export()) == ("invalid_transition", 9)


def test_rule_10_summary_is_the_summary_response_text() -> None:
    def log(summary: bytes) -> LogBuilder:
        b = compaction_base()
        r = request(b, purpose="compaction")  # 6
        response(b, r, text="Summary.")  # 7
        ref_ = {"bytes": len(summary), "media_type": "text/plain", "sha256": sha256_hex(summary)}
        b.add(
            "compacted",
            {
                "from_event_id": eid(2),
                "from_seq": 2,
                "summary_ref": ref_,
                "summary_request_event_id": r,
                "to_event_id": eid(5),
                "to_seq": 5,
            },
        )
        return b

    ok(log(b"Summary.").export())
    assert err(log(b"Other.").export()) == ("invalid_transition", 8)


def test_rule_11_cancelled_only_with_settled_effects() -> None:
    b = LogBuilder()
    started(b, [TOOL])
    turn(b)
    tool_call(b, "c1")
    b.add("effect_begin", {"attempt": 1, "call_id": "c1"})
    b.add("effect_unknown", {"call_id": "c1", "reason": "timeout"})
    b.add("cancel_requested", {"scope": "turn"}, actor=USER)
    b.add("cancelled", {"request_event_id": eid(7)})
    assert err(b.export()) == ("invalid_transition", 8)
    b.lines.pop()
    b.seq, b.n, b.prev = 7, 7, sha256_hex(b.lines[-1])
    b.add("effect_resolved", {"by": "human", "call_id": "c1", "outcome": "assume_done"})
    b.add("cancelled", {"request_event_id": eid(7)})
    ok(b.export())


def test_rule_12_turns() -> None:
    b = LogBuilder()
    started(b)
    b.add("steer", {"source": "api", "text": "x"}, actor=USER)  # not a rule violation
    turn(b)
    b.add("steer", {"source": "api", "text": "y"}, actor=USER)
    done(b)
    turn(b)
    assert state(b.export())["status"] == "in_turn"
    turn(b)
    assert err(b.export()) == ("invalid_transition", 7)


def test_rule_13_approval_mismatch_and_unknown_challenge() -> None:
    ch = "0192c000-0000-7000-8000-000000000001"
    other = "0192c000-0000-7000-8000-000000000002"
    for data in [
        {"args_hash": "a" * 64, "call_id": "c2", "challenge_id": ch},
        {"args_hash": "b" * 64, "call_id": "c1", "challenge_id": ch},
        {"args_hash": "a" * 64, "call_id": "c1", "challenge_id": other},
    ]:
        for kind in ("approval_granted", "approval_denied"):
            b = LogBuilder()
            started(b, [TOOL])
            turn(b)
            tool_call(b, "c1", decision="ask")
            b.add(
                "approval_requested",
                {"args_hash": "a" * 64, "call_id": "c1", "challenge_id": ch, "expires_at": 9},
            )
            b.add(kind, data, actor=APPROVER)
            assert err(b.export()) == ("approval_mismatch", 6), (kind, data)


# ============================================================ rule 16 (fork) and C4
def test_rule_16_fork_must_sit_at_an_eligible_snapshot() -> None:
    p = idle_log()
    assert err(export_child(child(p, 3))) == ("no_snapshot_boundary", 4)
    p = LogBuilder()
    started(p, [TOOL])
    turn(p)
    snapshot(p)  # inside an open turn
    assert err(export_child(child(p, 3))) == ("no_snapshot_boundary", 4)
    # repair forks need no snapshot
    assert state(export_child(child(idle_log(), 3, reason="repair")))["status"] == "inspection_only"


@pytest.mark.parametrize(
    ("setup", "quiet"),
    [
        ("pending", False),
        ("parked", False),
        ("begun", False),
        ("unknown", False),
        ("committed", True),
        ("resolved", True),
        ("awaiting", True),  # an attempt awaiting its response is not a C4 condition (outside a turn)
    ],
)
def test_c4_quiescence_conditions(setup: str, quiet: bool) -> None:
    b = LogBuilder()
    started(b, [TOOL])
    turn(b)
    tool_call(b, "c1")
    if setup in ("begun", "unknown", "committed", "resolved"):
        b.add("effect_begin", {"attempt": 1, "call_id": "c1"})
        if setup == "unknown":
            b.add("effect_unknown", {"call_id": "c1", "reason": "timeout"})
        if setup == "committed":
            b.add("effect_commit", {"call_id": "c1", "result_ref": ref()})
        if setup == "resolved":
            b.add("effect_unknown", {"call_id": "c1", "reason": "timeout"})
            b.add("effect_resolved", {"by": "human", "call_id": "c1", "outcome": "assume_done"})
    if setup != "pending":
        result(b, "c1")
    done(b)
    if setup == "parked":
        park(b, "resource", "r1", "awaiting_resource")
    if setup == "awaiting":
        request(b)
    snapshot(b)
    s = state(b.export())
    assert (s["fork_points"] == [{"seq": b.seq, "snapshot_event_id": eid(b.n)}]) is quiet


def test_rule_16_expiry_judged_at_fork_time() -> None:
    p = idle_log()
    snapshot(p, expires=5000)  # seq 4
    # fork written at time 4000 < 5000: valid, even though clock.now is past the expiry
    s = state(export_child(child(p, 4, time=4000)), now=NOW)
    assert s["fork_points"] == []  # expired now
    assert err(export_child(child(p, 4, time=5000))) == ("snapshot_expired", 5)


def test_fork_point_now() -> None:
    p = idle_log()
    snapshot(p, expires=5000)
    imp = ok(p.export(), now=4999)
    hashes = {ln.seq: ln.hash for ln in imp.segments[0].lines}
    assert fork_point(imp.fold, hashes, eid(4), now=4999).seq == 4
    with pytest.raises(LogError) as info:
        fork_point(imp.fold, hashes, eid(4), now=5000)
    assert (info.value.code, info.value.seq) == ("snapshot_expired", 4)
    with pytest.raises(LogError) as info:
        fork_point(imp.fold, hashes, eid(3), now=0)
    assert (info.value.code, info.value.seq) == ("no_snapshot_boundary", 3)


# ============================================================ rules 17-30
def test_rule_17_tools_hash() -> None:
    b = idle_log()
    b.add("tools_changed", {"tools": [TOOL], "tools_hash": canonical_hash([TOOL])})
    tool_call(b, "c1")
    b.add("effect_begin", {"attempt": 1, "call_id": "c1"})
    fold = ok(b.export()).fold
    assert fold.tools == {TOOL["name"]: TOOL}  # the changed set replaces the pinned one
    assert fold.calls["c1"].effect_class == TOOL["effect_class"]
    assert fold.effects[f"{B}:c1"]["status"] == "begun"
    bad = idle_log()
    bad.add("tools_changed", {"tools": [TOOL], "tools_hash": canonical_hash([RO_TOOL])})
    assert err(bad.export()) == ("invalid_transition", bad.seq)


def settings(model: str = "m") -> dict[str, Any]:
    return {
        "reason": "user",
        "settings": {
            "adapter": {"name": "scripted", "settings": {}, "version": "1"},
            "model": {"name": model, "provider": "p"},
            "model_params": {},
            "reasoning_carryover": "keep",
        },
    }


def test_rule_18_settings_changed() -> None:
    b = idle_log()
    request(b)
    b.add("settings_changed", settings(), actor=USER)
    assert err(b.export()) == ("invalid_transition", 5)
    b = idle_log()
    r = request(b)
    b.add(
        "model_attempt_abandoned",
        {"provider_outcome": "not_sent", "reason": "timeout", "request_event_id": r},
    )
    b.add("settings_changed", settings(), actor=USER)
    ok(b.export())
    model = {
        "context_window": 1000,
        "input_billing_bound": "none",
        "max_output_tokens": 10,
        "name": "m",
        "provider": "p",
    }
    b = LogBuilder()
    started(b, policy={"models": [model]})
    b.add("settings_changed", settings("m"), actor=USER)
    b.add("settings_changed", settings("other"), actor=USER)
    assert err(b.export()) == ("invalid_transition", 3)


def test_rule_19_context_edited() -> None:
    def log(text: str, edit: dict[str, Any], with_result: bool = True) -> bytes:
        b = idle_log()
        tool_call(b, "c1", name="read")
        if with_result:
            result(b, "c1", preview=text)
        b.add("context_edited", {"edits": [{"call_id": "c1", **edit}], "reason": "manual"})
        return b.export()

    clear = {"action": "clear"}
    assert err(log("x", clear, with_result=False)) == ("invalid_transition", 6)
    ok(log("x", clear))
    # spans are UTF-8 byte offsets: "é" is bytes 0..2
    assert ok(log("éa", {"action": "redact", "part": 0, "spans": [{"end": 2, "start": 0}]}))
    assert err(log("éa", {"action": "redact", "part": 0, "spans": [{"end": 1, "start": 0}]})) == (
        "invalid_transition",
        7,
    )
    assert err(log("éa", {"action": "redact", "part": 0, "spans": [{"end": 4, "start": 2}]})) == (
        "invalid_transition",
        7,
    )
    assert err(log("éa", {"action": "redact", "part": 1, "spans": [{"end": 1, "start": 0}]})) == (
        "invalid_transition",
        7,
    )


def test_rule_19_redact_part_must_be_text() -> None:
    b = idle_log()
    tool_call(b, "c1", name="read")
    b.add(
        "tool_result",
        {
            "call_id": "c1",
            "completeness": "complete",
            "content": [
                {"text": "ab", "type": "text"},
                {"source": {"ref": ref("i", "image/png"), "type": "artifact"}, "type": "image"},
            ],
            "is_error": False,
            "origin": "executed",
            "preview": "ab",
        },
    )
    b.add(
        "context_edited",
        {
            "edits": [{"action": "redact", "call_id": "c1", "part": 1, "spans": [{"end": 1, "start": 0}]}],
            "reason": "manual",
        },
    )
    code = err(b.export())
    assert code in {("invalid_transition", 7), ("invalid_line", 6)}  # image part shape is not ours to pin


def test_rule_20_output_validated() -> None:
    schema = {"type": "object"}
    output = {"max_retries": 1, "mode": "native", "schema": schema, "schema_sha256": canonical_hash(schema)}

    def log(value: Any, digest: str | None = None) -> bytes:
        b = LogBuilder()
        started(b, policy={"output": output})
        b.add(
            "output_validated",
            {
                "outcome": "accepted",
                "schema_sha256": digest or output["schema_sha256"],
                "source_event_id": eid(1),
                "value": value,
            },
        )
        return b.export()

    ok(log({"a": 1}))
    assert err(log([1])) == ("invalid_transition", 2)
    assert err(log({"a": 1}, "0" * 64)) == ("invalid_transition", 2)


def budget(b: LogBuilder) -> None:
    b.add(
        "budget_exceeded",
        {
            "limit": "max_model_requests",
            "limit_value": 1,
            "observed": 1,
            "observed_is_upper_bound": False,
            "scope": "run",
        },
    )


def test_rule_21_no_request_after_budget_exceeded_until_new_input() -> None:
    b = LogBuilder()
    started(b)
    turn(b)
    budget(b)
    request(b)
    assert err(b.export()) == ("invalid_transition", 4)
    b = LogBuilder()
    started(b)
    turn(b)
    budget(b)
    b.add("turn_completed", {"reason": "budget_exhausted"})
    turn(b)
    request(b)
    ok(b.export())


def test_rule_22_one_agent_finished_per_child() -> None:
    kid = "0192a000-0000-7000-8000-0000000000c1"
    usage = {"input_tokens": 1, "output_tokens": 1}

    def spawned(b: LogBuilder) -> None:
        b.add(
            "agent_spawned",
            {
                "agent_name": "w",
                "call_id": "c1",
                "child_thread_id": kid,
                "isolation": "none",
                "mode": "foreground",
            },
        )

    b = idle_log()
    b.add("agent_finished", {"child_thread_id": kid, "status": "completed", "usage": usage})
    assert err(b.export()) == ("invalid_transition", 4)
    b = idle_log()
    spawned(b)
    b.add("agent_finished", {"child_thread_id": kid, "status": "completed", "usage": usage})
    b.add("agent_finished", {"child_thread_id": kid, "status": "failed", "usage": usage})
    assert err(b.export()) == ("invalid_transition", 6)


def test_rule_23_team_tasks_and_messages() -> None:
    def created(b: LogBuilder, task: str, blocked: list[str] | None = None) -> None:
        b.add("team_task_created", {"blocked_by": blocked or [], "subject": "s", "task_id": task})

    b = idle_log()
    b.add("team_task_claimed", {"member": "m", "task_id": "t1"})
    assert err(b.export()) == ("invalid_transition", 4)
    b = idle_log()
    created(b, "t1")
    created(b, "t2", ["t1"])
    b.add("team_task_claimed", {"member": "m", "task_id": "t2"})
    assert err(b.export()) == ("invalid_transition", 6)
    b = idle_log()
    created(b, "t1")
    created(b, "t2", ["t1"])
    b.add("team_task_claimed", {"member": "m", "task_id": "t1"})
    b.add("team_task_claimed", {"member": "n", "task_id": "t1"})
    assert err(b.export()) == ("invalid_transition", 7)
    b = idle_log()
    created(b, "t1")
    created(b, "t2", ["t1"])
    b.add("team_task_claimed", {"member": "m", "task_id": "t1"})
    b.add("team_task_updated", {"status": "released", "task_id": "t1"})
    b.add("team_task_claimed", {"member": "n", "task_id": "t1"})
    b.add("team_task_updated", {"status": "completed", "task_id": "t1"})
    b.add("team_task_claimed", {"member": "m", "task_id": "t2"})
    ok(b.export())
    b = idle_log()
    created(b, "t1")
    b.add("team_task_updated", {"status": "completed", "task_id": "t1"})
    assert err(b.export()) == ("invalid_transition", 5)
    b = idle_log()
    b.add("team_message", {"from": "a", "message_id": "m1", "text": "t", "to": "b"})
    b.add("team_message", {"from": "a", "message_id": "m1", "text": "t", "to": "c"})
    assert err(b.export()) == ("invalid_transition", 5)


def test_rule_24_todo_ids_unique() -> None:
    b = idle_log()
    todos = [
        {"content": "a", "id": "1", "status": "pending"},
        {"content": "b", "id": "1", "status": "pending"},
    ]
    b.add("todos_updated", {"call_id": "c1", "todos": todos})
    assert err(b.export()) == ("invalid_transition", 4)


def ask_log(options: list[str] | None = None, multi: bool = False, parked: bool = True) -> LogBuilder:
    b = LogBuilder()
    started(b, [ASK_TOOL])
    turn(b)
    inp: dict[str, Any] = {"question": "Which?"}
    if options is not None:
        inp["options"] = options
    if multi:
        inp["multi_select"] = True
    tool_call(b, "q1", name="ask_user", **inp)  # 3, 4
    if parked:
        park(b, "input", "q1")  # 5
    return b


def test_rule_25_answer_needs_open_question() -> None:
    b = ask_log(parked=False)
    result(b, "q1", origin="answered", actor=USER)
    assert err(b.export()) == ("invalid_transition", 5)
    b = ask_log()
    resume(b, "input", "q1")
    result(b, "q1", origin="answered", actor=USER)
    assert err(b.export()) == ("invalid_transition", 7)
    b = ask_log()
    park(b, "input", "other")
    result(b, "q1", origin="answered", actor=USER, preview="free text")
    ok(b.export())


def test_rule_25_options() -> None:
    b = ask_log(["red", "blue"])
    result(b, "q1", origin="answered", actor=USER, preview="green")
    assert err(b.export()) == ("invalid_transition", 6)
    b = ask_log(["red", "blue"])
    result(b, "q1", origin="answered", actor=USER, preview="blue")
    ok(b.export())
    b = ask_log(["red", "blue"], multi=True)
    result(b, "q1", origin="answered", actor=USER, preview="blue\nred")
    ok(b.export())
    b = ask_log(["red", "blue"], multi=True)
    result(b, "q1", origin="answered", actor=USER, preview="blue\nblue")
    assert err(b.export()) == ("invalid_transition", 6)


def test_ask_user_matching_rule_trim_and_casefold() -> None:
    # §ask_user: an answer matches an option after trimming whitespace and case-folding both
    b = ask_log(["Red", "Blue"])
    result(b, "q1", origin="answered", actor=USER, preview=" blue ")
    ok(b.export())
    b = ask_log(["Red", "Blue"], multi=True)
    result(b, "q1", origin="answered", actor=USER, preview="BLUE\nred")
    ok(b.export())
    b = ask_log(["Red", "Blue"], multi=True)
    result(b, "q1", origin="answered", actor=USER, preview="blue\nBlue")  # one option twice
    assert err(b.export()) == ("invalid_transition", 6)


def test_ask_user_park_on_ambiguous_options_is_invalid() -> None:
    # options equal under the matching rule make the call invalid: a park on it is refused
    b = ask_log(["Yes", " yes "])
    assert err(b.export()) == ("invalid_transition", 5)
    b = ask_log(["Yes", "YES"], parked=False)
    result(b, "q1", origin="not_executed")  # the worker's close (an error result): fine
    ok(b.export())


def test_rule_26_nothing_after_handoff() -> None:
    for kind in ("user_input", "steer", "model_request"):
        b = LogBuilder()
        started(b)
        turn(b)
        b.add("handoff", {"call_id": "c1", "forwarded": "none", "to_agent": "x", "to_thread_id": T2})
        if kind == "model_request":
            request(b)
        else:
            if kind == "user_input":
                done(b)
            b.add(kind, {"source": "api", "text": "x"}, actor=USER)
        assert err(b.export()) == ("invalid_transition", b.seq), kind


PERMS = {
    "allow": [],
    "allow_bypass": False,
    "ask": [],
    "deny": [],
    "mode": "plan",
    "plan_exit_mode": "default",
    "protected_paths": [],
}


def test_rule_27_mode_changed() -> None:
    b = LogBuilder()
    started(b, policy={"permissions": PERMS})
    b.add("mode_changed", {"from": "plan", "to": "default"}, actor=USER)
    b.add("mode_changed", {"from": "default", "to": "accept_edits"}, actor=USER)
    ok(b.export())
    b.add("mode_changed", {"from": "default", "to": "plan"}, actor=USER)
    assert err(b.export()) == ("invalid_transition", 4)
    b = LogBuilder()
    started(b, policy={"permissions": PERMS})
    b.add("mode_changed", {"from": "plan", "to": "bypass"}, actor=USER)
    assert err(b.export()) == ("invalid_transition", 2)
    b = LogBuilder()
    started(b, policy={"permissions": {**PERMS, "allow_bypass": True}})
    b.add("mode_changed", {"from": "plan", "to": "bypass"}, actor=USER)
    ok(b.export())


def test_rule_28_event_id_unique() -> None:
    b = idle_log()
    b.add("turn_completed", {"reason": "end_turn"}, event_id=eid(2))
    assert err(b.export()) == ("invalid_transition", 4)


def style(b: LogBuilder, actor: dict[str, Any], text: str = "Be terse.", **over: Any) -> None:
    data = {"origin": {"id": "terse"}, "source": "output_style", "text": text, "trust": "trusted_instruction"}
    data.update(over)
    b.add("injected", data, actor=actor)


def test_rule_29_output_style_needs_a_policy_style() -> None:
    # policy has no output_styles (the Policy schema has none): every output_style injection fails
    b = idle_log()
    style(b, USER)
    assert err(b.export()) == ("invalid_transition", 4)
    b = idle_log()
    b.add(
        "injected",
        {
            "origin": {"id": "terse"},
            "ref": ref("t", "text/plain"),
            "source": "output_style",
            "trust": "trusted_instruction",
        },
        actor=USER,
    )
    assert err(b.export()) == ("invalid_transition", 4)


def test_rule_29_actor_and_timing() -> None:
    from threads_aws.core.fold import Fold

    def fold_with_style() -> Fold:
        f = Fold()
        f.policy = {"output_styles": {"terse": "Be terse."}}
        return f

    def ev(seq: int, type_: str, data: dict[str, Any], actor: dict[str, Any]) -> dict[str, Any]:
        return {
            "seq": seq,
            "thread_id": T,
            "branch_id": B,
            "epoch": 1,
            "event_id": eid(seq),
            "type": type_,
            "data": data,
            "actor": actor,
        }

    sty = {
        "origin": {"id": "terse"},
        "source": "output_style",
        "text": "Be terse.",
        "trust": "trusted_instruction",
    }
    f = fold_with_style()
    f.apply(ev(1, "injected", sty, USER))  # user, no open turn
    with pytest.raises(LogError):
        fold_with_style().apply(ev(1, "injected", sty, {"kind": "host"}))  # host, no compacted
    with pytest.raises(LogError):
        fold_with_style().apply(ev(1, "injected", {**sty, "trust": "untrusted_reference"}, USER))
    with pytest.raises(LogError):
        fold_with_style().apply(ev(1, "injected", {**sty, "text": "Other."}, USER))
    # user during an open turn
    f = fold_with_style()
    f.apply(ev(1, "user_input", {"source": "api", "text": "x"}, USER))
    with pytest.raises(LogError):
        f.apply(ev(2, "injected", sty, USER))
    # host right after a compacted whose range held the latest style (unknown events skipped)
    f = fold_with_style()
    f.apply(ev(1, "injected", sty, USER))
    f.apply(ev(2, "compacted", {"from_seq": 1, "to_seq": 1}, {"kind": "host"}))
    f.apply(ev(3, "future", {}, {"kind": "host"}), known=False)
    f.apply(ev(4, "injected", sty, {"kind": "host"}))
    # ... but not when the range missed the latest style
    f = fold_with_style()
    f.apply(ev(1, "heartbeat", {"running_call_ids": []}, {"kind": "host"}))
    f.apply(ev(2, "injected", sty, USER))
    f.apply(ev(3, "compacted", {"from_seq": 1, "to_seq": 1}, {"kind": "host"}))
    with pytest.raises(LogError):
        f.apply(ev(4, "injected", sty, {"kind": "host"}))


# ============================================================ ReducedState
def test_status_precedence() -> None:
    # repair > cancelled > parked > in_turn > idle
    b = LogBuilder()
    started(b)
    turn(b)
    assert state(b.export())["status"] == "in_turn"
    park(b, "resource", "r1", "awaiting_resource")
    assert state(b.export())["status"] == "parked"
    b.add("cancel_requested", {"scope": "thread"}, actor=USER)
    b.add("cancelled", {"request_event_id": eid(b.n)})
    assert state(b.export())["status"] == "cancelled"
    b.add("snapshot", snapshot_data())
    c = child(b, b.seq, reason="repair")
    assert state(export_child(c))["status"] == "inspection_only"


def test_turn_scoped_cancel_is_not_cancelled_status() -> None:
    b = LogBuilder()
    started(b)
    turn(b)
    b.add("cancel_requested", {"scope": "turn"}, actor=USER)
    b.add("cancelled", {"request_event_id": eid(3)})
    b.add("turn_completed", {"reason": "cancelled"})
    s = state(b.export())
    assert s["status"] == "idle" and s["turns_completed"] == 1


def test_child_status_uses_its_own_fork_only() -> None:
    p = LogBuilder()
    started(p)
    c = child(p, 1, reason="repair")
    snapshot(c)  # seq 3
    g = LogBuilder(B3)
    g.seq, g.n = 3, c.n + 100
    g.add(
        "fork",
        {
            "at_hash": c.prev,
            "knowledge_policy": "pinned",
            "parent_branch_id": B2,
            "reason": "snapshot",
            "sandbox_id": "s3",
        },
        epoch=3,
    )
    data = export_child(c, head=False) + b"\n".join(g.lines) + b"\n" + head_line(B3, 4, g.prev) + b"\n"
    assert state(data)["status"] == "idle"


def test_pending_calls_parked_and_effects_order() -> None:
    b = LogBuilder()
    started(b, [TOOL])
    turn(b)
    tool_call(b, "a")  # 3,4
    tool_call(b, "b")  # 5,6
    tool_call(b, "c", decision=None)  # 7
    b.add("effect_begin", {"attempt": 1, "call_id": "b"})  # 8
    b.add("effect_begin", {"attempt": 1, "call_id": "a"})  # 9
    b.add("effect_commit", {"call_id": "b", "result_ref": ref()})
    b.add("effect_unknown", {"call_id": "a", "reason": "timeout"})
    park(b, "effect", f"{B}:a", "effect_unknown")
    park(b, "input", "c")
    resume(b, "effect", f"{B}:a")
    park(b, "effect", f"{B}:a", "effect_unknown")  # re-opened: now last
    result(b, "b", origin="deferred")
    s = state(b.export())
    assert s["pending_calls"] == ["a", "c"]
    assert s["effects"] == [
        {"effect_key": f"{B}:b", "call_id": "b", "status": "committed"},
        {"effect_key": f"{B}:a", "call_id": "a", "status": "unknown"},
    ]
    assert s["parked"] == [{"kind": "input", "id": "c"}, {"kind": "effect", "id": f"{B}:a"}]
    assert s["status"] == "parked"


def test_effect_key_uses_the_tool_call_branch() -> None:
    p = LogBuilder()
    started(p, [TOOL])
    turn(p)
    tool_call(p, "c1")
    p.add("effect_begin", {"attempt": 1, "call_id": "c1"})
    p.add("effect_commit", {"call_id": "c1", "result_ref": ref()})
    result(p, "c1")
    done(p)
    snapshot(p)  # 9
    c = child(p, 9)
    assert state(export_child(c))["effects"] == [
        {"effect_key": f"{B}:c1", "call_id": "c1", "status": "committed"}
    ]


def test_fork_points_respect_clock_now() -> None:
    b = idle_log()
    snapshot(b, expires=5000)  # 4
    snapshot(b)  # 5
    assert [p["seq"] for p in state(b.export(), now=4999)["fork_points"]] == [4, 5]
    assert [p["seq"] for p in state(b.export(), now=5000)["fork_points"]] == [5]


def test_usage_known_sums_unknown_count_and_overflow() -> None:
    max_int = (1 << 53) - 1
    b = LogBuilder()
    started(b)
    turn(b)
    for usage in [(10, 5), (None, 7), (3, None), (None, None), (max_int, 1), (1, 1)]:
        r = request(b)
        response(b, r, usage)
    u = state(b.export())["usage"]
    # (max_int, 1) would overflow the input sum: it adds neither and counts as unknown
    assert u == {"input_tokens": 14, "output_tokens": 13, "unknown_responses": 4}


def test_usage_counts_recovered_responses() -> None:
    b = LogBuilder()
    started(b)
    turn(b)
    r = request(b)
    b.add(
        "model_response_recovered",
        {
            "completeness": "complete",
            "content": [],
            "provider_request_id": "pr",
            "request_event_id": r,
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 4, "output_tokens": 2},
        },
        actor={"kind": "model"},
    )
    assert state(b.export())["usage"] == {"input_tokens": 4, "output_tokens": 2, "unknown_responses": 0}


def test_epoch_is_last_event_line_unknown_included() -> None:
    b = idle_log()
    b.add("future", {}, critical=False, epoch=7)
    assert state(b.export())["epoch"] == 7
