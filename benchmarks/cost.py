# ruff: noqa: E501  (benchmark report lines)
"""US dollars per 1,000 agent steps of the demo agent, at AWS list prices (us-east-1).

What runs, in process against moto, as deployed (template.yaml's functions and queue):
1. the API: the Lambda authorizer (`host.runtime.authorize`, an API key looked up in the state
   table) and `POST /v1/runs {"agent": "demo", "input": "time"}` (`host.runtime.api`, the
   start_run handler's body) on a new thread: API Gateway request, two Lambda invocations, their
   DynamoDB calls, the SendMessage of the first step;
2. the worker: Lambda's SQS event source mapping emulated call for call (ReceiveMessage a batch,
   invoke `engine.queue.handle_batch`, DeleteMessageBatch what succeeded), until the queue is
   empty. The demo run: `time` -> tool call -> tool result -> final answer.
A step is one event the worker appends (as in step_cost.py). The run's start is not a step; its
cost is spread over the run's steps and shown on its own line.

Every AWS call is logged by step_cost.py's Meter (with its ItemSizer: every DynamoDB item read
or written, sized by DynamoDB's rules through a second, unmetered client), and priced:
- DynamoDB on demand: a write is ceil(size / 1 KB) WRU (size: the larger of the item before
  and after), a strongly consistent read ceil(size / 4 KB) RRU (half for eventually consistent;
  a Query rounds the sum of the items it read, once), at least 1 unit; reads are billed by the
  whole item even with a projection. In TransactWriteItems every item costs double, and a
  ConditionCheck is billed like a write of the checked item (my reading of the DynamoDB guide:
  the check takes part in the two-phase write); TransactGetItems doubles reads.
- Lambda: requests, and GB-seconds for the template's MemorySize and architecture. The billed
  duration of an invocation is modelled: our code's CPU time measured here (the invocation minus
  its emulated AWS calls and the metering), scaled to the function's CPU share (Lambda gives
  one vCPU per 1,769 MB), plus an assumed in-region latency per AWS call (LATENCY_MS, stated
  below: not measured here, moto's in-process latency says nothing about AWS's), rounded up to
  1 ms. Cold starts are left out: `cold_import.py` measures the init a new container adds.
- SQS (FIFO): every API call, one request per started 64 KB of payload; the event source
  mapping's ReceiveMessage and DeleteMessageBatch included. Its idle long polls (20 s each,
  per poller) are a fixed monthly cost, not per step, and not counted: five pollers would make
  about 650,000 requests a month, ~$0.32 at FIFO prices.
- S3: PUT/COPY/POST/LIST-class and GET-class requests; storage per month of retention is shown
  apart (it depends on how long artifacts are kept).
- API Gateway (REST): one request per run start.
Not included: model tokens (the demo model is offline), data transfer, CloudWatch logs and
metrics, X-Ray, free tiers.

Usage: python benchmarks/cost.py [--runs N] [--calls]   (--calls: every call of the last run,
with its items and units)
The last line printed is `total: $<x> per 1,000 steps`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from step_cost import Call, ItemSizer, Meter  # noqa: E402  (sets fake AWS credentials first)

# List prices, us-east-1, as of 2025-01 (from my knowledge of the AWS pricing pages, after
# DynamoDB's 2024-11-01 on-demand price cut; no live lookup: this machine reaches no AWS site).
PRICES_DATE = "2025-01"
PRICE = {
    "dynamodb_wru": 0.625 / 1e6,  # on-demand write request unit, Standard table class
    "dynamodb_rru": 0.125 / 1e6,  # on-demand read request unit
    "dynamodb_storage_gb_month": 0.25,
    "lambda_request": 0.20 / 1e6,
    "lambda_gb_s_arm64": 0.0000133334,  # first 7.5 billion GB-s per month
    "lambda_gb_s_x86_64": 0.0000166667,  # first 6 billion GB-s per month
    "sqs_fifo_request": 0.50 / 1e6,  # first 100 billion requests per month
    "sqs_standard_request": 0.40 / 1e6,
    "s3_put_request": 0.005 / 1000,  # PUT, COPY, POST, LIST
    "s3_get_request": 0.0004 / 1000,  # GET, SELECT and all other requests (DELETE is free)
    "s3_storage_gb_month": 0.023,  # S3 Standard, first 50 TB
    "apigw_rest_request": 3.50 / 1e6,  # first 333 million per month
}
# Assumed latency of each AWS call as seen from a Lambda in the same region (ms, typical p50):
# an assumption for the duration model, not a measurement.
LATENCY_MS = {
    ("dynamodb", "GetItem"): 4.0,
    ("dynamodb", "Query"): 6.0,
    ("dynamodb", "BatchGetItem"): 6.0,
    ("dynamodb", "PutItem"): 6.0,
    ("dynamodb", "UpdateItem"): 6.0,
    ("dynamodb", "DeleteItem"): 6.0,
    ("dynamodb", "BatchWriteItem"): 10.0,
    ("dynamodb", "TransactWriteItems"): 15.0,
    ("dynamodb", "TransactGetItems"): 8.0,
    ("s3", "PutObject"): 25.0,
    ("s3", "GetObject"): 15.0,
    ("s3", "HeadObject"): 10.0,
    ("sqs", "SendMessage"): 8.0,
}
DEFAULT_LATENCY_MS = {"dynamodb": 6.0, "s3": 20.0, "sqs": 8.0}
MB_PER_VCPU = 1769  # Lambda: a function with 1,769 MB has the equivalent of one vCPU
SQS_CHUNK = 64 * 1024
S3_PUT_CLASS = {
    "PutObject",
    "CopyObject",
    "PostObject",
    "ListObjects",
    "ListObjectsV2",
    "ListObjectVersions",
    "ListBuckets",
    "CreateMultipartUpload",
    "UploadPart",
    "UploadPartCopy",
    "CompleteMultipartUpload",
}
S3_FREE = {"DeleteObject", "DeleteObjects", "AbortMultipartUpload"}


# ------------------------------------------------------------------ request units
def dynamodb_units(call: Call) -> tuple[float, float]:
    """(WRU, RRU) of one DynamoDB call, from the items its sizer recorded."""
    wru = rru = 0.0
    for item in call.items:
        factor = 2 if item.transactional else 1
        if item.kind in ("write", "check"):
            wru += factor * max(1, math.ceil(item.bytes / 1024))
        else:
            units = max(1, math.ceil(item.bytes / 4096))
            rru += factor * (units if item.consistent else units / 2)
    return wru, rru


def sqs_payload(call: Call) -> int:
    """Payload bytes of an SQS call: the message bodies and attributes it sends or receives."""

    def attrs(a: dict[str, Any]) -> int:
        return sum(
            len(k) + len(v.get("DataType", "")) + len(v.get("StringValue") or v.get("BinaryValue") or b"")
            for k, v in a.items()
        )

    p, r = call.params, call.response
    size = len(p.get("MessageBody", "").encode()) + attrs(p.get("MessageAttributes") or {})
    for e in p.get("Entries") or []:
        size += len(e.get("MessageBody", "").encode()) + attrs(e.get("MessageAttributes") or {})
    for m in r.get("Messages") or []:
        size += len(m.get("Body", "").encode()) + attrs(m.get("MessageAttributes") or {})
    return size


def sqs_requests(call: Call) -> int:
    return max(1, math.ceil(sqs_payload(call) / SQS_CHUNK))


def latency_ms(call: Call) -> float:
    return LATENCY_MS.get((call.service, call.op), DEFAULT_LATENCY_MS.get(call.service, 10.0))


# ------------------------------------------------------------------ invocations
@dataclass
class Invocation:
    function: str  # logical id in template.yaml
    memory_mb: int
    arch: str
    wall: float  # seconds, measured here, metering excluded
    calls: list[Call]
    code_cpu: float  # CPU seconds of our code: the invocation minus its calls and the metering

    def billed_ms(self) -> int:
        scale = max(1.0, MB_PER_VCPU / self.memory_mb)
        return max(1, math.ceil(self.code_cpu * 1000 * scale + sum(latency_ms(c) for c in self.calls)))

    def gb_s(self) -> float:
        return self.billed_ms() / 1000 * self.memory_mb / 1024


class Recorder:
    """Times invocations against the meter's log."""

    def __init__(self, meter: Meter, functions: dict[str, tuple[int, str]]) -> None:
        self.meter = meter
        self.functions = functions
        self.invocations: list[Invocation] = []

    def invoke(self, function: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        m = self.meter
        start = len(m.log)
        w0, c0, ow0, oc0 = time.perf_counter(), time.thread_time(), m.overhead_wall, m.overhead_cpu
        try:
            return fn(*args, **kwargs)
        finally:
            wall = time.perf_counter() - w0 - (m.overhead_wall - ow0)
            cpu = time.thread_time() - c0 - (m.overhead_cpu - oc0)
            calls = m.log[start:]
            memory, arch = self.functions[function]
            self.invocations.append(
                Invocation(
                    function,
                    memory,
                    arch,
                    wall - sum(c.wall for c in calls),
                    calls,
                    max(0.0, cpu - sum(c.cpu for c in calls)),
                )
            )


def function_sizes(template: Path) -> dict[str, tuple[int, str]]:
    """logical id -> (MemorySize, architecture) of every function, Globals applied."""
    from threads_aws_dev.local.infra import load_template

    doc = load_template(template)
    glob = (doc.get("Globals") or {}).get("Function") or {}
    out = {}
    for lid, res in doc["Resources"].items():
        if res.get("Type") == "AWS::Serverless::Function":
            p = {**glob, **(res.get("Properties") or {})}
            out[lid] = (int(p.get("MemorySize") or 128), str((p.get("Architectures") or ["x86_64"])[0]))
    return out


# ------------------------------------------------------------------ one run
def api_event(name: str) -> dict[str, Any]:
    return json.loads((HERE.parent / "events" / f"{name}.json").read_text())


@dataclass
class RunLog:
    steps: int = 0
    start_calls: list[Call] = field(default_factory=list)  # the API side (authorizer + start_run)
    esm_calls: list[Call] = field(default_factory=list)  # the event source mapping's SQS calls
    api_requests: int = 0


def one_run(rec: Recorder, engine: Any, probe: Any, token: str, queue_url: str, sqs: Any) -> RunLog:
    """Authorize + POST /v1/runs on a new thread, then drain the step queue as Lambda's SQS
    event source would. Returns what the run cost in calls (the recorder keeps invocations).
    `probe` is an unmetered Writer, so counting steps warms no cache of the worker's."""
    from threads_aws.engine.queue import handle_batch
    from threads_aws.host import runtime
    from threads_aws_dev.local.pollers import queue_arn, sqs_record
    from threads_aws_dev.local.runtime import LambdaContext

    meter, out = rec.meter, RunLog()
    meter.on = True
    first = len(meter.log)
    auth_event = api_event("authorizer")
    auth_event["headers"]["Authorization"] = f"Bearer {token}"
    allowed = rec.invoke("AuthorizerFunction", runtime.authorize, auth_event)
    event = api_event("start_run")
    key = uuid.uuid4().hex
    event["headers"]["Idempotency-Key"] = key
    if "multiValueHeaders" in event:
        event["multiValueHeaders"]["Idempotency-Key"] = [key]
    event["requestContext"]["authorizer"] = {**allowed["context"], "principalId": allowed["principalId"]}
    resp = rec.invoke("StartRunFunction", runtime.api, event, "startRun")
    assert resp["statusCode"] == 202, resp
    out.api_requests = 1
    branch_id = json.loads(resp["body"])["branch_id"]
    start_head = probe.load(branch_id).head_seq
    out.start_calls = meter.log[first:]
    arn = queue_arn(queue_url, "us-east-1")
    while True:
        n = len(meter.log)
        got = sqs.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0, AttributeNames=["All"]
        )
        messages = got.get("Messages") or []
        if not messages:  # an idle poll: the mapping's fixed monthly cost, not this run's
            break
        out.esm_calls += meter.log[n:]
        ctx = LambdaContext(
            "RunStepFunction", "$LATEST", "arn", rec.functions["RunStepFunction"][0], uuid.uuid4().hex,
            "/aws/lambda/RunStepFunction", "bench", int(time.time() * 1000) + 300_000,
        )  # fmt: skip
        batch = {"Records": [sqs_record(m, arn, "us-east-1") for m in messages]}
        result = rec.invoke("RunStepFunction", handle_batch, batch, ctx, engine=engine)
        failed = {f["itemIdentifier"] for f in result.get("batchItemFailures", [])}
        assert not failed, result
        n = len(meter.log)
        sqs.delete_message_batch(
            QueueUrl=queue_url,
            Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)],
        )
        out.esm_calls += meter.log[n:]
    meter.on = False
    probe.forget(branch_id)
    out.steps = probe.load(branch_id).head_seq - start_head
    return out


