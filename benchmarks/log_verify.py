# ruff: noqa: E501  (benchmark report lines)
"""Benchmark: verifying a branch export vs the bare parse-and-hash floor.

Builds a realistic 10,000-event export (one `thread_started`, then turns shaped like the
conformance case reduce-simple-run: user_input, model_request, model_response(tool_use),
tool_call, permission_decision, tool_result, model_request, model_response(text),
turn_completed), chained by prev_hash, framed by a header and a Head checkpoint, every line
RFC 8785 bytes.

Then measures, best of N runs:
- ours:  `importer.import_log(data)` + `reduce.reduce(fold, head_hash)` (the ReducedState);
- floor: `json.loads(line)` + `hashlib.sha256(line).hexdigest()` for the same lines.

Usage: python benchmarks/log_verify.py [--events N] [--runs R] [--profile]
The last line printed is `ratio: <ours / floor>` (lines/s over lines/s, 3 decimals).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from typing import Any

from threads_aws.core import importer
from threads_aws.core.canonical import canonical_bytes, new_uuid7, sha256_hex
from threads_aws.core.lines import head_line, header_line
from threads_aws.core.reduced_state import reduce

EVENTS = 10_000
START_MS = 1_790_000_000_000
TOOLS = [
    {
        "description": "Read a file from the sandbox workspace.",
        "effect_class": "read_only",
        "input_schema": {
            "additionalProperties": False,
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
            "type": "object",
        },
        "name": "read_file",
    }
]
HOST = {"kind": "host"}
USER = {"kind": "user", "principal": {"issuer": "api", "subject": "alice", "tenant": "acme"}}


def _fake_sha(label: str) -> str:
    return hashlib.sha256(label.encode()).hexdigest()


def turn_payloads(turn: int, ids: list[str]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(type, actor, data) of one turn. `ids` are the turn's 9 event ids, in order."""
    call_id = f"call_{turn}"
    path = f"docs/file_{turn}.md"
    prefix = {"bytes": 386, "sha256": _fake_sha("prefix")}
    return [
        ("user_input", USER, {"source": "api", "text": f"What is in {path}? (turn {turn})"}),
        (
            "model_request",
            HOST,
            {
                "attempt": 1,
                "declared_prefix": prefix,
                "request_ref": {
                    "bytes": 461 + turn,
                    "media_type": "application/x-ndjson",
                    "sha256": _fake_sha(f"req{turn}a"),
                },
            },
        ),
        (
            "model_response",
            {"kind": "model"},
            {
                "completeness": "complete",
                "content": [
                    {"call_id": call_id, "input": {"path": path}, "name": "read_file", "type": "tool_use"}
                ],
                "request_event_id": ids[1],
                "stop_reason": "tool_use",
                "usage": {"input_tokens": 120 + turn, "output_tokens": 18},
            },
        ),
        (
            "tool_call",
            HOST,
            {"call_id": call_id, "input": {"path": path}, "name": "read_file", "request_event_id": ids[1]},
        ),
        (
            "permission_decision",
            HOST,
            {"call_id": call_id, "decision": "allow", "rule_id": "bench_allow", "source": "policy"},
        ),
        (
            "tool_result",
            {"kind": "tool"},
            {
                "call_id": call_id,
                "completeness": "complete",
                "is_error": False,
                "origin": "executed",
                "preview": f"# file {turn}\nSome content of the file, a line or two long.\n",
            },
        ),
        (
            "model_request",
            HOST,
            {
                "attempt": 1,
                "declared_prefix": prefix,
                "request_ref": {
                    "bytes": 679 + turn,
                    "media_type": "application/x-ndjson",
                    "sha256": _fake_sha(f"req{turn}b"),
                },
            },
        ),
        (
            "model_response",
            {"kind": "model"},
            {
                "completeness": "complete",
                "content": [{"text": f"{path} contains one heading: file {turn}.", "type": "text"}],
                "request_event_id": ids[6],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 160 + turn, "output_tokens": 12},
            },
        ),
        ("turn_completed", HOST, {"reason": "end_turn"}),
    ]


def generate(n_events: int = EVENTS) -> tuple[bytes, list[bytes], list[dict[str, Any]]]:
    """(export bytes, every line without newline, the event dicts). n_events counts events only."""
    thread_id, branch_id = new_uuid7(), new_uuid7()
    header = header_line(thread_id, branch_id, START_MS)
    lines = [header]
    events: list[dict[str, Any]] = []
    prev = sha256_hex(header)

    def emit(type_: str, actor: dict[str, Any], data: dict[str, Any], event_id: str) -> None:
        nonlocal prev
        seq = len(events) + 1
        ev = {
            "actor": actor,
            "branch_id": branch_id,
            "critical": True,
            "data": data,
            "epoch": 1,
            "event_id": event_id,
            "prev_hash": prev,
            "seq": seq,
            "thread_id": thread_id,
            "time": START_MS + 1000 * seq,
            "type": type_,
            "type_version": 1,
        }
        raw = canonical_bytes(ev)
        lines.append(raw)
        events.append(ev)
        prev = sha256_hex(raw)

    emit(
        "thread_started",
        HOST,
        {
            "adapter": {"name": "scripted", "settings": {}, "version": "1"},
            "agent_name": "bench",
            "config_hash": _fake_sha("config"),
            "instructions": "You are a helpful agent.",
            "model": {"name": "scripted-1", "provider": "scripted"},
            "model_params": {"max_tokens": 1024},
            "sandbox_provider": "fake",
            "tools": TOOLS,
        },
        new_uuid7(),
    )
    turn = 0
    while len(events) < n_events:
        turn += 1
        ids = [new_uuid7() for _ in range(9)]
        for (type_, actor, data), eid in zip(turn_payloads(turn, ids), ids, strict=True):
            if len(events) >= n_events:
                break
            emit(type_, actor, data, eid)
    lines.append(head_line(branch_id, len(events), prev))
    return b"\n".join(lines) + b"\n", lines, events


def ours(data: bytes) -> Any:
    imp = importer.import_log(data)
    assert imp.head_verified
    return reduce(imp.fold, imp.segments[-1].last.hash)


def floor(lines: list[bytes]) -> None:
    loads, sha = json.loads, hashlib.sha256
    for line in lines:
        loads(line)
        sha(line).hexdigest()


def best_of(fn: Any, arg: Any, runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        fn(arg)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=EVENTS)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--profile", action="store_true", help="cProfile one import+reduce, print top functions")
    args = ap.parse_args()

    data, lines, _ = generate(args.events)
    n = len(lines)
    state = ours(data)  # warm-up, and a sanity check of the generated log
    assert state["turns_completed"] == (args.events - 1) // 9 and state["status"] == "idle", state["status"]
    if args.profile:
        import cProfile
        import pstats

        pr = cProfile.Profile()
        pr.enable()
        ours(data)
        pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(25)

    t_ours = best_of(ours, data, args.runs)
    t_floor = best_of(floor, lines, args.runs)
    ours_lps, floor_lps = n / t_ours, n / t_floor
    print(f"lines: {n} ({args.events} events + header + head), {len(data)} bytes, best of {args.runs}")
    print(f"ours  (import_log + reduce): {ours_lps:,.0f} lines/s  ({t_ours * 1000:.1f} ms)")
    print(f"floor (json.loads + sha256 hexdigest): {floor_lps:,.0f} lines/s  ({t_floor * 1000:.1f} ms)")
    print(f"ratio: {ours_lps / floor_lps:.3f}")


if __name__ == "__main__":
    main()
