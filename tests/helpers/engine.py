"""Shared helpers of the engine tests (no tests of its own)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from threads_aws.agents import load_agents
from threads_aws.core import render
from threads_aws.core.canonical import new_uuid7
from threads_aws.core.importer import import_log
from threads_aws.core.lines import StoredLine, header_line
from threads_aws.engine.models import adapter_for
from threads_aws.engine.step import EngineContext, StepOutcome, advance
from threads_aws.store import NewBranch
from threads_aws.writer import Draft, Writer

ALICE = {"issuer": "api", "subject": "alice", "tenant": "acme"}
USER = {"kind": "user", "principal": ALICE}
APPROVER = {"kind": "approver", "principal": ALICE}


def make_ctx(aws: Any, models: Any = None, **kw: Any) -> EngineContext:
    ctx: EngineContext = aws.services().engine(models=models or adapter_for, **kw)
    return ctx


def scripted(model: Any) -> Any:
    return lambda _m, _a: model


def new_thread(ctx: EngineContext, agent: str = "demo", **policy: Any) -> str:
    thread_id, branch_id = new_uuid7(), new_uuid7()
    header = StoredLine.of_header(header_line(thread_id, branch_id, ctx.clock()))
    ctx.store.create_branch(
        NewBranch(thread_id=thread_id, tenant="acme", branch_id=branch_id, header=header, create_thread=True)
    )
    started = load_agents()[agent].thread_started()
    if policy:
        started["policy"]["permissions"].update(policy)
    ctx.writer.append(branch_id, [Draft("thread_started", started, {"kind": "host"})])
    return branch_id


def say(ctx: EngineContext, branch_id: str, text: str) -> str:
    _, lines = ctx.writer.append(branch_id, [Draft("user_input", {"source": "api", "text": text}, USER)])
    return str(lines[0].event_id)


def run(ctx: EngineContext, branch_id: str, holder: str = "worker-1") -> StepOutcome:
    return advance(ctx, branch_id, holder_id=holder, deadline_ms=ctx.clock() + 10**9)


def events(ctx: EngineContext, branch_id: str) -> list[dict[str, Any]]:
    return list(ctx.writer.load(branch_id).fold.events)


def types(ctx: EngineContext, branch_id: str, since: int = 0) -> list[str]:
    return [e["type"] for e in events(ctx, branch_id)[since:]]


def of_type(ctx: EngineContext, branch_id: str, typ: str) -> list[dict[str, Any]]:
    return [e for e in events(ctx, branch_id) if e["type"] == typ]


def verify_export(ctx: EngineContext, branch_id: str) -> Any:
    """The exported branch re-imports clean and every request re-renders to its bytes."""
    imp = import_log(ctx.store.export(branch_id))
    render.verify_requests(imp.fold.events, ctx.artifacts.get_ref)
    return imp


def grant(ctx: EngineContext, branch_id: str, *, deny: bool = False) -> None:
    """What the approvals API appends: the decision and `resumed`, under the writer epoch."""
    f = ctx.writer.load(branch_id).fold
    (challenge_id, ch) = next((k, c) for k, c in f.challenges.items() if not c.consumed)
    data = {"args_hash": ch.args_hash, "call_id": ch.call_id, "challenge_id": challenge_id}
    ctx.writer.append(branch_id, [Draft("approval_denied" if deny else "approval_granted", data, APPROVER)])
    cause = ctx.writer.load(branch_id).fold.events[-1]["event_id"]
    addr = {"id": challenge_id, "kind": "approval"}
    ctx.writer.append(
        branch_id, [Draft("resumed", {"address": addr, "cause_event_id": cause}, {"kind": "host"})]
    )


class Crash(BaseException):
    """A simulated process death (not an Exception: nothing may catch it)."""


class Points:
    """Counts a worker's durable steps (appends, thread creations) and dies before
    (`when='before'`) or after (`'after'`) the `at`-th; `at=-1` only counts."""

    def __init__(self, at: int, when: str) -> None:
        self.at, self.when, self.n = at, when, 0

    def around(self, fn: Any, *args: Any, **kw: Any) -> Any:
        self.n += 1
        if self.n == self.at and self.when == "before":
            raise Crash
        out = fn(*args, **kw)
        if self.n == self.at and self.when == "after":
            raise Crash
        return out


class CrashingWriter(Writer):
    """Dies before (`when='before'`) or after (`'after'`) its `at`-th append; given `points`,
    its appends count among those (shared with a CrashingLog)."""

    def __init__(self, base: Writer, at: int = -1, when: str = "after", points: Points | None = None) -> None:
        super().__init__(base.store, clock=base.clock)
        self.points = points or Points(at, when)

    @property
    def n(self) -> int:
        return self.points.n

    def append(self, branch_id: str, drafts: Sequence[Draft], **kw: Any) -> Any:
        return self.points.around(super().append, branch_id, drafts, **kw)


class CrashingLog:
    """The event log with thread creation as a crash point (everything else delegated)."""

    def __init__(self, base: Any, points: Points) -> None:
        self.base, self.points = base, points

    def create_branch(self, spec: Any) -> Any:
        return self.points.around(self.base.create_branch, spec)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.base, name)


def crashing(aws: Any, at: int, when: str) -> tuple[EngineContext, Points]:
    """A worker that dies at its `at`-th append or thread creation (one count over both)."""
    ctx = make_ctx(aws)
    points = Points(at, when)
    ctx.writer = CrashingWriter(ctx.writer, points=points)
    ctx.stores = dataclasses.replace(ctx.stores, events=CrashingLog(ctx.stores.events, points))
    return ctx, points


def dies_creating_a_thread(aws: Any) -> EngineContext:
    """A worker that dies as it creates its first thread (a child, a handoff target)."""
    ctx = make_ctx(aws)
    ctx.stores = dataclasses.replace(ctx.stores, events=CrashingLog(ctx.stores.events, Points(1, "before")))
    return ctx


class CrashAfter(Writer):
    """Dies right after each append that records an event of type `typ`."""

    def __init__(self, base: Writer, typ: str) -> None:
        super().__init__(base.store, clock=base.clock)
        self.typ = typ

    def append(self, branch_id: str, drafts: Sequence[Any], **kw: Any) -> Any:
        out = super().append(branch_id, drafts, **kw)
        if any(getattr(d, "type", None) == self.typ for d in drafts):
            raise Crash
        return out


def notes_stored(aws: Any) -> int:
    """The tenant's note rows in DynamoDB (what a live `note` call writes)."""
    out = aws.ddb.query(
        TableName=aws.resources.state_table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": "NOTE#acme"}},
        Select="COUNT",
        ConsistentRead=True,
    )
    return int(out["Count"])
