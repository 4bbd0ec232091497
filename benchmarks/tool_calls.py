"""AWS calls per tool call: a Lambda tool call, an MCP tool call and the memory tools, counted by a botocore
`before-call` hook on every client of the worker (DynamoDB, S3, SQS, Lambda), on moto in one
process. The Lambda tool is the example function (`functions/tool_example`) behind the local
Invoke API (`local/lambda_invoke.py`); the MCP server is the demo server of `threads-aws dev`
(`local/demo_mcp.py`) on loopback. Each figure is one run step (`engine.step.advance`) of a
turn; "per call" subtracts the same agent's plain turn (a text answer), so it is what the tool
call adds: its permission decision, effect events, result and the second model request.

The tool function's own calls (Powertools Idempotency's DynamoDB writes) are the tool's, not
the worker's, and are not counted. Also printed: MCP operations per step (tools/list,
tools/call; plus each connection's handshake) and the cost of `import mcp` in a fresh interpreter.

    .venv/bin/python benchmarks/tool_calls.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from _calls import count_calls, moto_env, summary

USER = {"kind": "user", "principal": {"issuer": "api", "subject": "bench", "tenant": "bench"}}


def import_cost(runs: int = 3) -> None:
    code = (
        "import time; t = time.perf_counter(); import boto3; b = time.perf_counter(); import mcp; "
        "from mcp.client.streamable_http import streamable_http_client; "
        "print((b - t) * 1000, (time.perf_counter() - b) * 1000)"
    )
    got = [subprocess.check_output([sys.executable, "-c", code], text=True).split() for _ in range(runs)]
    b3 = sorted(float(x[0]) for x in got)[runs // 2]
    mcp = sorted(float(x[1]) for x in got)[runs // 2]
    print(
        f"import mcp after boto3, fresh interpreter: median {mcp:.0f} ms "
        f"(import boto3: {b3:.0f} ms), {runs} runs"
    )


def main() -> int:
    import boto3
    from moto import mock_aws
    from threads_aws.agents import load_agents
    from threads_aws.core.canonical import new_uuid7
    from threads_aws.core.lines import StoredLine, header_line
    from threads_aws.engine.mcp_tools import StepMcp
    from threads_aws.engine.step import advance
    from threads_aws.services import Services
    from threads_aws.store.protocol import NewBranch
    from threads_aws.writer import Draft
    from threads_aws_dev.local.demo_mcp import DemoMcp
    from threads_aws_dev.local.infra import create_resources, default_template_path
    from threads_aws_dev.local.lambda_invoke import LocalLambda
    from threads_aws_dev.local.runtime import Handlers
    from threads_aws_dev.local.sam import parse_template

    moto_env()
    demo = DemoMcp().start()
    os.environ["THREADS_DEMO_MCP_URL"] = demo.url
    os.environ["TOOL_FUNCTIONS"] = json.dumps({"ToolExampleFunction": "ToolExampleFunction"})
    steps: list[StepMcp] = []

    def step_mcp() -> StepMcp:
        steps.append(StepMcp())
        return steps[-1]

    with mock_aws():
        session = boto3.Session(region_name="us-east-1")
        template = default_template_path()
        res = create_resources(template, session, prefix="bench")
        os.environ["TOOL_EXAMPLE_TABLE"] = res.physical["ToolExampleTable"]
        api = LocalLambda(Handlers(parse_template(template).functions, region="us-east-1")).start()
        os.environ["AWS_ENDPOINT_URL_LAMBDA"] = api.url
        counter = count_calls(session)
        clients = {n: session.client(n) for n in ("dynamodb", "s3", "sqs")}
        svc = Services(res, clients=clients, session=session)
        ctx = svc.engine(mcp=step_mcp)

        def thread(agent: str, allow: list[str]) -> str:
            thread_id, branch_id = new_uuid7(), new_uuid7()
            header = StoredLine.of_header(header_line(thread_id, branch_id, ctx.clock()))
            ctx.store.create_branch(
                NewBranch(
                    thread_id=thread_id,
                    tenant="bench",
                    branch_id=branch_id,
                    header=header,
                    create_thread=True,
                )
            )
            started = load_agents()[agent].thread_started()
            perms = started["policy"]["permissions"]  # no approval round: the call itself
            started["policy"]["permissions"] = {**perms, "allow": [*perms["allow"], *allow], "ask": []}
            ctx.writer.append(branch_id, [Draft("thread_started", started, {"kind": "host"})])
            return branch_id

        def turn(name: str, b: str, text: str) -> int:
            ctx.writer.append(b, [Draft("user_input", {"source": "api", "text": text}, USER)])
            counter.clear()
            n = len(steps)
            t0 = time.perf_counter()
            out = advance(ctx, b, holder_id="bench", deadline_ms=ctx.clock() + 300_000)
            ms = (time.perf_counter() - t0) * 1000
            total, detail = summary(counter)
            mcp = sum(sum(s.conns.requests.values()) for s in steps[n:])
            extra = f", MCP ops {mcp}" if mcp else ""
            res = [e["data"] for e in ctx.writer.load(b).fold.events if e["type"] == "tool_result"]
            if res and res[-1]["origin"] != "executed" and text.startswith(("mcp:", "lambda:")):
                raise SystemExit(f"{name}: the call was not executed: {res[-1]}")
            print(f"{name:44s} {total:3d} AWS calls  {ms:6.0f} ms  [{out.state}{extra}]  ({detail})")
            return total

        lam = thread("demo", ["add_expense"])
        plain = turn("lambda agent: plain turn (baseline)", lam, "hello")
        first = turn(
            "lambda agent: add_expense (idempotent)",
            lam,
            'lambda: add_expense {"amount_cents": 1250, "memo": "m"}',
        )
        print(f"  → per Lambda tool call: {first - plain} AWS calls (Invoke included)")

        mem = thread("demo", [])
        plain = turn("memory: plain turn (baseline)", mem, "hello")
        rem = turn("memory: remember (idempotent effect)", mem, "remember colour: blue")
        key = turn("memory: recall by key (read-only)", mem, "recall colour")
        query = turn("memory: recall by query (read-only)", mem, "recall: colour")
        forget = turn("memory: forget (idempotent effect)", mem, "forget colour")
        print(
            f"  → per memory call: remember {rem - plain}, recall {key - plain} (key) / "
            f"{query - plain} (query), forget {forget - plain} AWS calls"
        )

        mt = thread("demo-tools", ["mcp__demo__*"])
        pin = turn("mcp agent: first turn (lists, pins: tools_changed)", mt, "hello")
        plain = turn("mcp agent: plain turn (lists, no change)", mt, "hello")
        print(f"  → pinning the tools once per thread: {pin - plain} AWS calls (the tools_changed append)")
        ro = turn("mcp agent: lookup_rate (read_only)", mt, 'mcp: mcp__demo__lookup_rate {"currency": "USD"}')
        demo.records["r"] = "v"
        un = turn("mcp agent: delete_record (unguarded)", mt, 'mcp: mcp__demo__delete_record {"key": "r"}')
        idem = turn(
            "mcp agent: save_record (idempotent)",
            mt,
            'mcp: mcp__demo__save_record {"key": "r", "value": "v"}',
        )
        print(
            f"  → per MCP call: read-only {ro - plain}, effectful {un - plain} (unguarded) / "
            f"{idem - plain} (idempotent) AWS calls; MCP ops (tools/list, tools/call) go to the "
            "server, not AWS"
        )
        api.stop()
    demo.stop()
    import_cost()
    return 0


if __name__ == "__main__":
    sys.exit(main())
