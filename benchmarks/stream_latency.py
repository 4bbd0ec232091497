# ruff: noqa: E501  (report lines)
"""The live run stream, measured through `threads-aws dev` (in process: moto, the gateway with
the authorizer, the stream route on the same ASGI app as in Lambda, the SQS-fed worker):

1. committed-event latency: a client holds a run's stream (`?through_parks=true` on a parked
   run); another client appends `mode_changed` through `POST …/mode` at random moments; latency
   = the event's arrival on the stream − the POST's answer (the append had committed by then).
   Two phases: `active` (appends 0.2–0.8 s apart: the stream polls every STREAM_POLL_MS) and
   `idle` (3.2–4 s apart: past STREAM_ACTIVE_MS, it polls every STREAM_IDLE_POLL_MS);
2. delta latency: demo runs whose model streams a word every THREADS_DEMO_DELTA_MS (25 ms); for
   each word, its arrival in a delta message − the moment the model handed it to `on_delta`
   (the publisher's ≤ 100 ms coalescing, the row write, the poll, the HTTP hop);
3. what one connected minute costs: the stream's own AWS requests (those made on its thread),
   idle (the parked run) and active (a run streaming deltas the whole time), scaled to 60 s and
   priced (DynamoDB on-demand reads; the function's GB-seconds at 256 MB arm64, the API Gateway
   request and the two Lambda invocations of a connection, spread over its 15 minutes);
4. what 1,000 deltas cost: the publisher's row writes during (2)/(3) (WRU by DynamoDB's item
   size rules), and the extra read unit per poll the stream spends on the row.

Prices: benchmarks/cost.py (us-east-1 list prices). moto answers in ~1-5 ms where DynamoDB
answers in ~3-8 ms in region: the latency figures are local figures.

Usage: python benchmarks/stream_latency.py [--samples N] [--runs N] [--quiet S]
The last line: `stream latency p95: <ms> ms (active <ms>, idle <ms>); delta p95: <ms> ms`.
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import os
import random
import statistics
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from cost import PRICE  # noqa: E402
from step_cost import item_size  # noqa: E402

TOKEN = "dev:api:local:alice"
MEMORY_GB = 256 / 1024  # RunStreamFunction's MemorySize
CONNECTION_S = 890  # a connection lasts up to the function's 900 s less the margin


class Stream:
    """A client holding one run's stream on a thread: every message with its arrival time."""

    def __init__(self, port: int, thread_id: str, run_id: str, query: str = "") -> None:
        self.msgs: list[tuple[float, dict[str, Any]]] = []
        self.cond = threading.Condition()
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        path = f"/v1/threads/{thread_id}/runs/{run_id}/events" + (f"?{query}" if query else "")
        self.conn.request("GET", path, headers={"Authorization": f"Bearer {TOKEN}"})
        self.resp = self.conn.getresponse()
        assert self.resp.status == 200, self.resp.read()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            while line := self.resp.readline():
                if line.startswith(b"data: "):
                    at = time.monotonic()
                    with self.cond:
                        self.msgs.append((at, json.loads(line[6:])))
                        self.cond.notify_all()
        except (OSError, ValueError, AttributeError):  # closed under the reader
            pass

    def wait_for(self, pred: Any, timeout: float = 30) -> tuple[float, dict[str, Any]]:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for at, m in self.msgs:
                    if pred(m):
                        return at, m
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("no such message on the stream")
                self.cond.wait(left)

    def close(self) -> None:
        self.conn.close()


def call(port: int, method: str, path: str, body: Any = None, key: bool = False) -> Any:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    if key:
        headers["Idempotency-Key"] = str(uuid.uuid4())
    conn.request(method, path, json.dumps(body) if body is not None else None, headers)
    resp = conn.getresponse()
    out = json.loads(resp.read() or b"null")
    assert resp.status < 300, (resp.status, out)
    return out


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, math.ceil(p / 100 * len(xs)) - 1))]


def summary(name: str, xs: list[float]) -> str:
    return (
        f"{name:<28} n={len(xs):<4} p50 {pct(xs, 50):6.0f} ms  p95 {pct(xs, 95):6.0f} ms  "
        f"max {max(xs):6.0f} ms  mean {statistics.fmean(xs):6.0f} ms"
    )


# ---------------------------------------------------------------- AWS requests by thread


