# ruff: noqa: E501  (benchmark report lines)
"""Benchmark: verifying a branch export vs the bare parse-and-hash floor.

Builds a realistic 10,000-event export (one `thread_started`, then turns shaped like the
conformance case reduce-simple-run: user_input, model_request, model_response(tool_use),
tool_call, permission_decision, tool_result, model_request, model_response(text),
turn_completed), chained by prev_hash, framed by a header and a Head checkpoint, every line
RFC 8785 bytes.

Then times R interleaved pairs of runs, in CPU time (`time.process_time`: on a machine shared
with other processes it is far less disturbed by their load than wall time):
- ours:  `importer.import_log(data)` + `reduced_state.reduce(fold, head_hash)` (the ReducedState);
- floor: `json.loads(line)` + `hashlib.sha256(line).hexdigest()` for the same lines.

Usage: python benchmarks/log_verify.py [--events N] [--runs R] [--profile | --breakdown]
`--breakdown` prints the CPU time per line of each primitive of the import instead.
The last line printed is `ratio: <ours / floor>` (lines/s over lines/s, 3 decimals): the ratio
of the best (least disturbed) times; the line before it gives the spread of the per-pair ratios.
Run it several times and take the median when comparing.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import statistics
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


def timed(fn: Any, arg: Any) -> float:
    """CPU seconds of one call: on a machine shared with other processes, CPU time is far less
    disturbed by their load than wall time (which counts the time this process waits for a core)."""
    t0 = time.process_time()
    fn(arg)
    return time.process_time() - t0


def pairs(data: bytes, lines: list[bytes], runs: int) -> tuple[list[float], list[float]]:
    """`runs` interleaved (ours, floor) timings: each pair runs under nearly the same load, so
    the ratio of a pair is robust even when the load changes between pairs."""
    t_ours, t_floor = [], []
    for _ in range(runs):
        t_ours.append(timed(ours, data))
        t_floor.append(timed(floor, lines))
    return t_ours, t_floor


def breakdown(data: bytes, lines: list[bytes], runs: int) -> None:
    """CPU microseconds per line of each primitive of the import, each timed alone over all
    lines (best of `runs`); "glue" is what the whole import costs beyond their sum."""
    import orjson
    from threads_aws.core import _validators as v
    from threads_aws.core import canonical
    from threads_aws.core.fold import Fold
    from threads_aws.core.lines import StoredLine

    fast = orjson.OPT_SORT_KEYS | orjson.OPT_STRICT_INTEGER
    values = [orjson.loads(x) for x in lines]
    events = values[1:-1]
    validators = [v.EVENT_VALIDATORS[e["type"]] for e in events]

    def split(_: Any) -> None:
        data.split(b"\n")

    def prescan(_: Any) -> None:
        for x in lines:
            x.count(b"[") + x.count(b"{") <= 64 and (x.isascii() or max(x) < 0xF0)

    def loads(_: Any) -> None:
        for x in lines:
            orjson.loads(x)

    def dumps_eq(_: Any) -> None:
        for x, val in zip(lines, values, strict=True):
            assert orjson.dumps(val, option=fast) == x

    def float_check(_: Any) -> None:
        dot, minus, plus = canonical._DOT_DIGIT, canonical._EXP_MINUS, canonical._EXP_PLUS
        for x in lines:
            dot(x) is None and minus(x) is None and plus(x) is None

    def schema(_: Any) -> None:
        for fn, e in zip(validators, events, strict=True):
            fn(e)

    def fold(_: Any) -> None:
        f = Fold()
        f.begin_segment(events[0]["thread_id"], events[0]["branch_id"])
        for e in events:
            f.apply(e)

    def sha(_: Any) -> None:
        for x in lines:
            hashlib.sha256(x).hexdigest()

    def stored(_: Any) -> None:  # as Importer.feed builds it
        new = tuple.__new__
        for x, e in zip(lines[1:-1], events, strict=True):
            new(StoredLine, (e["seq"], x, "", e["event_id"], e["type"], e["epoch"], e["critical"], e))

    imp = importer.import_log(data)
    head = imp.segments[-1].last.hash

    def reduce_only(_: Any) -> None:
        reduce(imp.fold, head)

    def whole(_: Any) -> None:
        importer.import_log(data)

    n = len(lines)
    parts = [
        ("split lines", split),
        ("bracket count + non-BMP prescan", prescan),
        ("orjson.loads", loads),
        ("orjson.dumps (sorted) == raw", dumps_eq),
        ("float token searches", float_check),
        ("schema validators", schema),
        ("Fold.apply", fold),
        ("sha256 hexdigest", sha),
        ("StoredLine", stored),
    ]
    gc_on = gc.isenabled()
    gc.disable()  # as import_log does
    try:
        cost = {name: min(timed(fn, None) for _ in range(runs)) * 1e6 / n for name, fn in parts}
        total = min(timed(whole, None) for _ in range(runs)) * 1e6 / n
        red = min(timed(reduce_only, None) for _ in range(runs)) * 1e6 / n
    finally:
        if gc_on:
            gc.enable()
    for name, us in cost.items():
        print(f"  {name:<34} {us:6.2f} us/line")
    print(f"  {'glue (import_log - sum above)':<34} {total - sum(cost.values()):6.2f} us/line")
    print(f"  {'= import_log':<34} {total:6.2f} us/line")
    print(f"  {'reduce (once, per line)':<34} {red:6.2f} us/line")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=EVENTS)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--profile", action="store_true", help="cProfile one import+reduce, print top functions")
    ap.add_argument("--breakdown", action="store_true", help="CPU time per line of each primitive, then exit")
    args = ap.parse_args()

    data, lines, _ = generate(args.events)
    n = len(lines)
    state = ours(data)  # warm-up, and a sanity check of the generated log
    assert state["turns_completed"] == (args.events - 1) // 9 and state["status"] == "idle", state["status"]
    if args.breakdown:
        breakdown(data, lines, args.runs)
        return
    if args.profile:
        import cProfile
        import pstats

        pr = cProfile.Profile()
        pr.enable()
        ours(data)
        pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(25)

    t_ours, t_floor = pairs(data, lines, args.runs)
    ratios = sorted(f / o for o, f in zip(t_ours, t_floor, strict=True))  # lines/s over lines/s
    best_o, best_f = min(t_ours), min(t_floor)
    print(
        f"lines: {n} ({args.events} events + header + head), {len(data)} bytes, {args.runs} interleaved runs, CPU time"
    )
    print(
        f"ours  (import_log + reduce): {n / best_o:,.0f} lines/s best ({best_o * 1e6 / n:.1f} us/line; median {statistics.median(t_ours) * 1e6 / n:.1f})"
    )
    print(
        f"floor (json.loads + sha256 hexdigest): {n / best_f:,.0f} lines/s best ({best_f * 1e6 / n:.1f} us/line; median {statistics.median(t_floor) * 1e6 / n:.1f})"
    )
    print(
        f"ratio per pair: median {statistics.median(ratios):.3f}, min {ratios[0]:.3f}, max {ratios[-1]:.3f}"
    )
    print(f"ratio: {best_f / best_o:.3f}")


if __name__ == "__main__":
    main()