# ------------------------------------------------------------------ pricing
@dataclass
class Bill:
    """Units and dollars of a set of invocations and calls."""

    units: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    usd: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))

    def add_calls(self, calls: list[Call], fifo: bool = True) -> None:
        for c in calls:
            if c.service == "dynamodb":
                wru, rru = dynamodb_units(c)
                self.units["DynamoDB WRU"] += wru
                self.units["DynamoDB RRU"] += rru
                self.usd["DynamoDB"] += wru * PRICE["dynamodb_wru"] + rru * PRICE["dynamodb_rru"]
            elif c.service == "sqs":
                n = sqs_requests(c)
                self.units["SQS requests"] += n
                self.usd["SQS"] += n * PRICE["sqs_fifo_request" if fifo else "sqs_standard_request"]
            elif c.service == "s3" and c.op not in S3_FREE:
                put = c.op in S3_PUT_CLASS
                self.units["S3 PUT-class" if put else "S3 GET-class"] += 1
                self.usd["S3"] += PRICE["s3_put_request" if put else "s3_get_request"]
                if c.op == "PutObject" and c.status < 300:
                    self.units["S3 bytes stored"] += body_size(c.params.get("Body", b""))

    def add_invocations(self, invs: list[Invocation]) -> None:
        for inv in invs:
            self.units["Lambda requests"] += 1
            self.units["Lambda GB-s"] += inv.gb_s()
            self.usd["Lambda"] += PRICE["lambda_request"] + inv.gb_s() * PRICE[f"lambda_gb_s_{inv.arch}"]
            self.add_calls(inv.calls)

    def add_api(self, requests: int) -> None:
        self.units["API Gateway requests"] += requests
        self.usd["API Gateway"] += requests * PRICE["apigw_rest_request"]

    def total(self) -> float:
        return sum(self.usd.values())


