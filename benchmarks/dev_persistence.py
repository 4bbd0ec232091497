"""What `threads-aws dev`'s on-disk state costs per request, against `--ephemeral`.

1. Per AWS request: moto's server in this process, reached over loopback HTTP by boto3 as the
   dev server's handlers reach it, in three modes: ephemeral (moto as is), journal without
   fsync (survives kill -9, not a power cut) and journal with fsync (the default). Sequential
   calls of each kind (a write that is journaled, a read that only waits for the journal), then
   8 threads writing at once (the group commit shares one fdatasync among them).
2. Per demo run: `threads-aws dev --ephemeral` vs `--state-dir` as subprocesses; runs of the
   demo agent ("hello": one model turn, completed) started over HTTP and followed to their
   result; the journal's records and bytes per run; the restart's replay rate.

Usage: python benchmarks/dev_persistence.py [--requests N] [--runs N]
Last line: `overhead: <CPU µs>, <wall µs> per journaled write, <reads>, <demo run ms>` (the
journal with fsync minus ephemeral; wall figures move with the disk's fsync latency).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.update(
    AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1"
)
os.environ.pop("AWS_ENDPOINT_URL", None)

import boto3  # noqa: E402
from moto.moto_api._internal.models import moto_api_backend  # noqa: E402
from moto.server import ThreadedMotoServer  # noqa: E402
from threads_aws_dev.local.infra import create_resources, default_template_path  # noqa: E402
from threads_aws_dev.local.moto_patch import serialize_dynamodb, speed_up_moto_transactions  # noqa: E402
from threads_aws_dev.local.persist_moto import DurableMoto  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def _server(mode: str, tmp: Path) -> Any:
    if mode == "ephemeral":
        server: Any = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    else:
        server = DurableMoto(tmp / mode, fsync=mode == "journal+fsync")
    server.start()
    return server


class Mode:
    """One server and the calls to time against it."""

    def __init__(self, name: str, tmp: Path, index: int) -> None:
        self.server = _server(name, tmp)
        host, port = self.server.get_host_and_port()
        session = boto3.Session(region_name="us-east-1")
        c = {s: session.client(s, endpoint_url=f"http://{host}:{port}") for s in ("dynamodb", "s3", "sqs")}
        res = create_resources(default_template_path(), c, prefix=f"bench{index}")
        if name != "ephemeral":
            self.server.restore({v.rstrip("/").rsplit("/", 1)[-1] for v in res.physical.values()})
        ddb, s3, sqs = c["dynamodb"], c["s3"], c["sqs"]
        table, bucket, q = res.state_table, res.bucket, res.run_step_queue_url
        item = {"pk": {"S": "p"}, "sk": {"S": "0"}, "v": {"S": "x" * 300}}
        small, big = os.urandom(1024), os.urandom(64 * 1024)

        def put(i: int) -> None:
            ddb.put_item(TableName=table, Item={**item, "sk": {"S": str(i)}})

        def cond(i: int) -> None:
            ddb.update_item(
                TableName=table, Key={"pk": {"S": "c"}, "sk": {"S": "0"}},
                UpdateExpression="ADD n :one", ConditionExpression="attribute_not_exists(n) OR n >= :zero",
                ExpressionAttributeValues={":one": {"N": "1"}, ":zero": {"N": "0"}},
            )  # fmt: skip

        def transact(i: int) -> None:
            ddb.transact_write_items(TransactItems=[
                {"Put": {"TableName": table, "Item": {**item, "pk": {"S": "t"}, "sk": {"S": f"{i}.{j}"}}}}
                for j in range(3)
            ])  # fmt: skip

        def get(i: int) -> None:
            ddb.get_item(TableName=table, Key={"pk": {"S": "p"}, "sk": {"S": "0"}})

        def s3_put(body: bytes) -> Callable[[int], None]:
            def f(i: int) -> None:
                data = body + str(i).encode()
                key = "sha256/" + hashlib.sha256(data).hexdigest()
                s3.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")

            return f

        def send(i: int) -> None:
            dedup = uuid.uuid4().hex
            sqs.send_message(QueueUrl=q, MessageBody="{}", MessageGroupId="g", MessageDeduplicationId=dedup)

        def receive_delete(i: int) -> None:
            for m in sqs.receive_message(QueueUrl=q, MaxNumberOfMessages=1).get("Messages", []):
                sqs.delete_message(QueueUrl=q, ReceiptHandle=m["ReceiptHandle"])

        self.calls: dict[str, Callable[[int], Any]] = {
            "PutItem": put,
            "UpdateItem (conditional)": cond,
            "TransactWriteItems (3 puts)": transact,
            "GetItem": get,
            "PutObject 1 KiB": s3_put(small),
            "PutObject 64 KiB (blob)": s3_put(big),
            "SendMessage": send,
            "ReceiveMessage+DeleteMessage": receive_delete,
        }


def per_request(n: int) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """Median wall and CPU µs per call, modes interleaved call by call so load drift cancels."""
    logging_off()
    speed_up_moto_transactions()
    serialize_dynamodb()
    moto_api_backend.reset()
    wall: dict[str, dict[str, float]] = {}
    cpu: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as d:
        modes = {m: Mode(m, Path(d), i) for i, m in enumerate(("ephemeral", "journal", "journal+fsync"))}
        ops = list(modes["ephemeral"].calls)
        for op in ops:
            w: dict[str, list[float]] = {m: [] for m in modes}
            c: dict[str, list[float]] = {m: [] for m in modes}
            for i in range(-1, n):
                for m, mode in modes.items():
                    t, p = time.perf_counter(), time.process_time()
                    mode.calls[op](i)
                    if i >= 0:  # the first round warms up
                        w[m].append(time.perf_counter() - t)
                        c[m].append(time.process_time() - p)
            for m in modes:
                wall.setdefault(m, {})[op] = statistics.median(w[m]) * 1e6
                cpu.setdefault(m, {})[op] = statistics.median(c[m]) * 1e6
        for m, mode in modes.items():
            wall[m]["8 threads x PutItem (per call)"] = _parallel(mode.calls["PutItem"], n)
            cpu[m]["8 threads x PutItem (per call)"] = float("nan")
        for mode in modes.values():
            mode.server.stop()
    moto_api_backend.reset()
    return wall, cpu


def _parallel(fn: Callable[[int], Any], n: int, threads: int = 8) -> float:
    per = max(1, n // threads)
    start = threading.Barrier(threads + 1)

    def work(t: int) -> None:
        start.wait()
        for i in range(per):
            fn(100_000 + t * per + i)

    ts = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in ts:
        t.join()
    return (time.perf_counter() - t0) / (per * threads) * 1e6


def logging_off() -> None:
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)


# ---------------------------------------------------------------- whole demo runs


def _dev(args: list[str], cwd: Path) -> tuple[subprocess.Popen[str], str, str]:
    exe = Path(sys.executable).with_name("threads-aws")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "threads_aws_dev"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(SSE_POLL_MS="20")
    proc = subprocess.Popen(
        [*cmd, "dev", "--port", "0", "--dev-tokens", "--template", str(REPO / "template.yaml"), *args],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=cwd,
    )  # fmt: skip
    assert proc.stdout is not None
    lines = [proc.stdout.readline().strip()]
    while not lines[-1].startswith("state: "):
        lines.append(proc.stdout.readline().strip())
    return proc, lines[0].split(" ", 1)[1], lines[-1]


def _run(url: str) -> None:
    auth = {"Authorization": "Bearer dev:api:acme:bench"}
    hs = {**auth, "Content-Type": "application/json", "Idempotency-Key": uuid.uuid4().hex}
    body = json.dumps({"agent": "demo", "input": "hello"}).encode()
    with urllib.request.urlopen(
        urllib.request.Request(f"{url}/v1/runs", body, hs, method="POST"), timeout=30
    ) as r:
        run = json.loads(r.read())
    events = f"{url}/v1/threads/{run['thread_id']}/runs/{run['run_id']}/events"
    while True:
        req = urllib.request.Request(events, headers=auth)
        with urllib.request.urlopen(req, timeout=60) as r:
            if b'"kind":"result"' in r.read():
                return


def per_run(runs: int) -> dict[str, Any]:
    """Both servers up at once, runs alternating between them (load drift cancels)."""
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        modes = (("ephemeral", ["--ephemeral"]), ("journal+fsync", ["--state-dir", str(tmp / "s")]))
        servers = {m: _dev(args, tmp) for m, args in modes}
        samples: dict[str, list[float]] = {m: [] for m in servers}
        for i in range(-1, runs):
            for m, (_, url, _) in servers.items():
                t = time.perf_counter()
                _run(url)
                if i >= 0:
                    samples[m].append(time.perf_counter() - t)
        for m, (proc, _, _) in servers.items():
            proc.terminate()
            proc.wait(timeout=30)
            q = statistics.quantiles(samples[m], n=4)
            out[m] = (q[0] * 1e3, statistics.median(samples[m]) * 1e3, q[2] * 1e3)
        out["journal_bytes"] = (tmp / "s" / "journal-0.log").stat().st_size
        from threads_aws_dev.local.persist import StateDir

        state = StateDir(tmp / "s", fsync=False)
        state.open()
        out["records"] = sum(1 for _ in state.records())
        state.close()
        t = time.perf_counter()
        proc, _, line = _dev(["--state-dir", str(tmp / "s")], tmp)
        out["restart_s"] = time.perf_counter() - t
        out["restart_line"] = line
        proc.terminate()
        proc.wait(timeout=30)
        t = time.perf_counter()
        proc, _, _ = _dev(["--ephemeral"], tmp)
        out["start_ephemeral_s"] = time.perf_counter() - t
        proc.terminate()
        proc.wait(timeout=30)
    out["runs"] = runs + 1
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=100)
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    wall, cpu = per_request(args.requests)
    modes = list(wall)
    print(f"per AWS request over loopback HTTP, median of {args.requests} calls, modes interleaved")
    print("wall µs (8-thread row: wall µs per call with 8 writers at once)")
    print(f"{'request':32}" + "".join(f"{m:>15}" for m in modes) + f"{'overhead':>10}")
    for op in wall["ephemeral"]:
        cells = "".join(f"{wall[m][op]:15.0f}" for m in modes)
        print(f"{op:32}{cells}{wall['journal+fsync'][op] - wall['ephemeral'][op]:+10.0f}")
    print("CPU µs of this process (client + server), the journal's own work without the fsync wait")
    for op in cpu["ephemeral"]:
        if op.startswith("8 threads"):
            continue
        cells = "".join(f"{cpu[m][op]:15.0f}" for m in modes)
        print(f"{op:32}{cells}{cpu['journal+fsync'][op] - cpu['ephemeral'][op]:+10.0f}")
    writes = [op for op in wall["ephemeral"] if op not in ("GetItem",) and not op.startswith("8 threads")]
    d_wall = statistics.median(wall["journal+fsync"][op] - wall["ephemeral"][op] for op in writes)
    d_cpu = statistics.median(cpu["journal+fsync"][op] - cpu["ephemeral"][op] for op in writes)
    d_read = wall["journal+fsync"]["GetItem"] - wall["ephemeral"]["GetItem"]
    r = per_run(args.runs)
    print()
    print(f"per demo run ('hello': POST /v1/runs, SSE to the result), ms over {args.runs} runs, alternating:")
    for m in ("ephemeral", "journal+fsync"):
        q1, med, q3 = r[m]
        print(f"  {m:14} median {med:7.1f}   (quartiles {q1:.1f} .. {q3:.1f}: mostly poll intervals)")
    per_kib = r["journal_bytes"] / r["runs"] / 1024
    print(f"  journal: {r['records'] / r['runs']:.1f} records, {per_kib:.1f} KiB per run")
    print(
        f"  start to ready: ephemeral {r['start_ephemeral_s']:.2f}s; "
        f"with {r['records']} records {r['restart_s']:.2f}s"
    )
    print(f"  ({r['restart_line']})")
    print(
        f"overhead: {d_cpu:+.0f} µs CPU, {d_wall:+.0f} µs wall per journaled write (median over kinds); "
        f"reads {d_read:+.0f} µs; demo run {r['journal+fsync'][1] - r['ephemeral'][1]:+.0f} ms"
    )


if __name__ == "__main__":
    main()
