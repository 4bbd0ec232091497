"""The parallel read-only group (semantics.md §4 "Turn structure"): consecutive pending calls of
one model response that are `concurrent`, pinned `read_only` and decided `allow` run at the same
time, in threads; every other call runs alone (an approved `ask` too: it is not decided allow).

Ordering: at most `MAX_IN_FLIGHT` (8) calls are started and not yet recorded at any moment (a
finished call whose result isn't appended still counts), and results are appended in call
order: the group waits for its earliest unrecorded call, then appends it with every call after
it that has already finished (one transaction), and only then starts more. Read-only calls write
no effect events, so a crash mid-group needs nothing special: the calls without a result are
still pending (decided allow) and the next step runs them again as a group; the recorded ones
are never re-run. A cancel barrier stops the group from starting more (the calls that never
started close `not_executed` through `cancel`); what already ran is recorded.

`concurrent` is the executor's property (`concurrent = True` on it: a Lambda tool, whose every
invocation is its own sandbox) or one of the built-in readers below. `todo_write` is read-only
but not concurrent: its `todos_updated` is ordered state; `ask_user` parks.
"""

from __future__ import annotations

import contextvars
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import takewhile
from typing import Any

from ..core.fold import Call, Fold
from ..writer import View
from .bindings import executor_for, is_deferred
from .context import EngineContext
from .loop import StepBase, result
from .replies import is_host_call
from .tools import Executor, ToolContext, ToolOutput

MAX_IN_FLIGHT = 8
CONCURRENT_BUILTINS = frozenset({"time", "read_file", "list_files", "glob", "grep"})


def is_concurrent(ctx: EngineContext, f: Fold, call: Call) -> bool:
    """A call that may run beside others: pinned read_only and its executor concurrent."""
    if call.effect_class != "read_only" or is_host_call(call) or call.name in ("ask_user", "todo_write"):
        return False
    if is_deferred(ctx, f, call.name):  # it runs off the turn, one placeholder at a time
        return False
    executor = executor_for(ctx, f, call.name)
    if executor is None:
        return False
    return bool(getattr(executor, "concurrent", False)) or (
        call.name in CONCURRENT_BUILTINS and ctx.tools.get(call.name) is executor
    )


def candidates_after(ctx: EngineContext, f: Fold, first: Call) -> list[Call]:
    """`first` and the consecutive pending calls after it that are concurrent (the calls whose
    decisions a step records together, so they can form one group)."""
    if not is_concurrent(ctx, f, first):
        return [first]
    out: list[Call] = []
    for call_id in f.pending:
        call = f.calls[call_id]
        if call.seq < first.seq:
            continue
        if not is_concurrent(ctx, f, call) or (call.decision is not None) != (first.decision is not None):
            break
        out.append(call)
    return out


def group_at(ctx: EngineContext, f: Fold, first: Call) -> list[Call]:
    """The parallel group that starts at `first` (a pending call decided allow): it and the
    consecutive pending calls after it that are concurrent and decided allow."""
    if first.decision != "allow":
        return []
    return list(takewhile(lambda c: c.decision == "allow", candidates_after(ctx, f, first)))


class Parallel(StepBase):
    def run_group(self, view: View, group: list[Call]) -> None:
        """Run the group in threads (a window of MAX_IN_FLIGHT), recording results in call order."""
        f = view.fold
        rec = view.record
        jobs: list[tuple[Call, Executor, ToolContext]] = []
        for call in group:
            executor = executor_for(self.ctx, f, call.name)
            assert executor is not None  # is_concurrent checked it
            tc = ToolContext(
                tenant=rec.tenant,
                thread_id=rec.thread_id,
                branch_id=self.branch_id,
                call_id=call.call_id,
                effect_key=None,
                attempt=1,
                clock=self.ctx.clock,
                stores=self.ctx.stores,
                workspace=f.workspace,
            )
            jobs.append((call, executor, tc))
        opener_seq = f.turn.opener["seq"] if f.turn.opener else 0
        pool = ThreadPoolExecutor(max_workers=min(MAX_IN_FLIGHT, len(jobs)), thread_name_prefix="tool")
        futures: list[Future[ToolOutput]] = []
        recorded = 0
        stopped = False
        with self.heartbeat(view):  # the lease outlives the group's tool bodies
            try:
                while recorded < len(jobs):
                    while (
                        not stopped and len(futures) < len(jobs) and len(futures) - recorded < MAX_IN_FLIGHT
                    ):
                        call, executor, tc = jobs[len(futures)]
                        # in this invocation's context (the local host's function identity)
                        ctx = contextvars.copy_context()
                        futures.append(pool.submit(ctx.run, run_one, executor, call.input, tc))
                    if recorded == len(futures):
                        return  # stopped: the rest never started
                    outs = [futures[recorded].result()]  # the earliest unrecorded call, in call order
                    while recorded + len(outs) < len(futures) and futures[recorded + len(outs)].done():
                        outs.append(futures[recorded + len(outs)].result())
                    batch = [(jobs[recorded + i][0].call_id, out) for i, out in enumerate(outs)]
                    stopped = self._record(batch, opener_seq) or stopped
                    recorded += len(outs)
            finally:
                pool.shutdown(wait=False, cancel_futures=True)

    def _record(self, batch: list[tuple[str, ToolOutput]], opener_seq: int) -> bool:
        """Append the batch's results (sticky: they ran); True when a cancel barrier landed."""
        box: dict[str, bool] = {"cancel": False}

        def build(v: View) -> list[Any]:
            box["cancel"] = v.fold.last_cancel_seq > opener_seq  # a barrier in this turn
            drafts = [
                result(call_id, out.text, "executed", out.is_error)
                for call_id, out in batch
                if call_id in v.fold.pending  # another writer may have closed it meanwhile
            ]
            if not drafts:
                raise _NothingToRecord
            return drafts

        try:
            self.append_sticky(build)
        except _NothingToRecord:
            pass
        return box["cancel"]


class _NothingToRecord(Exception):
    pass


def run_one(executor: Executor, args: dict[str, Any], tc: ToolContext) -> ToolOutput:
    try:
        return executor(args, tc)
    except Exception as exc:  # noqa: BLE001 - a read-only tool's failure is its result
        return ToolOutput(f"Error: {exc}", is_error=True)