def body_size(body: Any) -> int:
    if isinstance(body, bytes | str):
        return len(body)
    if hasattr(body, "getbuffer"):  # botocore hands PutObject a file-like object
        return len(body.getbuffer())
    return 0


def event_bytes(calls: list[Call]) -> int:
    """Bytes the event rows written by these calls add to the tables (storage)."""
    return sum(i.bytes for c in calls if c.service == "dynamodb" for i in c.items if i.kind == "write")


# ------------------------------------------------------------------ main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="measured runs (after one warm-up run)")
    ap.add_argument("--calls", action="store_true", help="list every call of the last run with its units")
    args = ap.parse_args()

    import boto3
    from moto import mock_aws
    from threads_aws.engine.step import EngineContext
    from threads_aws.host import runtime
    from threads_aws.host.keys import ApiKeys
    from threads_aws.store import ArtifactStore, EventStore
    from threads_aws.store.api_keys import ApiKeyRows
    from threads_aws.writer import Writer
    from threads_aws_dev.local.infra import create_resources, default_template_path
    from threads_aws_dev.local.moto_patch import speed_up_moto_transactions

    template = default_template_path()
    functions = function_sizes(template)
    with mock_aws():
        speed_up_moto_transactions()
        session = boto3.session.Session()
        res = create_resources(template, session, prefix="cost")
        side = session.client("dynamodb")  # unmetered: sizes items, mints the key
        meter = Meter(ItemSizer(side))
        original_client = boto3.session.Session.client

        def metered_client(self: Any, *a: Any, **k: Any) -> Any:
            c = original_client(self, *a, **k)
            meter.attach(c)
            return c

        # Every client the handlers build for themselves (runtime, EngineContext.from_env) is
        # metered: instrumentation of botocore, no code of ours is replaced.
        boto3.session.Session.client = metered_client  # type: ignore[method-assign]
        saved_env = {k: os.environ.get(k) for k in res.env()}
        os.environ.update(res.env())
        try:
            runtime.reset()
            token = ApiKeys(ApiKeyRows(side, res.state_table)).create("acme", "alice").token
            engine = EngineContext.from_env()
            sqs = session.client("sqs")
            artifacts = ArtifactStore(original_client(session, "s3"), res.bucket)
            probe = Writer(EventStore(side, res.events_table, res.state_table, artifacts))
            rec = Recorder(meter, functions)
            run = (rec, engine, probe, token, res.run_step_queue_url, sqs)
            one_run(*run)  # warm-up: imports, the containers' caches
            rec.invocations.clear()
            meter.log.clear()
            runs = [one_run(*run) for _ in range(args.runs)]
        finally:
            boto3.session.Session.client = original_client  # type: ignore[method-assign]
            for k, v in saved_env.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            runtime.reset()
    if args.calls:
        last = runs[-1]
        listing = last.start_calls + [c for i in rec.invocations[-1:] for c in i.calls] + last.esm_calls
        list_calls(listing)
    report(rec.invocations, runs, functions)


