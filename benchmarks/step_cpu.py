"""Worker CPU per step outside AWS and the model: render, fold and append preparation, on a
thread grown to 200 turns.

A warm worker (its writer view and renderer cached, as a reused Lambda container has them)
drives one demo run per turn through `engine.step.advance` on in-process moto. The pure parts
are timed where they run (thread CPU, `time.thread_time`), not the AWS calls around them:
- render: `EngineContext.renderer` (feeding the new events) + `Renderer.request` + `line0`;
- fold: `Importer.feed` of lines read from the store (the view's tail refresh);
- prepare: `Writer.build` (envelope, canonical bytes, hash chain, schema + validate_next: the
  fold of the appended lines).
A step is one appended decision (`writer.append`), as in benchmarks/step_cost.py.

Usage: python benchmarks/step_cpu.py [--turns 200]
Prints ms/step (the three parts summed) averaged over turns 1-10 and over the last 10 turns,
and their ratio (goal: < 5 ms/step and a ratio near 1: flat).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
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
from threads_aws.core import importer as importer_mod  # noqa: E402
from threads_aws.core import render  # noqa: E402
from threads_aws.core.canonical import new_uuid7  # noqa: E402
from threads_aws.core.lines import StoredLine, header_line  # noqa: E402
from threads_aws.engine import context as context_mod  # noqa: E402
from threads_aws.engine.step import EngineContext, advance  # noqa: E402
from threads_aws.store import NewBranch  # noqa: E402
from threads_aws.store.aws import stores  # noqa: E402
from threads_aws.writer import Draft, Writer  # noqa: E402
from threads_aws_dev.local.infra import create_resources, default_template_path  # noqa: E402
from threads_aws_dev.local.moto_patch import speed_up_moto_transactions  # noqa: E402

USER = {"kind": "user", "principal": {"issuer": "api", "subject": "alice", "tenant": "acme"}}
HOST = {"kind": "host"}


class Meter:
    """Thread CPU inside the wrapped pure functions (outermost call only: no double count)."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = {"render": 0.0, "fold": 0.0, "prepare": 0.0}
        self.appends = 0
        self._depth = 0

    def wrap(self, part: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            if self._depth:
                return fn(*args, **kwargs)
            self._depth += 1
            t = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.cpu[part] += time.thread_time() - t
                self._depth -= 1

        return timed

    def reset(self) -> None:
        self.cpu = dict.fromkeys(self.cpu, 0.0)
        self.appends = 0


def instrument(meter: Meter) -> None:
    """Time the pure parts in place (this script only: the engine is unchanged)."""
    ctx_renderer = context_mod.EngineContext.renderer
    context_mod.EngineContext.renderer = meter.wrap("render", ctx_renderer)  # type: ignore[method-assign]
    render.Renderer.request = meter.wrap("render", render.Renderer.request)  # type: ignore[method-assign]
    render.Renderer.line0 = meter.wrap("render", render.Renderer.line0)  # type: ignore[method-assign]
    Writer.build = meter.wrap("prepare", Writer.build)  # type: ignore[method-assign]
    importer_mod.Importer.feed = meter.wrap("fold", importer_mod.Importer.feed)  # type: ignore[method-assign]
    append = Writer.append

    def counted(self: Writer, *args: Any, **kwargs: Any) -> Any:
        out = append(self, *args, **kwargs)
        meter.appends += 1
        return out

    Writer.append = counted  # type: ignore[method-assign]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=200)
    args = ap.parse_args()
    with mock_aws():
        speed_up_moto_transactions()
        session = boto3.session.Session()
        res = create_resources(default_template_path(), session, prefix="bench")
        st = stores(session.client("dynamodb"), session.client("s3"), res)
        ctx = EngineContext(writer=Writer(st.events), stores=st, agents=load_agents())
        thread_id, branch_id = new_uuid7(), new_uuid7()
        header = StoredLine.of_header(header_line(thread_id, branch_id, 1))
        new = NewBranch(
            thread_id=thread_id, tenant="acme", branch_id=branch_id, header=header, create_thread=True
        )
        st.events.create_branch(new)
        ctx.writer.append(branch_id, [Draft("thread_started", load_agents()["demo"].thread_started(), HOST)])
        meter = Meter()
        instrument(meter)
        per_turn: list[tuple[float, int, dict[str, float]]] = []
        for n in range(args.turns):
            ctx.writer.append(branch_id, [Draft("user_input", {"source": "api", "text": f"hello {n}"}, USER)])
            meter.reset()
            out = advance(ctx, branch_id, holder_id="bench", deadline_ms=int(time.time() * 1000) + 10**9)
            assert out.state == "idle", out
            steps = max(1, meter.appends)
            per_turn.append((sum(meter.cpu.values()) * 1000 / steps, steps, dict(meter.cpu)))
        events = ctx.writer.load(branch_id).head_seq

    def window(rows: list[tuple[float, int, dict[str, float]]]) -> tuple[float, dict[str, float]]:
        steps = sum(r[1] for r in rows)
        parts = {p: sum(r[2][p] for r in rows) * 1000 / steps for p in rows[0][2]}
        return statistics.fmean(r[0] for r in rows), parts

    first, first_parts = window(per_turn[:10])
    last, last_parts = window(per_turn[-10:])
    print(f"thread: {args.turns} turns, {events} events; steps per turn: {per_turn[-1][1]}")
    rows = (("turns 1-10", first, first_parts), (f"turns {args.turns - 9}-{args.turns}", last, last_parts))
    for label, ms, parts in rows:
        split = ", ".join(f"{p} {v:.3f}" for p, v in parts.items())
        print(f"{label}: {ms:.3f} ms/step ({split})")
    print(f"ratio: {last / first:.2f}")


if __name__ == "__main__":
    main()
