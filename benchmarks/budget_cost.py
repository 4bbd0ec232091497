"""What budgets cost per model request: AWS calls and DynamoDB request units of one demo run
(`time` → tool call → result → final answer: two model requests) without a budget and under a
run budget of N limits, on a warm worker (its view cached).

The reservation rides the `model_request`'s own TransactWriteItems (a row Put + a total Update
per (budget, limit)), the settlement the answer's (a row Update + a total Update per token/cost
limit): budgets add no AWS call on the success path, only items (each transactional item is
billed 2 write units per KB). The request-unit arithmetic follows DynamoDB's pricing rules:
transactional writes 2 WRU per 1 KB item-size step, plain writes 1; consistent reads 1 RRU per
4 KB, transactional reads 2.

Usage: python benchmarks/budget_cost.py
"""

from __future__ import annotations

import math
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import boto3  # noqa: E402
from moto import mock_aws  # noqa: E402
from step_cost import ItemSizer, Meter, branch_with  # noqa: E402
from threads_aws.agents import load_agents  # noqa: E402
from threads_aws.engine.step import EngineContext, advance  # noqa: E402
from threads_aws.store.aws import stores  # noqa: E402
from threads_aws.writer import Draft, Writer  # noqa: E402
from threads_aws_dev.local.infra import create_resources, default_template_path  # noqa: E402
from threads_aws_dev.local.moto_patch import speed_up_moto_transactions  # noqa: E402

USER = {"kind": "user", "principal": {"issuer": "api", "subject": "alice", "tenant": "acme"}}

BUDGETS = {
    "none": None,
    "1 limit (requests)": {"max_model_requests": 100},
    "3 limits (requests, turns, output)": {
        "max_model_requests": 100,
        "max_turns": 10,
        "max_output_tokens": 1_000_000,
    },
    "4 limits (+ wall time)": {
        "max_model_requests": 100,
        "max_turns": 10,
        "max_output_tokens": 1_000_000,
        "max_wall_ms": 3_600_000,
    },
}


def units(meter: Meter) -> tuple[float, float, int]:
    """(write units, read units, transact items) of the metered DynamoDB calls."""
    wru = rru = 0.0
    tx_items = 0
    for call in meter.log:
        for it in call.items:
            if it.kind in ("write", "check"):
                step = max(1, math.ceil(it.bytes / 1024))
                wru += step * (2 if it.transactional else 1)
                tx_items += it.transactional
            else:
                step = max(1, math.ceil(it.bytes / 4096))
                rru += step * (2 if it.transactional else (1 if it.consistent else 0.5))
    return wru, rru, tx_items


def one_run(ctx: EngineContext, meter: Meter, branch_id: str, budget: dict | None) -> tuple[int, int]:
    data: dict = {"source": "api", "text": "time"}
    if budget:
        data["budget"] = budget
    ctx.writer.append(branch_id, [Draft("user_input", data, USER)])
    meter.log.clear()
    meter.calls.clear()
    meter.on = True
    while advance(ctx, branch_id, holder_id="bench", deadline_ms=ctx.clock() + 600_000).state == "more":
        pass
    meter.on = False
    f = ctx.writer.load(branch_id).fold
    start = f.inputs[-1]  # this run's user_input
    requests = sum(1 for e in f.events[start:] if e["type"] == "model_request")
    return sum(meter.calls.values()), requests


def main() -> None:
    with mock_aws():
        speed_up_moto_transactions()
        session = boto3.session.Session()
        res = create_resources(default_template_path(), session, prefix="bench")
        ddb, s3, sqs = session.client("dynamodb"), session.client("s3"), session.client("sqs")
        meter = Meter(ItemSizer(session.client("dynamodb")))
        meter.attach(ddb, s3, sqs)
        st = stores(ddb, s3, res)
        ctx = EngineContext(writer=Writer(st.events), stores=st, agents=load_agents())
        base = None
        for name, budget in BUDGETS.items():
            b = branch_with(ctx.writer, 50)
            one_run(ctx, meter, b, None)  # warm this branch's view
            calls, requests = one_run(ctx, meter, b, budget)
            wru, rru, tx = units(meter)
            if base is None:
                base = (calls, wru, rru, tx)
            print(
                f"{name:<36} {calls} AWS calls, {wru:.0f} WRU, {rru:.1f} RRU, {tx} transact items "
                f"per run of {requests} model requests; over no budget, per model request: "
                f"{(calls - base[0]) / requests:+.1f} calls, {(wru - base[1]) / requests:+.1f} WRU, "
                f"{(rru - base[2]) / requests:+.1f} RRU, {(tx - base[3]) / requests:+.1f} items"
            )


if __name__ == "__main__":
    main()
