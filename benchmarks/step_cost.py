"""AWS calls and bytes read per agent step, on a short branch and on a long one.

A warm worker container (its writer view cached, as Lambda reuses containers) drives one demo
run to completion: `time` → tool call → tool result → final answer. We count every AWS API call
through botocore's event hooks (`before-call`) and the response bytes read (`after-call`), on a
branch with 50 prior events and on one with 5,000 — if reads grew with the log, the second would
cost more. A step is one appended decision of the worker (a `writer.append`); we also report
per worker invocation (`engine.step.advance`).

Usage: python benchmarks/step_cost.py
Last line: `ratio: <calls per step at 5,000 ÷ calls per step at 50>` (goal: <= 3 calls per step,
ratio <= 1.1).
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

for k, v in (
    ("AWS_ACCESS_KEY_ID", "testing"),
    ("AWS_SECRET_ACCESS_KEY", "testing"),
    ("AWS_DEFAULT_REGION", "us-east-1"),
):
    os.environ[k] = v

import boto3  # noqa: E402
from moto import mock_aws  # noqa: E402
from threads_aws.agents import load_agents  # noqa: E402
from threads_aws.core.canonical import new_uuid7  # noqa: E402
from threads_aws.core.lines import StoredLine, header_line  # noqa: E402
from threads_aws.engine.step import EngineContext, advance  # noqa: E402
from threads_aws.store import NewBranch  # noqa: E402
from threads_aws.store.aws import stores  # noqa: E402
from threads_aws.writer import Draft, Writer  # noqa: E402
from threads_aws_dev.local.infra import create_resources, default_template_path  # noqa: E402
from threads_aws_dev.local.moto_patch import speed_up_moto_transactions  # noqa: E402

USER = {"kind": "user", "principal": {"issuer": "api", "subject": "alice", "tenant": "acme"}}
HOST = {"kind": "host"}


@dataclass
class Item:
    """One DynamoDB item (or, for a Query, the items it read, summed) as DynamoDB bills it."""

    table: str
    kind: str  # "read", "write", or "check" (a transaction's ConditionCheck)
    bytes: int  # the item size by DynamoDB's rules (for writes: the larger of before and after)
    consistent: bool = True
    transactional: bool = False


@dataclass
class Call:
    """One AWS API call the metered code made."""

    service: str  # botocore's service name: "dynamodb", "s3", "sqs"
    op: str
    params: dict[str, Any]
    response: dict[str, Any] = field(default_factory=dict)
    status: int = 0
    response_bytes: int = 0
    wall: float = 0.0  # seconds from the serialized request to the parsed response
    cpu: float = 0.0  # CPU seconds of this thread in that span (the emulated AWS runs in process)
    items: list[Item] = field(default_factory=list)  # DynamoDB only, filled by an ItemSizer
    started: tuple[float, float] = (0.0, 0.0)


class Meter:
    """Counts the calls of attached clients (and logs each one while `on`). With a `sizer`,
    each DynamoDB call also records the items it read or wrote; the time spent sizing them is
    kept in `overhead_wall`/`overhead_cpu`, apart from the calls' own time."""

    def __init__(self, sizer: ItemSizer | None = None) -> None:
        self.calls: Counter[str] = Counter()
        self.bytes = 0
        self.on = False
        self.log: list[Call] = []
        self.sizer = sizer
        self.overhead_wall = 0.0
        self.overhead_cpu = 0.0

    def params(self, params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        if not self.on:
            return
        call = Call(model.service_model.service_name, model.name, params)
        if self.sizer is not None and call.service == "dynamodb":
            with self._overhead():
                self.sizer.before(call)
        context["_bench_call"] = call

    def before(self, model: Any, context: dict[str, Any], **_: Any) -> None:
        if self.on:
            self.calls[model.name] += 1
            call = context.get("_bench_call")
            if call is not None:
                call.started = (time.perf_counter(), time.thread_time())

    def after(self, http_response: Any, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        if not self.on:
            return
        self.bytes += len(http_response.content or b"")
        call = context.pop("_bench_call", None)
        if call is None:
            return
        call.wall = time.perf_counter() - call.started[0]
        call.cpu = time.thread_time() - call.started[1]
        call.response, call.status = parsed, http_response.status_code
        call.response_bytes = len(http_response.content or b"")
        if self.sizer is not None and call.service == "dynamodb":
            with self._overhead():
                self.sizer.after(call)
        self.log.append(call)

    @contextmanager
    def _overhead(self) -> Iterator[None]:
        w, c = time.perf_counter(), time.thread_time()
        try:
            yield
        finally:
            self.overhead_wall += time.perf_counter() - w
            self.overhead_cpu += time.thread_time() - c

    def attach(self, *clients: Any) -> None:
        for c in clients:
            c.meta.events.register("before-parameter-build.*.*", self.params)
            c.meta.events.register("before-call.*.*", self.before)
            c.meta.events.register("after-call.*.*", self.after)


# ------------------------------------------------------------------ DynamoDB item sizes
def number_size(n: str) -> int:
    """Bytes of a DynamoDB number: 1 per two significant digits (leading and trailing zeros
    trimmed), plus 1."""
    mantissa = n.lstrip("+-").lower().split("e")[0]
    digits = mantissa.replace(".", "").strip("0")
    return (max(1, len(digits)) + 1) // 2 + 1


def attr_size(v: dict[str, Any]) -> int:
    """Bytes of one attribute value by DynamoDB's item-size rules (names counted by the caller)."""
    ((t, x),) = v.items()
    if t == "S":
        return len(x.encode())
    if t == "N":
        return number_size(x)
    if t == "B":
        return len(x)
    if t in ("BOOL", "NULL"):
        return 1
    if t == "SS":
        return sum(len(e.encode()) for e in x)
    if t == "NS":
        return sum(number_size(e) for e in x)
    if t == "BS":
        return sum(len(e) for e in x)
    if t == "M":  # 3 bytes per map, 1 per element, plus each element's name and value
        return 3 + sum(len(k.encode()) + attr_size(e) + 1 for k, e in x.items())
    if t == "L":
        return 3 + sum(attr_size(e) + 1 for e in x)
    raise ValueError(f"unknown DynamoDB type {t}")


def item_size(item: dict[str, Any] | None) -> int:
    return sum(len(k.encode()) + attr_size(v) for k, v in (item or {}).items())


_PRUNED = ("ProjectionExpression", "FilterExpression", "Select", "AttributesToGet")


class ItemSizer:
    """Sizes the items behind each DynamoDB call through a second, unmetered client: reads are
    billed by the whole item (a projection does not shrink it), writes by the larger of the item
    before and after."""

    def __init__(self, ddb: Any) -> None:
        self.ddb = ddb
        self._keys: dict[str, list[str]] = {}

    def _key_of(self, table: str, item: dict[str, Any]) -> dict[str, Any]:
        if table not in self._keys:
            schema = self.ddb.describe_table(TableName=table)["Table"]["KeySchema"]
            self._keys[table] = [k["AttributeName"] for k in schema]
        return {k: item[k] for k in self._keys[table]}

    def _size(self, table: str, key: dict[str, Any]) -> int:
        return item_size(self.ddb.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item"))

    def _targets(self, call: Call) -> list[tuple[str, str, dict[str, Any], bool]]:
        """(table, kind, key, transactional) of each item a write call touches."""
        p, op = call.params, call.op
        if op == "PutItem":
            return [(p["TableName"], "write", self._key_of(p["TableName"], p["Item"]), False)]
        if op in ("UpdateItem", "DeleteItem"):
            return [(p["TableName"], "write", p["Key"], False)]
        out: list[tuple[str, str, dict[str, Any], bool]] = []
        if op == "BatchWriteItem":
            for table, reqs in p["RequestItems"].items():
                for r in reqs:
                    put = r.get("PutRequest")
                    key = self._key_of(table, put["Item"]) if put else r["DeleteRequest"]["Key"]
                    out.append((table, "write", key, False))
        elif op == "TransactWriteItems":
            for t in p["TransactItems"]:
                ((kind, e),) = t.items()
                table = e["TableName"]
                key = self._key_of(table, e["Item"]) if kind == "Put" else e["Key"]
                out.append((table, "check" if kind == "ConditionCheck" else "write", key, True))
        return out

    def before(self, call: Call) -> None:
        call.items = [
            Item(table, kind, self._size(table, key), True, tx)
            for table, kind, key, tx in self._targets(call)
        ]

    def after(self, call: Call) -> None:
        p, op, r = call.params, call.op, call.response
        if op in ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"):
            for item, (table, kind, key, _tx) in zip(call.items, self._targets(call), strict=True):
                if kind == "write":  # a failed write is billed by the item it left as it was
                    item.bytes = max(item.bytes, self._size(table, key))
        elif op == "GetItem":
            full = r.get("Item") if not any(k in p for k in _PRUNED) else None
            size = item_size(full) if full is not None else self._size(p["TableName"], p["Key"])
            call.items = [Item(p["TableName"], "read", size, bool(p.get("ConsistentRead")))]
        elif op == "BatchGetItem":
            for table, req in p["RequestItems"].items():
                consistent = bool(req.get("ConsistentRead"))
                call.items += [Item(table, "read", self._size(table, k), consistent) for k in req["Keys"]]
        elif op == "TransactGetItems":
            for t in p["TransactItems"]:
                g = t["Get"]
                call.items.append(
                    Item(g["TableName"], "read", self._size(g["TableName"], g["Key"]), True, True)
                )
        elif op in ("Query", "Scan"):
            items = r.get("Items") or []
            if any(k in p for k in _PRUNED):  # billed by every item read, before filter/projection
                q = {k: v for k, v in p.items() if k not in _PRUNED}
                _prune_expression_names(q)
                items = getattr(self.ddb, "query" if op == "Query" else "scan")(**q).get("Items") or []
            total = sum(item_size(i) for i in items)
            call.items = [Item(p["TableName"], "read", total, bool(p.get("ConsistentRead")))]


def _prune_expression_names(q: dict[str, Any]) -> None:
    """Drop the #names/:values only the removed projection/filter used (DynamoDB refuses unused ones)."""
    used = set(re.findall(r"[#:][A-Za-z0-9_]+", str(q.get("KeyConditionExpression", ""))))
    for field_ in ("ExpressionAttributeNames", "ExpressionAttributeValues"):
        kept = {k: v for k, v in (q.get(field_) or {}).items() if k in used}
        if kept:
            q[field_] = kept
        else:
            q.pop(field_, None)


def prior_turn(n: int) -> list[Draft]:
    """One completed turn of 4 events (text only: no artifacts needed to re-render)."""
    req = new_uuid7()
    return [
        Draft("user_input", {"source": "api", "text": f"hello {n}"}, USER),
        Draft(
            "model_request",
            {
                "attempt": 1,
                "declared_prefix": {"bytes": 1, "sha256": "0" * 64},
                "request_ref": {"bytes": 1, "media_type": "application/x-ndjson", "sha256": "0" * 64},
            },
            HOST,
        ),
        Draft(
            "model_response",
            {
                "completeness": "complete",
                "content": [{"text": f"You said: hello {n}", "type": "text"}],
                "request_event_id": req,
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 10, "output_tokens": 5},
            },
            {"kind": "model"},
        ),
        Draft("turn_completed", {"reason": "end_turn"}, HOST),
    ]


def branch_with(writer: Writer, prior_events: int) -> str:
    thread_id, branch_id = new_uuid7(), new_uuid7()
    header = StoredLine.of_header(header_line(thread_id, branch_id, 1))
    writer.store.create_branch(
        NewBranch(thread_id=thread_id, tenant="acme", branch_id=branch_id, header=header, create_thread=True)
    )
    drafts = [Draft("thread_started", load_agents()["demo"].thread_started(), HOST)]
    n = 0
    while len(drafts) + 4 <= prior_events:
        drafts += prior_turn(n)
        n += 1
    batch: list[Draft] = []
    for d in drafts:
        batch.append(d)
        if len(batch) == 400:
            _append_linked(writer, branch_id, batch)
            batch = []
    if batch:
        _append_linked(writer, branch_id, batch)
    return branch_id


def _append_linked(writer: Writer, branch_id: str, drafts: list[Draft]) -> None:
    """Append prior turns, each model_response naming the model_request built just before it."""
    view = writer.load(branch_id)
    built: list[StoredLine] = []
    request_id = ""
    for d in drafts:
        if d.type == "model_response":
            d = Draft(d.type, {**d.data, "request_event_id": request_id}, d.actor)
        (line,) = writer.build(view, [d], epoch=1)
        if d.type == "model_request":
            request_id = line.event_id or ""
        built.append(line)
    writer.store.append(branch_id, built, expected_head_seq=built[0].seq - 1, epoch=1)
    writer.forget(branch_id)


def run(
    ctx: EngineContext, meter: Meter, branch_id: str, text: str, *, measure: bool
) -> tuple[int, int, int]:
    ctx.writer.append(branch_id, [Draft("user_input", {"source": "api", "text": text}, USER)])
    before = ctx.writer.load(branch_id).head_seq
    meter.calls.clear()
    meter.bytes = 0
    meter.on = measure
    invocations = 0
    while True:
        invocations += 1
        out = advance(ctx, branch_id, holder_id="bench", deadline_ms=ctx.clock() + 600_000)
        if out.state != "more":
            break
    meter.on = False
    steps = ctx.writer.load(branch_id).head_seq - before
    return sum(meter.calls.values()), meter.bytes, steps


def main() -> None:
    with mock_aws():
        speed_up_moto_transactions()
        session = boto3.session.Session()
        res = create_resources(default_template_path(), session, prefix="bench")
        ddb, s3, sqs = session.client("dynamodb"), session.client("s3"), session.client("sqs")
        meter = Meter()
        meter.attach(ddb, s3, sqs)
        st = stores(ddb, s3, res)
        writer = Writer(st.events)
        ctx = EngineContext(writer=writer, stores=st, agents=load_agents())
        results = {}
        for prior in (50, 5_000):
            b = branch_with(writer, prior)
            run(ctx, meter, b, "time", measure=False)  # warm the container's view of this branch
            calls, nbytes, steps = run(ctx, meter, b, "time", measure=True)
            results[prior] = (calls, nbytes, steps)
            print(
                f"branch with {prior:>5} prior events: {steps} steps (appends), {calls} AWS calls "
                f"({calls / steps:.2f}/step), {nbytes:,} bytes read ({nbytes / steps:,.0f}/step); "
                f"calls: {dict(sorted(meter.calls.items()))}"
            )
        c50 = results[50][0] / results[50][2]
        c5k = results[5_000][0] / results[5_000][2]
        print(f"calls per step: {c50:.2f} at 50, {c5k:.2f} at 5,000")
        print(f"ratio: {c5k / c50:.3f}")


if __name__ == "__main__":
    main()