class Counting:
    """Counts DynamoDB requests by the thread that made them, with the read and write units
    (strongly consistent reads: ceil(size / 4 KB) per item, at least 1, a BatchGetItem key found
    or not; a Query rounds the sum of its items once; a PutItem ceil(size / 1 KB))."""

    def __init__(self) -> None:
        self.calls: Counter[tuple[str, str]] = Counter()
        self.rru: Counter[str] = Counter()
        self.wru: Counter[str] = Counter()
        self.on = False

    def attach(self, client: Any) -> None:
        client.meta.events.register("provide-client-params.dynamodb", self.params)
        client.meta.events.register("after-call.dynamodb", self.after)

    @staticmethod
    def who() -> str:
        name = threading.current_thread().name
        return "stream" if name == "run-stream" else "deltas" if name == "deltas" else "other"

    def params(self, params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        if not self.on:
            return
        who = self.who()
        self.calls[(who, model.name)] += 1
        if model.name == "PutItem":
            self.wru[who] += max(1, math.ceil(item_size(params["Item"]) / 1024))
        if model.name == "BatchGetItem":
            context["_bench_keys"] = sum(len(v["Keys"]) for v in params["RequestItems"].values())

    def after(self, parsed: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        if not self.on:
            return
        who = self.who()
        if model.name == "BatchGetItem":
            items = [i for v in (parsed.get("Responses") or {}).values() for i in v]
            self.rru[who] += sum(max(1, math.ceil(item_size(i) / 4096)) for i in items)
            self.rru[who] += max(0, context.get("_bench_keys", len(items)) - len(items))
        elif model.name == "GetItem":
            self.rru[who] += max(1, math.ceil(item_size(parsed.get("Item")) / 4096))
        elif model.name == "Query":
            self.rru[who] += max(1, math.ceil(sum(item_size(i) for i in parsed.get("Items", [])) / 4096))


# ---------------------------------------------------------------- the demo model, timed


EMITTED: dict[str, list[tuple[int, int, float]]] = {}  # request id → (start, end, when) per word


def timed_demo() -> Any:
    from threads_aws.engine import demo_model, models

    class TimedDemo(demo_model.DemoModel):
        def complete(self, request: bytes, *, on_delta: Any = None, request_event_id: str, **kw: Any) -> Any:
            if on_delta is None:
                return super().complete(request, request_event_id=request_event_id, **kw)
            words = EMITTED.setdefault(request_event_id, [])
            pos = [0]

            def timed(kind: str, text: str) -> None:
                words.append((pos[0], pos[0] + len(text), time.monotonic()))
                pos[0] += len(text)
                on_delta(kind, text)

            return super().complete(request, on_delta=timed, request_event_id=request_event_id, **kw)

    models.register_adapter("demo", TimedDemo)


def delta_latencies(stream_msgs: list[tuple[float, dict[str, Any]]], rid: str) -> list[float]:
    """Per word: when the delta that completed it arrived − when the model emitted it."""
    arrivals: list[tuple[int, float]] = []  # (end offset covered, arrival)
    for at, m in stream_msgs:
        if m.get("kind") == "delta" and m["request_event_id"] == rid:
            arrivals.append((m["offset"] + len(m["text"]), at))
    out = []
    for _start, end, when in EMITTED.get(rid, []):
        hit = next((at for covered, at in arrivals if covered >= end), None)
        if hit is not None:
            out.append((hit - when) * 1000)
    return out


# ---------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=40, help="appends per phase (default 40)")
    ap.add_argument("--runs", type=int, default=4, help="demo runs for the delta latency (default 4)")
    ap.add_argument("--quiet", type=float, default=20.0, help="seconds of an idle connection counted (default 20)")
    args = ap.parse_args()
    os.environ["THREADS_DEMO_DELTA_MS"] = "25"
    os.environ["POWERTOOLS_METRICS_DISABLED"] = "true"  # no EMF lines on stdout
    timed_demo()
    from threads_aws import services
    from threads_aws_dev.local.dev import DevServer
    from threads_aws_dev.local.gateway import configure_logging

    configure_logging(verbose=False)
    server = DevServer(port=0, dev_tokens=True)
    server.start()
    port = server._server.server_address[1]
    counting = Counting()
    try:
        run = call(port, "POST", "/v1/runs", {"agent": "demo", "input": "note: buy milk"}, key=True)
        stream = Stream(port, run["thread_id"], run["run_id"], "through_parks=true")
        stream.wait_for(lambda m: m.get("event", {}).get("type") == "parked")
        ddb = services.current().ddb.client  # the stream's and the worker's client (one process)
        counting.attach(ddb)

        # 1. committed events
        results: dict[str, list[float]] = {}
        modes = ["accept_edits", "default"]
        idle_window: tuple[float, float] | None = None
        for phase, (lo, hi) in (("active", (0.2, 0.8)), ("idle", (3.2, 4.0))):
            lat = []
            if phase == "idle":  # first a quiet stretch: what an idle connection costs
                time.sleep(3.5)
                counting.on, t0 = True, time.monotonic()
                time.sleep(args.quiet)
                counting.on = False
                idle_window = (t0, time.monotonic())
            for i in range(args.samples if phase == "active" else max(8, args.samples // 3)):
                time.sleep(random.uniform(lo, hi))
                out = call(port, "POST", f"/v1/threads/{run['thread_id']}/mode", {"mode": modes[i % 2]})
                committed = time.monotonic()
                at, _ = stream.wait_for(lambda m, e=out["event_id"]: m.get("event", {}).get("event_id") == e)
                lat.append((at - committed) * 1000)
            results[phase] = lat
        stream.close()
        idle_calls = {k: v for k, v in counting.calls.items() if k[0] == "stream"}
        idle_rru = counting.rru["stream"]
        assert idle_window is not None
        idle_s = idle_window[1] - idle_window[0]

        # 2 + 3 + 4. deltas, an active minute
        counting.calls.clear(), counting.rru.clear(), counting.wru.clear()
        delta_lat: list[float] = []
        active_s = 0.0
        deltas_emitted = 0
        for k in range(args.runs):
            words = " ".join(f"w{j}" for j in range(240 if k else 600))  # the first: ~15 s of streaming
            r = call(port, "POST", "/v1/runs", {"agent": "demo", "input": words}, key=True)
            s = Stream(port, r["thread_id"], r["run_id"])
            s.wait_for(lambda m: m.get("kind") == "event" and m["event"]["type"] == "model_request")
            counting.on, t0 = True, time.monotonic()
            s.wait_for(lambda m: m.get("kind") == "result", timeout=120)
            counting.on = False
            active_s += time.monotonic() - t0
            rid = next(m["event"]["event_id"] for _, m in s.msgs if m.get("event", {}).get("type") == "model_request")
            delta_lat += delta_latencies(s.msgs, rid)
            deltas_emitted += len(EMITTED.get(rid, []))
            s.close()
        active_calls = {k: v for k, v in counting.calls.items() if k[0] == "stream"}
        active_rru = counting.rru["stream"]
        delta_writes = counting.calls[("deltas", "PutItem")]
        delta_wru = counting.wru["deltas"]
    finally:
        server.stop()

    print("committed event → connected client (POST …/mode answered → its event on the stream):")
    print("  " + summary("active (poll 100 ms)", results["active"]))
    print("  " + summary("idle (poll 200 ms)", results["idle"]))
    both = results["active"] + results["idle"]
    print("  " + summary("all", both))
    print("token delta → connected client (the model's on_delta → its delta message):")
    print("  " + summary("delta", delta_lat))

    def per_minute(calls: dict[tuple[str, str], int], seconds: float) -> dict[str, float]:
        return {op: n * 60 / seconds for (_, op), n in calls.items()}

    lam = 60 * MEMORY_GB * PRICE["lambda_gb_s_arm64"]
    per_conn = PRICE["apigw_rest_request"] + 2 * PRICE["lambda_request"]  # the stream + the authorizer
    conn_minute = per_conn * 60 / CONNECTION_S
    print("one connected minute (the stream's own AWS requests, scaled to 60 s):")
    for name, calls, rru, secs in (
        ("idle (parked run)", idle_calls, idle_rru, idle_s),
        ("active (deltas)", active_calls, active_rru, active_s),
    ):
        rpm = per_minute(calls, secs)
        rru_min = rru * 60 / secs
        ddb = rru_min * PRICE["dynamodb_rru"]
        total = ddb + lam + conn_minute
        ops = ", ".join(f"{op} {n:.0f}" for op, n in sorted(rpm.items()))
        print(
            f"  {name:<18} {sum(rpm.values()):5.0f} DynamoDB requests ({ops}), {rru_min:5.0f} RRU = ${ddb:.7f}; "
            f"Lambda 256 MB x 60 s = ${lam:.7f}; API Gateway + invocations ${conn_minute:.8f}; total ${total:.6f}/min"
        )
    per_k = 1000 / max(1, deltas_emitted)
    rru_for_rows = active_calls.get(("stream", "BatchGetItem"), 0)  # one row read per poll while in flight
    wru_k = delta_wru * per_k
    print(
        f"1,000 deltas (at {deltas_emitted / max(active_s, 1e-9):.0f} deltas/s, word-sized): "
        f"{delta_writes * per_k:.0f} row writes, {wru_k:.0f} WRU = ${wru_k * PRICE['dynamodb_wru']:.6f}; "
        f"the stream's row reads {rru_for_rows * per_k:.0f} RRU = ${rru_for_rows * per_k * PRICE['dynamodb_rru']:.7f} "
        f"per subscriber; total ${(wru_k * PRICE['dynamodb_wru'] + rru_for_rows * per_k * PRICE['dynamodb_rru']):.6f}"
    )
    print(
        f"stream latency p95: {pct(both, 95):.0f} ms (active {pct(results['active'], 95):.0f}, "
        f"idle {pct(results['idle'], 95):.0f}); delta p95: {pct(delta_lat, 95):.0f} ms"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
