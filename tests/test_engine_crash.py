"""Crash injection: the worker dies right before or right after each of its appends (i.e. at
every point between two appends, incl. after a dispatch before its record), a fresh worker in a
new container takes over once the lease lapses, and the branch must still end where a clean
run ends: the same outcome, a valid export, and the effectful note stored exactly once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from helpers.engine import (
    USER,
    Crash,
    CrashingWriter,
    events,
    grant,
    make_ctx,
    new_thread,
    notes_stored,
    of_type,
    run,
    say,
    verify_export,
)
from threads_aws.core import projections
from threads_aws.engine.step import EngineContext
from threads_aws.writer import Draft, Writer


def answer(ctx: EngineContext, b: str, text: str) -> None:
    """What the answer route appends: the answered result and `resumed`, in one append."""
    f = ctx.writer.load(b).fold
    call_id = next(ident for (kind, ident) in f.parked if kind == "input")
    result = {"call_id": call_id, "completeness": "complete", "is_error": False, "origin": "answered"}
    ctx.writer.append(b, [Draft("tool_result", {**result, "preview": text}, USER)])
    cause = events(ctx, b)[-1]["event_id"]
    addr = {"id": call_id, "kind": "input"}
    ctx.writer.append(b, [Draft("resumed", {"address": addr, "cause_event_id": cause}, {"kind": "host"})])


def drive(ctx: EngineContext, b: str, holder: str) -> None:
    """Run to idle, acting as the approver/answerer whenever the branch parks on a human."""
    for _ in range(10):
        if run(ctx, b, holder=holder).state == "idle":
            return
        f = ctx.writer.load(b).fold
        kinds = {kind for kind, _ in f.parked}
        if "approval" in kinds and any(not c.consumed for c in f.challenges.values()):
            grant(ctx, b)
        elif "input" in kinds:
            answer(ctx, b, "blue")
        else:
            raise AssertionError(f"stuck: parked on {sorted(f.parked)}")
    raise AssertionError("no progress")


SCENARIOS = {"note": "note: milk", "time": "time", "todo": "todo: a; b", "ask": "ask: colour?", "text": "hi"}


def clean_appends(aws: Any, text: str) -> int:
    ctx = make_ctx(aws)
    counter = CrashingWriter(ctx.writer, at=-1, when="after")
    ctx.writer = counter
    b = new_thread(make_ctx(aws))
    say(ctx, b, text)
    n0 = counter.n
    human = make_ctx(aws)  # the human's appends (grant, answer) don't count
    for _ in range(10):
        if run(ctx, b, holder="w0").state == "idle":
            return counter.n - n0
        f = human.writer.load(b).fold
        if any(not c.consumed for c in f.challenges.values()):
            grant(human, b)
        else:
            answer(human, b, "blue")
    raise AssertionError("no progress")


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_worker_crash_at_every_append(aws: Any, scenario: str, when: str) -> None:
    text = SCENARIOS[scenario]
    total = clean_appends(aws, text)
    for at in range(1, total + 1):
        before = notes_stored(aws)
        ctx = make_ctx(aws)
        b = new_thread(ctx)
        run_id = say(ctx, b, text)
        human = make_ctx(aws)  # the API: another process, never crashes
        ctx.writer = CrashingWriter(ctx.writer, at=at, when=when)
        crashed = False
        for _ in range(10):
            try:
                out = run(ctx, b, holder="w1")
            except Crash:
                crashed = True
                break
            if out.state == "idle":
                break
            f = human.writer.load(b).fold
            if any(not c.consumed for c in f.challenges.values()):
                grant(human, b)
            elif any(kind == "input" for kind, _ in f.parked):
                answer(human, b, "blue")
        aws.clock.advance(120_000)  # the dead worker's lease lapses
        fresh = make_ctx(aws)
        drive(fresh, b, "w2")
        evs = events(fresh, b)
        label = f"{scenario} crash {when} append {at}"
        assert crashed, label
        assert [e["data"] for e in of_type(fresh, b, "turn_completed")] == [{"reason": "end_turn"}], label
        outcome = projections.run_outcome(evs, run_id, thread_id="t", branch_id=b)
        assert outcome is not None and outcome["status"] == "completed", label
        assert len(of_type(fresh, b, "tool_result")) == (0 if scenario == "text" else 1), label
        assert notes_stored(aws) - before == (1 if scenario == "note" else 0), label
        assert fresh.writer.load(b).fold.quiescent(), label
        verify_export(fresh, b)


class CancelAfter(Writer):
    """The worker's writer; right after its `at`-th append the cancel route lands a barrier."""

    def __init__(self, base: Writer, at: int, api: Writer) -> None:
        super().__init__(base.store, clock=base.clock)
        self.at, self.api, self.n = at, api, 0

    def append(self, branch_id: str, drafts: Sequence[Draft], **kw: Any) -> Any:
        out = super().append(branch_id, drafts, **kw)
        self.n += 1
        if self.n == self.at:
            self.api.append(branch_id, [Draft("cancel_requested", {"scope": "thread"}, USER)])
        return out


@pytest.mark.parametrize("scenario", ["note", "ask", "time"])
def test_cancel_landing_after_every_worker_append(aws: Any, scenario: str) -> None:
    text = SCENARIOS[scenario]
    total = clean_appends(aws, text)
    for at in range(1, total + 1):
        before = notes_stored(aws)
        ctx = make_ctx(aws)
        b = new_thread(ctx)
        run_id = say(ctx, b, text)
        human = make_ctx(aws)
        ctx.writer = CancelAfter(ctx.writer, at, Writer(aws.events(), clock=aws.clock))
        for _ in range(10):
            if run(ctx, b).state == "idle":
                break
            f = human.writer.load(b).fold
            if any(not c.consumed for c in f.challenges.values()):
                grant(human, b)
            elif any(kind == "input" for kind, _ in f.parked):
                answer(human, b, "blue")
        else:
            raise AssertionError("no progress")
        label = f"{scenario}: cancel after worker append {at}"
        f = ctx.writer.load(b).fold
        assert f.quiescent() and f.status() == "cancelled", label
        outcome = projections.run_outcome(f.events, run_id, thread_id="t", branch_id=b)
        assert outcome is not None and outcome["status"] in ("cancelled", "completed"), label
        stored = notes_stored(aws) - before
        origins = [e["data"]["origin"] for e in of_type(ctx, b, "tool_result")]
        if stored:
            assert origins and origins[0] in ("executed", "materialized_from_commit", "interrupted"), label
        if "executed" in origins and scenario == "note":
            assert stored == 1, label
        cancel_seq = f.last_cancel_seq
        assert all(e["seq"] < cancel_seq for e in of_type(ctx, b, "effect_begin")), label
        verify_export(ctx, b)
