"""Tools as Lambda functions: the worker invokes the template's example tool function
(functions/tool_example: Powertools Idempotency on the effect key) through the local Lambda
Invoke API (local/lambda_invoke.py: the handler runs in this process, as `threads-aws dev` runs
it) with an ordinary boto3 client, only after effect_begin is durable; outcomes map to the effect
rules, and a crash anywhere around the invoke still records the effect exactly once."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from conftest import REGION, TEMPLATE
from helpers.engine import (
    Crash,
    CrashingWriter,
    events,
    grant,
    make_ctx,
    new_thread,
    of_type,
    run,
    say,
    types,
    verify_export,
)
from threads_aws.store.functions import Functions, client_config
from threads_aws_dev.local.lambda_invoke import LocalLambda
from threads_aws_dev.local.runtime import Handlers
from threads_aws_dev.local.sam import parse_template


@pytest.fixture
def lam(aws, monkeypatch):
    """The template's functions behind the local Invoke API, the example's table on moto."""
    monkeypatch.setenv("TOOL_EXAMPLE_TABLE", aws.resources.physical["ToolExampleTable"])
    handlers = Handlers(parse_template(TEMPLATE).functions, region=REGION)
    api = LocalLambda(handlers).start()
    yield api
    api.stop()


def functions(api: LocalLambda) -> Functions:
    def client(timeout_s: float) -> Any:
        return boto3.client(
            "lambda", region_name=REGION, endpoint_url=api.url, config=client_config(timeout_s)
        )

    return Functions(client, {"ToolExampleFunction": "ToolExampleFunction"})


def ledger(aws) -> list[dict[str, Any]]:
    items = aws.ddb.scan(TableName=aws.resources.physical["ToolExampleTable"])["Items"]
    return [i for i in items if i["id"]["S"].startswith("expense#")]


def expense(ctx, b: str, **args: Any) -> None:
    say(ctx, b, "lambda: add_expense " + json.dumps({"amount_cents": 1250, "memo": "lunch", **args}))


def test_a_lambda_tool_commits_once(aws, lam):
    ctx = make_ctx(aws, functions=functions(lam))
    b = new_thread(ctx)
    expense(ctx, b)
    assert run(ctx, b).state == "parked"  # add_expense asks under the demo policy
    grant(ctx, b)
    assert run(ctx, b).state == "idle"
    (begin,) = of_type(ctx, b, "effect_begin")
    (commit,) = of_type(ctx, b, "effect_commit")
    (res,) = of_type(ctx, b, "tool_result")
    assert res["data"]["origin"] == "executed" and not res["data"]["is_error"]
    assert res["data"]["preview"].startswith("Recorded lunch: 12.50")
    assert begin["seq"] < commit["seq"] and lam.invocations == 1
    (item,) = ledger(aws)
    call_id = res["data"]["call_id"]
    assert item["id"]["S"] == f"expense#{b}:{call_id}" and item["tenant"]["S"] == "acme"
    assert types(ctx, b)[-2:] == ["model_response", "turn_completed"]
    verify_export(ctx, b)


@pytest.mark.parametrize(
    "at, when",
    [
        (1, "after"),  # effect_begin durable, the invoke never made
        (2, "before"),  # the function ran, its commit never written
    ],
)
def test_a_crash_around_the_invoke_still_commits_once(aws, lam, at, when):
    ctx = make_ctx(aws, functions=functions(lam))
    b = new_thread(ctx)
    expense(ctx, b)
    run(ctx, b)
    grant(ctx, b)
    crashing = make_ctx(aws, functions=functions(lam), lease_ttl_ms=1000)
    crashing.writer = CrashingWriter(crashing.writer, at, when)  # counts from here: begin is 1
    with pytest.raises(Crash):
        run(crashing, b, holder="doomed")
    aws.clock.advance(2000)  # its lease lapses
    assert run(ctx, b, holder="recovery").state == "idle"
    t = types(ctx, b)
    assert t.count("effect_commit") == 1 and t.count("tool_result") == 1
    assert "effect_unknown" in t  # crash_after_begin, then safe_to_retry inside the dedup window
    (resolved,) = of_type(ctx, b, "effect_resolved")
    assert resolved["data"]["outcome"] == "safe_to_retry" and resolved["data"]["by"] == "provider_dedup"
    assert [e["data"]["attempt"] for e in of_type(ctx, b, "effect_begin")] == [1, 2]
    assert len(ledger(aws)) == 1  # the re-send under the same key wrote nothing new
    verify_export(ctx, b)


def test_a_function_error_is_an_error_result(aws, lam):
    """The function raised (FunctionError in the invoke response): an error result, committed
    with the effect (it ran and failed; nothing to re-send)."""
    ctx = make_ctx(aws, functions=functions(lam))
    b = new_thread(ctx, allow=["add_expense"], ask=[])
    expense(ctx, b, amount_cents=2_000_000)  # over the example's limit: it raises ValueError
    assert run(ctx, b).state == "idle"
    (res,) = of_type(ctx, b, "tool_result")
    assert res["data"]["origin"] == "executed" and res["data"]["is_error"]
    assert res["data"]["preview"].startswith("Error: ValueError: 20000.00 is over the expense limit")
    assert types(ctx, b).count("effect_commit") == 1 and not of_type(ctx, b, "effect_unknown")
    assert lam.invocations == 1 and not ledger(aws)
    verify_export(ctx, b)


def test_an_invalid_input_never_reaches_the_function(aws, lam):
    ctx = make_ctx(aws, functions=functions(lam))
    b = new_thread(ctx, allow=["add_expense"], ask=[])
    say(ctx, b, 'lambda: add_expense {"amount_cents": 5, "memo": "x", "delay_ms": "soon"}')
    run(ctx, b)  # the input schema refuses a string delay before anything runs
    (res,) = of_type(ctx, b, "tool_result")
    assert res["data"]["origin"] == "denied"
    assert not of_type(ctx, b, "effect_begin") and lam.invocations == 0


def test_outcomes_map_to_the_effect_rules(aws, lam):
    """Lambda's own function timeout is unknown (it may have run): inside the dedup window it is
    re-sent a bounded number of times, then parks for a human."""
    from dataclasses import replace

    fn = lam.handlers.functions["ToolExampleFunction"]
    lam.handlers.functions["ToolExampleFunction"] = replace(fn, timeout_s=1)
    ctx = make_ctx(aws, functions=functions(lam))
    b = new_thread(ctx, allow=["add_expense"], ask=[])
    expense(ctx, b, delay_ms=4000)  # past the function's Timeout: Sandbox.Timedout
    assert run(ctx, b).state == "parked"
    reasons = [e["data"]["reason"] for e in of_type(ctx, b, "effect_unknown")]
    # the first attempt timed out; the re-sends find it still running (Powertools' in-progress
    # error, or Lambda's timeout again while the handler waits for it): unknown either way
    assert reasons[0] == "timeout" and len(reasons) == 3
    assert set(reasons[1:]) <= {"timeout", "transport_error"}
    assert [e["data"]["outcome"] for e in of_type(ctx, b, "effect_resolved")] == ["safe_to_retry"] * 2
    assert events(ctx, b)[-1]["data"]["address"]["kind"] == "effect"
    verify_export(ctx, b)


def test_a_function_not_found_is_not_sent(aws, lam):
    ctx = make_ctx(aws, functions=Functions(functions(lam)._make_client, {"ToolExampleFunction": "Gone"}))
    b = new_thread(ctx, allow=["add_expense"], ask=[])
    expense(ctx, b)
    assert run(ctx, b).state == "idle"
    (resolved,) = of_type(ctx, b, "effect_resolved")
    call_id = resolved["data"]["call_id"]
    assert resolved["data"] == {"by": "adapter", "call_id": call_id, "outcome": "not_sent"}
    (res,) = of_type(ctx, b, "tool_result")
    assert res["data"]["origin"] == "not_executed" and res["data"]["is_error"]
    assert "ResourceNotFoundException" in res["data"]["preview"]
    verify_export(ctx, b)


def test_a_lost_answer_is_unknown(aws, lam):
    """The read times out before the function answers: effect_unknown{timeout}, never an error."""

    def slow_client(timeout_s: float) -> Any:
        return boto3.client("lambda", region_name=REGION, endpoint_url=lam.url, config=client_config(1))

    ctx = make_ctx(aws, functions=Functions(slow_client, {"ToolExampleFunction": "ToolExampleFunction"}))
    b = new_thread(ctx, allow=["add_expense"], ask=[])
    expense(ctx, b, delay_ms=2500)
    run(ctx, b)
    unknown = of_type(ctx, b, "effect_unknown")
    assert unknown and unknown[0]["data"]["reason"] == "timeout"
    results = of_type(ctx, b, "tool_result")
    assert not [e for e in results if e["data"]["origin"] == "executed" and e["data"]["is_error"]]


def test_the_payload_contract(aws, lam):
    from threads_aws.engine.lambda_tools import payload
    from threads_aws.engine.tools import ToolContext

    tc = ToolContext("acme", "t1", "b1", "call_1", "b1:call_1", 2, aws.clock, None)  # type: ignore[arg-type]
    body = json.loads(payload("add_expense", {"memo": "x"}, tc))
    assert body == {
        "attempt": 2,
        "branch_id": "b1",
        "call_id": "call_1",
        "effect_key": "b1:call_1",
        "input": {"memo": "x"},
        "tenant": "acme",
        "thread_id": "t1",
        "tool": "add_expense",
    }