def list_calls(calls: list[Call]) -> None:
    print("calls of the last run (start, worker, event source mapping):")
    for c in calls:
        detail = ""
        if c.service == "dynamodb":
            wru, rru = dynamodb_units(c)
            items = ", ".join(
                f"{i.kind}{' tx' if i.transactional else ''} {i.table} {i.bytes} B" for i in c.items
            )
            detail = f"WRU {wru:g} RRU {rru:g}: {items}"
        elif c.service == "sqs":
            detail = f"{sqs_requests(c)} request(s), payload {sqs_payload(c)} B"
        elif c.service == "s3":
            detail = f"{body_size(c.params.get('Body', b''))} B" if c.op == "PutObject" else ""
        print(f"  {c.service:<8} {c.op:<20} {c.status:>3}  {detail}")
    print()


def report(invocations: list[Invocation], runs: list[RunLog], functions: dict[str, tuple[int, str]]) -> None:
    steps = sum(r.steps for r in runs)
    per = 1000 / steps
    api_fns = ("AuthorizerFunction", "StartRunFunction")
    start, worker = Bill(), Bill()
    start.add_invocations([i for i in invocations if i.function in api_fns])
    start.add_api(sum(r.api_requests for r in runs))
    worker.add_invocations([i for i in invocations if i.function not in api_fns])
    for r in runs:
        worker.add_calls(r.esm_calls)
    n_worker = sum(1 for i in invocations if i.function not in api_fns)
    mem, arch = functions["RunStepFunction"]
    print(
        f"prices: us-east-1 list prices as of {PRICES_DATE} (from my knowledge, not fetched); free tiers ignored"
    )
    print(
        f"runs: {len(runs)} demo runs ('time': tool call, result, answer), {steps} worker steps"
        f" ({steps / len(runs):.1f} per run) in {n_worker} worker invocations;"
        f" RunStepFunction {mem} MB {arch}"
    )
    print()
    print("duration model per invocation (ms): our code's CPU here x CPU share + assumed AWS latency")
    by_fn: dict[str, list[Invocation]] = {}
    for inv in invocations:
        by_fn.setdefault(inv.function, []).append(inv)
    for fn, invs in by_fn.items():
        m = invs[0].memory_mb
        code = sum(i.code_cpu for i in invs) / len(invs) * 1000
        aws = sum(latency_ms(c) for i in invs for c in i.calls) / len(invs)
        calls = sum(len(i.calls) for i in invs) / len(invs)
        wall = sum(i.wall for i in invs) / len(invs) * 1000
        billed = sum(i.billed_ms() for i in invs) / len(invs)
        print(
            f"  {fn:<20} {len(invs):>3} inv  code {code:6.1f} CPU-ms x {max(1.0, MB_PER_VCPU / m):.2f}"
            f" + {calls:4.1f} calls {aws:6.1f} ms = billed {billed:6.1f} ms"
            f"  (measured here, moto excluded: {wall:.1f} ms wall)"
        )
    print()
    print("per 1,000 steps                      units          USD")
    for title, bill in (("worker (steps)", worker), ("run start, spread over its steps", start)):
        print(f"  {title}")
        for name, v in sorted(bill.units.items()):
            if name != "S3 bytes stored":
                print(f"    {name:<30} {v * per:>12,.2f}")
        for svc, usd in sorted(bill.usd.items()):
            print(f"    {svc + ' $':<30} {'':>12} {usd * per:>10.5f}")
        print(f"    {'subtotal $':<30} {'':>12} {bill.total() * per:>10.5f}")
    by_service = {k: worker.usd[k] + start.usd[k] for k in {*worker.usd, *start.usd}}
    print("  by service, total")
    for svc, usd in sorted(by_service.items(), key=lambda kv: -kv[1]):
        print(
            f"    {svc + ' $':<30} {'':>12} {usd * per:>10.5f}  ({usd / (worker.total() + start.total()):.0%})"
        )
    all_calls = [c for i in invocations for c in i.calls]
    ddb_bytes = event_bytes(all_calls) * per
    s3_bytes = (worker.units["S3 bytes stored"] + start.units["S3 bytes stored"]) * per
    print(
        f"storage per month kept (not in the total): DynamoDB items written {ddb_bytes / 1e6:.2f} MB"
        f" -> ${ddb_bytes / 1e9 * PRICE['dynamodb_storage_gb_month']:.5f}, S3 artifacts {s3_bytes / 1e6:.2f} MB"
        f" -> ${s3_bytes / 1e9 * PRICE['s3_storage_gb_month']:.6f} (upper bounds: rewrites counted each time)"
    )
    print(f"total: ${(worker.total() + start.total()) * per:.4f} per 1,000 steps")


if __name__ == "__main__":
    main()
