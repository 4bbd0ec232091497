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
from collections import Counter
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
from threads_aws.local.infra import create_resources, default_template_path  # noqa: E402
from threads_aws.local.moto_patch import speed_up_moto_transactions  # noqa: E402
from threads_aws.store import NewBranch  # noqa: E402
from threads_aws.store.aws import stores  # noqa: E402
from threads_aws.writer import Draft, Writer  # noqa: E402

USER = {"kind": "user", "principal": {"issuer": "api", "subject": "alice", "tenant": "acme"}}
HOST = {"kind": "host"}


class Meter:
    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.bytes = 0
        self.on = False

    def before(self, model: Any, **_: Any) -> None:
        if self.on:
            self.calls[model.name] += 1

    def after(self, http_response: Any, **_: Any) -> None:
        if self.on:
            self.bytes += len(http_response.content or b"")

    def attach(self, *clients: Any) -> None:
        for c in clients:
            c.meta.events.register("before-call.*.*", self.before)
            c.meta.events.register("after-call.*.*", self.after)


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
