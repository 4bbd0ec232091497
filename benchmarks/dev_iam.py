"""What running each function under its own IAM role (`local.iam`) costs `threads-aws dev`.

1. Start: `DevServer.start()` with and without `iam`, alternating, each in a fresh interpreter
   (moto's backends are per process), state in memory; also the SAM expansion cold (no cache)
   and cached, and the roles created during start (the pollers' functions).
2. Per request: the check in front of moto (map the request to its needs, evaluate the role's
   policies) for a TransactWriteItems of 3 items and a GetItem, in this process.
3. Per demo run: a run ("note: buy milk", parked on its approval) started over HTTP and
   followed to its park, with and without `iam`, after a warm-up run; the wall time from the
   POST to the park.

Usage: python benchmarks/dev_iam.py [--starts N] [--runs N]
Last line: `iam: start +<s> (median), check <µs> per request, run +<ms>` (with minus without).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, time, urllib.request, uuid
from threads_aws_dev.local.dev import DevServer

iam, runs = sys.argv[1] == "1", int(sys.argv[2])
t = time.perf_counter()
s = DevServer(port=0, state_dir=None, dev_tokens=True, iam=iam)
s.start()
started = time.perf_counter() - t
setup = s.local_iam.setup_s if s.local_iam else 0.0


def run_ms():
    h = {"Authorization": "Bearer dev:api:local:alice", "Content-Type": "application/json",
         "Idempotency-Key": str(uuid.uuid4())}
    body = json.dumps({"agent": "demo", "input": "note: buy milk"}).encode()
    t0 = time.perf_counter()
    req = urllib.request.Request(s.url + "/v1/runs", data=body, method="POST", headers=h)
    with urllib.request.urlopen(req, timeout=60) as r:
        run = json.loads(r.read())
    while True:
        q = urllib.request.Request(s.url + f"/v1/threads/{run['thread_id']}/approvals", headers=h)
        with urllib.request.urlopen(q, timeout=60) as r:
            if json.loads(r.read()):
                return (time.perf_counter() - t0) * 1000
        time.sleep(0.02)


times = [run_ms() for _ in range(runs + 1)][1:]  # the first warms every function up
s.stop()
print(json.dumps({"start_s": started, "setup_s": setup, "runs_ms": times}))
"""


def child(iam: bool, runs: int) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, "1" if iam else "0", str(runs)],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        env={k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
    )
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def expansion() -> tuple[float, float]:
    from threads_aws_dev.local import iam

    template = REPO / "template.yaml"
    with tempfile.TemporaryDirectory() as cache:
        os.environ["XDG_CACHE_HOME"] = cache
        t = time.perf_counter()
        iam.expand(template)
        cold = time.perf_counter() - t
        t = time.perf_counter()
        iam.expand(template)
        cached = time.perf_counter() - t
    os.environ.pop("XDG_CACHE_HOME")
    return cold, cached


def check_us(n: int = 2000) -> float:
    from threads_aws_dev.local.iam_authz import Mapper, Request, decide

    doc = {
        "Statement": [
            {
                "Effect": "Allow",
                "Action": [
                    "dynamodb:GetItem",
                    "dynamodb:PutItem",
                    "dynamodb:UpdateItem",
                    "dynamodb:ConditionCheckItem",
                ],
                "Resource": [
                    "arn:aws:dynamodb:us-east-1:123456789012:table/ev",
                    "arn:aws:dynamodb:us-east-1:123456789012:table/st",
                ],
            }
        ]
    }
    txn = {
        "TransactItems": [
            {"Put": {"TableName": "ev", "Item": {"pk": {"S": "B#1"}}}},
            {"Update": {"TableName": "st", "Key": {"pk": {"S": "H#1"}}}},
            {"ConditionCheck": {"TableName": "st", "Key": {"pk": {"S": "R#1"}}}},
        ]
    }
    reqs = [
        Request(
            "ASIA",
            "us-east-1",
            "dynamodb",
            "POST",
            "/",
            {},
            {"x-amz-target": f"DynamoDB_20120810.{op}"},
            json.dumps(b).encode(),
        )
        for op, b in (
            ("TransactWriteItems", txn),
            ("GetItem", {"TableName": "st", "Key": {"pk": {"S": "H#1"}}}),
        )
    ]
    mapper = Mapper("123456789012", {"ev": "pk", "st": "pk"})
    t = time.perf_counter()
    for i in range(n):
        for need in mapper.needs(reqs[i % 2]):
            assert decide([doc], need) == "Allow"
    return (time.perf_counter() - t) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--starts", type=int, default=3)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    cold, cached = expansion()
    print(f"SAM expansion: {cold:.2f} s cold (translator import + translate), {cached * 1000:.0f} ms cached")
    us = check_us()
    print(f"check in front of moto: {us:.0f} µs per request (TransactWriteItems of 3 / GetItem)")
    on: list[dict[str, float]] = []
    off: list[dict[str, float]] = []
    for _ in range(a.starts):
        off.append(child(False, a.runs))
        on.append(child(True, a.runs))
    s_on = statistics.median(x["start_s"] for x in on)
    s_off = statistics.median(x["start_s"] for x in off)
    setup = statistics.median(x["setup_s"] for x in on)
    r_on = statistics.median(t for x in on for t in x["runs_ms"])
    r_off = statistics.median(t for x in off for t in x["runs_ms"])
    print(f"dev start: {s_off:.2f} s without, {s_on:.2f} s with iam (of which roles created: {setup:.2f} s)")
    print(
        "  each:",
        " ".join(f"{x['start_s']:.2f}" for x in off),
        "|",
        " ".join(f"{x['start_s']:.2f}" for x in on),
    )
    print(
        f"demo run to its park: {r_off:.0f} ms without, {r_on:.0f} ms with iam (median of {len(on) * a.runs})"
    )
    print(
        f"iam: start {s_on - s_off:+.2f} s (median), check {us:.0f} µs per request, "
        f"run {r_on - r_off:+.0f} ms"
    )


if __name__ == "__main__":
    main()
