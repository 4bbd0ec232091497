"""The pure log core: admission, import stages, fold rules, export, fork eligibility."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers.log import ALICE, B2, TOOL, B, LogBuilder, T, call, eid, snapshot_data, started, turn
from threads_aws.core.canonical import NotCanonical, admit, canonical_bytes
from threads_aws.core.errors import LogError
from threads_aws.core.fork_points import child_lines, fork_point
from threads_aws.core.importer import export_bytes, import_log
from threads_aws.core.lines import head_line


def err(data: bytes) -> tuple[str, int | None]:
    with pytest.raises(LogError) as info:
        import_log(data, now=10**13)
    return info.value.code, info.value.seq


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a":1e3}',
        b'{"a":1000.0}',
        b'{"a":-0}',
        b'{"b":1,"a":2}',
        b'{"a": 1}',
        b'{"a":"\\/"}',
        b'{"a":"\\u00E9"}',
        b'{"a":"\\ud800"}',
        b'{"a":1,"a":1}',
        b'{"a":9007199254740992}',
        b"[1]",
        b"\xff",
        b'{"a":"\\u0041"}',
    ],
)
def test_admission_refuses_noncanonical(raw: bytes) -> None:
    with pytest.raises(NotCanonical):
        admit(raw)


def test_admission_accepts_canonical_floats_and_unicode() -> None:
    for raw in [
        b'{"a":1.5}',
        b'{"a":1e+21}',
        b'{"a":"\xc3\xa9"}',
        b'{"a":"\\u001f"}',
        '{"\u20ac":1,"\U0001f600":2}'.encode(),
    ]:
        assert admit(raw) is not None
    deep = b'{"a":' + b"[" * 63 + b"]" * 63 + b"}"
    assert admit(deep)
    with pytest.raises(NotCanonical):
        admit(b'{"a":' + b"[" * 64 + b"]" * 64 + b"}")


def test_supplementary_key_order_is_utf16() -> None:
    # U+1F600 sorts before U+FF21 in UTF-16 code units, after it in code points.
    good = canonical_bytes({"\U0001f600": 1, "\uff21": 2})
    assert admit(good)
    assert good.index("\U0001f600".encode()) < good.index("\uff21".encode())


def test_round_trip_and_export_bytes() -> None:
    b = LogBuilder()
    started(b)
    turn(b)
    b.add("turn_completed", {"reason": "end_turn"})
    data = b.export()
    imp = import_log(data)
    assert imp.head_verified and imp.fold.status() == "idle" and imp.fold.turns_completed == 1
    last = imp.segments[-1].last
    assert export_bytes(imp.segments, head_line(B, last.seq, last.hash)) == data
    assert imp.committed_bytes == len(data) - len(head_line(B, last.seq, last.hash)) - 1


def test_torn_tail_dropped_and_head_unverified() -> None:
    b = LogBuilder()
    started(b)
    turn(b)
    data = b.export(head=False) + b'{"actor":'
    imp = import_log(data)
    assert not imp.head_verified and imp.torn == b'{"actor":' and imp.fold.head_seq == 2


def test_head_mismatch_names_checkpoint_seq() -> None:
    b = LogBuilder()
    started(b)
    turn(b)
    data = b"\n".join(b.lines) + b"\n" + head_line(B, 3, "0" * 64) + b"\n"
    assert err(data) == ("head_mismatch", 3)


def test_unknown_noncritical_is_kept_and_advances_head() -> None:
    b = LogBuilder()
    started(b)
    b.add("future_thing", {"x": 1}, critical=False)
    imp = import_log(b.export())
    assert imp.fold.head_seq == 2 and imp.fold.known == [True, False]
    b2 = LogBuilder()
    started(b2)
    b2.add("future_thing", {"x": 1}, critical=True)
    assert err(b2.export()) == ("unsupported_critical_event", 2)
    b3 = LogBuilder()
    started(b3)
    b3.add(
        "user_input",
        {"source": "api", "text": "x"},
        actor={"kind": "user", "principal": ALICE},
        type_version=2,
    )
    assert err(b3.export()) == ("unsupported_critical_event", 2)


def test_schema_errors_are_invalid_line_before_chain() -> None:
    b = LogBuilder()
    started(b)
    b.add("user_input", {"source": "api", "text": "x"})  # principal required
    assert err(b.export()) == ("invalid_line", 2)
    b = LogBuilder()
    started(b)
    b.add(
        "user_input",
        {"source": "api", "text": "x", "extra": 1},
        actor={"kind": "user", "principal": ALICE},
        prev_hash="0" * 64,
    )
    assert err(b.export()) == ("invalid_line", 2)


def test_rule_12_user_input_during_turn() -> None:
    b = LogBuilder()
    started(b)
    turn(b)
    turn(b)
    assert err(b.export()) == ("invalid_transition", 3)


def test_rule_8_effect_needs_allow_and_no_barrier() -> None:
    b = LogBuilder()
    started(b, [TOOL])
    turn(b)
    call(b, "c1", decision="ask")
    b.add("effect_begin", {"attempt": 1, "call_id": "c1"})
    assert err(b.export()) == ("invalid_transition", 5)
    b = LogBuilder()
    started(b, [TOOL])
    turn(b)
    call(b, "c1")
    b.add("cancel_requested", {"scope": "turn"}, actor={"kind": "user", "principal": ALICE})
    b.add("effect_begin", {"attempt": 1, "call_id": "c1"})
    assert err(b.export()) == ("invalid_transition", 6)


def test_rule_11_and_effects_reduce() -> None:
    b = LogBuilder()
    started(b, [TOOL])
    turn(b)
    call(b, "c1")
    b.add("effect_begin", {"attempt": 1, "call_id": "c1"})
    b.add("cancel_requested", {"scope": "thread"}, actor={"kind": "user", "principal": ALICE})
    b.add("cancelled", {"request_event_id": eid(6)})
    assert err(b.export()) == ("invalid_transition", 7)
    b = LogBuilder()
    started(b, [TOOL])
    turn(b)
    call(b, "c1")
    b.add("effect_begin", {"attempt": 1, "call_id": "c1"})
    b.add("effect_unknown", {"call_id": "c1", "reason": "timeout"})
    fold = import_log(b.export()).fold
    assert list(fold.effects.values()) == [{"effect_key": f"{B}:c1", "call_id": "c1", "status": "unknown"}]


def test_rule_13_approval_mismatch_and_duplicate() -> None:
    ch = "0192c000-0000-7000-8000-000000000001"
    b = LogBuilder()
    started(b, [TOOL])
    turn(b)
    call(b, "c1", decision="ask")
    b.add("approval_requested", {"args_hash": "a" * 64, "call_id": "c1", "challenge_id": ch, "expires_at": 9})
    b.add(
        "approval_granted",
        {"args_hash": "b" * 64, "call_id": "c1", "challenge_id": ch},
        actor={"kind": "approver", "principal": ALICE},
    )
    assert err(b.export()) == ("approval_mismatch", 6)


def test_rule_27_mode_from_must_match() -> None:
    b = LogBuilder()
    started(b)
    b.add("mode_changed", {"from": "plan", "to": "default"})
    assert err(b.export()) == ("invalid_transition", 2)


def test_rule_17_tools_hash() -> None:
    b = LogBuilder()
    started(b)
    b.add("tools_changed", {"tools": [TOOL], "tools_hash": "0" * 64})
    assert err(b.export()) == ("invalid_transition", 2)


def test_fork_points_and_child_segment_import() -> None:
    b = LogBuilder()
    started(b)
    turn(b)
    b.add("turn_completed", {"reason": "end_turn"})
    b.add("snapshot", snapshot_data())
    b.add("snapshot", snapshot_data(expires=5))
    imp = import_log(b.export(), now=10)
    assert [p["seq"] for p in imp.fold.fork_points()] == [4]
    hashes = {ln.seq: ln.hash for ln in imp.segments[0].lines}
    with pytest.raises(LogError) as info:
        fork_point(imp.fold, hashes, eid(5), now=10)
    assert (info.value.code, info.value.seq) == ("snapshot_expired", 5)
    with pytest.raises(LogError) as info:
        fork_point(imp.fold, hashes, eid(2), now=10)
    assert info.value.code == "no_snapshot_boundary"
    point = fork_point(imp.fold, hashes, eid(4), now=10)
    header, fork_ev = child_lines(
        thread_id=T, parent_branch_id=B, point=point, new_branch_id=B2, epoch=2, now=10, sandbox_id="s2"
    )
    parent_through = b"\n".join(b.lines[:5]) + b"\n"
    child = parent_through + header.raw + b"\n" + fork_ev.raw + b"\n" + head_line(B2, 5, fork_ev.hash) + b"\n"
    imp2 = import_log(child, now=10)
    assert imp2.branch_id == B2 and imp2.fold.head_seq == 5 and imp2.segments[1].fork_at_seq == 4
    # A tampered fork link is a prev_hash_mismatch at the fork's seq.
    bad = json.loads(fork_ev.raw)
    bad["data"]["at_hash"] = "1" * 64
    bad_raw = canonical_bytes(bad)
    tampered = parent_through + header.raw + b"\n" + bad_raw + b"\n"
    assert err(tampered) == ("prev_hash_mismatch", 5)


def test_validators_are_fresh() -> None:
    from threads_aws_dev import schema_gen

    assert schema_gen.OUT.read_text() == schema_gen.generate(), "run python -m threads_aws_dev.schema_gen"


def test_fast_path_agrees_with_rfc8785_on_fuzzed_values() -> None:
    """The orjson fast path must accept exactly the JCS bytes and refuse everything else."""
    import random

    import rfc8785

    rng = random.Random(8785)
    alphabet = 'ab"\\/\x00\x01\x1f\x7f é€\u2028\uffff\U0001f600 '

    def value(depth: int = 0) -> Any:
        r = rng.random()
        if depth > 3 or r < 0.35:
            return rng.choice(
                [
                    lambda: "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6))),
                    lambda: rng.randint(-(2**53) + 1, 2**53 - 1),
                    lambda: rng.choice([0.5, 1e21, 1e-7, 123.456, -2.0, 1e300]),
                    lambda: rng.choice([True, False, None]),
                ]
            )()
        if r < 0.7:
            return {
                "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 3))): value(depth + 1)
                for _ in range(rng.randint(0, 4))
            }
        return [value(depth + 1) for _ in range(rng.randint(0, 4))]

    for _ in range(3000):
        v = {"v": value()}
        good = rfc8785.dumps(v)
        assert admit(good) == json.loads(good)
        for bad in (
            json.dumps(v, ensure_ascii=False).encode(),
            json.dumps(v, sort_keys=True).encode(),
            json.dumps(v, sort_keys=True, separators=(",", ":")).encode(),
        ):
            if bad != good:
                with pytest.raises(NotCanonical):
                    admit(bad)


def test_unhashable_type_is_invalid_line() -> None:
    b = LogBuilder()
    started(b)
    b.add("x", {}, type=["user_input"])
    assert err(b.export()) == ("invalid_line", 2)
