"""Runs for the stream mappers' tests (no tests of its own): real runs through the engine on moto,
driven through the Host's public routes (start, approvals, answers, cancel, settings, mode) and
the run-step worker, each exported as the store's JSONL.

`SCENARIOS` maps a name to a function `(Runs) -> None` that plays one run. The recorded logs in
`tests/data/streams/<name>.jsonl` are these scenarios' exports; re-record them with
`STREAMS_RECORD=1 .venv/bin/python -m pytest tests/test_streams_engine.py`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from threads_aws.core.canonical import new_uuid7
from threads_aws.engine.models import ScriptedModel
from threads_aws.streams import Cursor
from threads_aws.streams.frames import Out

from helpers import shared
from helpers.engine import make_ctx, scripted
from helpers.engine import run as advance
from helpers.host import ALICE, make_host

DATA = Path(__file__).resolve().parents[1] / "data" / "streams"


class Runs:
    """One thread on one Host + one worker: start a run, step it, answer what it asks."""

    def __init__(self, aws: Any, script: list[Any] | None = None, *, hook: Any = None) -> None:
        self.aws = aws
        self.host = make_host(aws)
        self.model = ScriptedModel(script, hook=hook) if script is not None or hook else None
        self.ctx = make_ctx(aws, models=scripted(self.model) if self.model is not None else None)
        self.thread_id = ""
        self.branch_id = ""
        self.run_id = ""

    def start(self, text: str, agent: str = "scripted") -> str:
        body: dict[str, Any] = {"agent": agent, "input": text}
        if self.thread_id:
            body["thread_id"] = self.thread_id
        out = self.host.start_run(ALICE, body, new_uuid7())
        self.thread_id, self.branch_id, self.run_id = out["thread_id"], out["branch_id"], out["run_id"]
        return self.run_id

    def step(self) -> str:
        return advance(self.ctx, self.branch_id).state

    def approvals(self) -> list[dict[str, Any]]:
        return self.host.pending_approvals(ALICE, self.thread_id, self.branch_id)

    def decide(self, decision: str = "grant", **extra: Any) -> None:
        (pending,) = self.approvals()
        self.host.decide_approval(
            ALICE, self.thread_id, pending["challenge_id"], {"decision": decision, **extra}
        )

    def answer(self, answer: Any) -> None:
        call_id = self.parked_call()
        self.host.answer_question(ALICE, self.thread_id, call_id, self.branch_id, {"answer": answer})

    def parked_call(self) -> str:
        parked = [e for e in self.events() if e["type"] == "parked"]
        return str(parked[-1]["data"]["address"]["id"])

    def cancel(self) -> None:
        self.host.cancel(ALICE, self.thread_id, self.branch_id)

    def set_model(self, provider: str, name: str) -> None:
        self.host.set_model(
            ALICE, self.thread_id, self.branch_id, {"model": {"provider": provider, "name": name}}
        )

    def set_mode(self, mode: str) -> None:
        self.host.set_mode(ALICE, self.thread_id, self.branch_id, {"mode": mode})

    def events(self) -> list[dict[str, Any]]:
        return list(self.ctx.writer.load(self.branch_id).fold.events)

    def export(self) -> bytes:
        return bytes(self.ctx.store.export(self.branch_id))


def _text(t: str, stop: str = "end_turn") -> dict[str, Any]:
    return {"content": [{"type": "text", "text": t}], "stop_reason": stop}


def _use(name: str, input: dict[str, Any], call_id: str, text: str | None = None) -> dict[str, Any]:
    content: list[dict[str, Any]] = [] if text is None else [{"type": "text", "text": text}]
    content.append({"type": "tool_use", "call_id": call_id, "name": name, "input": input})
    return {"content": content, "stop_reason": "tool_use"}


def text_only(aws: Any) -> Runs:
    r = Runs(aws, [_text("Hello! Streams are **on**.")])
    r.start("say hello")
    assert r.step() == "idle"
    return r


def tool_allowed(aws: Any) -> Runs:
    script = [_use("time", {}, "call_t1", text="Let me check the clock."), _text("It is late.")]
    r = Runs(aws, script)
    r.start("what time is it?")
    assert r.step() == "idle"
    return r


def todos(aws: Any) -> Runs:
    items = [
        {"id": "t1", "content": "wash", "status": "in_progress"},
        {"id": "t2", "content": "dry", "status": "pending"},
    ]
    done = [dict(items[0], status="completed"), dict(items[1], status="in_progress")]
    script = [
        _use("todo_write", {"todos": items}, "call_w1"),
        _use("todo_write", {"todos": done}, "call_w2"),
        _text("Laundry under way."),
    ]
    r = Runs(aws, script)
    r.start("do the laundry")
    assert r.step() == "idle"
    return r


def approval_granted(aws: Any) -> Runs:
    """An approval, and while it is parked a mode change and a model change (demo agent)."""
    r = Runs(aws)
    r.start("note: buy milk", agent="demo")
    assert r.step() == "parked"
    r.set_mode("accept_edits")
    r.set_model("demo", "demo-2")
    r.decide("grant", remember_rule="note")
    assert r.step() == "idle"
    return r


def approval_denied(aws: Any) -> Runs:
    r = Runs(aws)
    r.start("note: secret", agent="demo")
    assert r.step() == "parked"
    r.decide("deny", reason="not today")
    assert r.step() == "idle"
    return r


def policy_denied(aws: Any) -> Runs:
    """A call the policy denies outright (no approval), then the model gives up."""
    r = Runs(aws, [_use("note", {"text": "x"}, "call_n1"), _text("I may not take notes.")])
    r.start("take a note")
    r.set_mode("plan")  # plan mode denies effectful tools
    assert r.step() == "idle"
    return r


def question(aws: Any) -> Runs:
    ask = {"question": "Which colour?", "options": ["Red", "Blue"]}
    r = Runs(aws, [_use("ask_user", ask, "call_q1", text="One question first."), _text("Blue it is.")])
    r.start("paint the shed")
    assert r.step() == "parked"
    r.answer("blue")
    assert r.step() == "idle"
    return r


def cancel_parked(aws: Any) -> Runs:
    r = Runs(aws)
    r.start("note: never", agent="demo")
    assert r.step() == "parked"
    r.cancel()
    assert r.step() == "idle"
    return r


def cancel_in_flight(aws: Any) -> Runs:
    holder: dict[str, Runs] = {}

    def cancel_now(request: bytes, request_event_id: str) -> None:
        holder["r"].cancel()

    r = Runs(aws, [_use("note", {"text": "x"}, "call_c1")], hook=cancel_now)
    holder["r"] = r
    r.start("please note x")
    assert r.step() == "idle"
    return r


def failed_turn(aws: Any) -> Runs:
    err = {"error": {"reason": "overloaded", "http_status": 529}}
    r = Runs(aws, [err] * 4)  # the first try and policy.retry's 3 re-sends
    r.start("hi")
    while (state := r.step()) == "wait":  # each re-send waits its backoff: move the clock past it
        aws.clock.advance(30_000)
    assert state == "idle"
    return r


def thinking(aws: Any) -> Runs:
    """A response with a reasoning part (readable summary) before its text."""
    ref = {"bytes": 12, "media_type": "application/json", "sha256": "ab" * 32}
    reasoning = {
        "type": "reasoning",
        "provider": "scripted",
        "model": "scripted-1",
        "format": "thinking",
        "ref": ref,
        "summary": "The user wants a haiku.",
    }
    answer = {
        "content": [reasoning, {"type": "text", "text": "Old pond / a frog."}],
        "stop_reason": "end_turn",
    }
    r = Runs(aws, [answer])
    r.start("a haiku please")
    assert r.step() == "idle"
    return r


def model_error(aws: Any) -> Runs:
    """A stop reason the adapter can't name ends the turn `error`."""
    r = Runs(aws, [_text("garbled", stop="other")])
    r.start("hi")
    assert r.step() == "idle"
    return r


def two_runs(aws: Any) -> Runs:
    """Two runs on one thread: the second run's stream starts at its own user_input."""
    r = Runs(aws, [_text("First answer."), _use("time", {}, "call_t2"), _text("Second answer.")])
    r.start("first")
    assert r.step() == "idle"
    r.start("second")
    assert r.step() == "idle"
    return r


SCENARIOS: dict[str, Callable[[Any], Runs]] = {
    f.__name__: f
    for f in (
        text_only,
        tool_allowed,
        todos,
        approval_granted,
        approval_denied,
        policy_denied,
        question,
        cancel_parked,
        cancel_in_flight,
        failed_turn,
        thinking,
        model_error,
        two_runs,
    )
}


def log_events(raw: bytes) -> list[dict[str, Any]]:
    """The event lines of an export (header and head checkpoint dropped)."""
    out = []
    for line in raw.splitlines():
        obj = json.loads(line)
        if "seq" in obj and "type" in obj and "data" in obj:
            out.append(obj)
    return out


def recorded(name: str) -> list[dict[str, Any]]:
    return log_events((DATA / f"{name}.jsonl").read_bytes())


def recorded_names() -> list[str]:
    return sorted(p.stem for p in DATA.glob("*.jsonl"))


# ------------------------------------------------------------------ validation of the outputs
CRAZE_SCHEMA = shared.SPEC / "craze-event.schema.json"


def craze_validator() -> Any:
    import jsonschema

    if not shared.PRESENT:  # the seed schema is the contract's
        pytest.skip(shared.MISSING)

    schema = json.loads(CRAZE_SCHEMA.read_text())
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())


def check_craze(outs: list[Any]) -> list[dict[str, Any]]:
    """Every output validates against the closed seed schema; returns the events."""
    v = craze_validator()
    for o in outs:
        errors = sorted(v.iter_errors(o.data), key=str)
        assert not errors, (o.data, [e.message for e in errors])
        assert next(iter(o.data)) == "type"
    return [o.data for o in outs]


def check_agui_event(data: dict[str, Any]) -> Any:
    """One AG-UI event through the package's own models: it parses, carries no key the models
    don't know (they keep unknown keys, so look), and re-serializes to the same wire dict."""
    from ag_ui.core import Event
    from pydantic import BaseModel, TypeAdapter

    model = TypeAdapter(Event).validate_python(data)

    def no_extras(m: Any, path: str) -> None:
        if isinstance(m, BaseModel):
            assert not m.model_extra, f"{path}: unknown keys {sorted(m.model_extra)} in {data}"
            for name in type(m).model_fields:
                no_extras(getattr(m, name), f"{path}.{name}")
        elif isinstance(m, list):
            for i, x in enumerate(m):
                no_extras(x, f"{path}[{i}]")

    no_extras(model, data["type"])
    assert model.model_dump(by_alias=True, mode="json") == data
    return model


class AgUiVerifier:
    """The AG-UI event order rules (the TypeScript client's verifier, as the reference notes
    describe it), written here independently of the mapper: the first event is RUN_STARTED; no
    RUN_STARTED inside a run; nothing after RUN_ERROR; after RUN_FINISHED only RUN_STARTED;
    START → CONTENT* → END per message / tool call / reasoning id, never reopening an open id;
    STEP_FINISHED needs its STEP_STARTED; RUN_FINISHED never while anything is open."""

    def __init__(self) -> None:
        self.started = False
        self.active = False
        self.errored = False
        self.open: dict[str, set[str]] = {"msg": set(), "tool": set(), "reasoning": set(), "rmsg": set()}
        self.steps: set[str] = set()
        self.events = 0

    def feed(self, d: dict[str, Any]) -> None:
        typ = d["type"]
        assert not self.errored, f"{typ} after RUN_ERROR"
        if self.events == 0:
            assert typ == "RUN_STARTED", f"first event is {typ}"
        self.events += 1
        if typ == "RUN_STARTED":
            assert not self.active, "RUN_STARTED inside a run"
            self.active = True
            return
        assert self.active, f"{typ} outside a run"
        pairs = {
            "TEXT_MESSAGE": ("msg", "messageId"),
            "TOOL_CALL": ("tool", "toolCallId"),
            "REASONING_MESSAGE": ("rmsg", "messageId"),
        }
        for prefix, (kind, key) in pairs.items():
            if typ in (f"{prefix}_START", f"{prefix}_CONTENT", f"{prefix}_ARGS", f"{prefix}_END"):
                ident = d[key]
                if typ.endswith("_START"):
                    assert ident not in self.open[kind], f"{typ} reopens {ident}"
                    self.open[kind].add(ident)
                elif typ.endswith("_END"):
                    assert ident in self.open[kind], f"{typ} of unopened {ident}"
                    self.open[kind].discard(ident)
                else:
                    assert ident in self.open[kind], f"{typ} of unopened {ident}"
                return
        if typ == "REASONING_START":
            assert d["messageId"] not in self.open["reasoning"]
            self.open["reasoning"].add(d["messageId"])
        elif typ == "REASONING_END":
            assert d["messageId"] in self.open["reasoning"]
            assert d["messageId"] not in self.open["rmsg"], "REASONING_END with its message open"
            self.open["reasoning"].discard(d["messageId"])
        elif typ == "STEP_STARTED":
            assert d["stepName"] not in self.steps
            self.steps.add(d["stepName"])
        elif typ == "STEP_FINISHED":
            assert d["stepName"] in self.steps, "STEP_FINISHED without STEP_STARTED"
            self.steps.discard(d["stepName"])
        elif typ in ("RUN_FINISHED", "RUN_ERROR"):
            assert not self.steps and not any(self.open.values()), f"{typ} with {self.steps} {self.open}"
            self.active = False
            self.errored = typ == "RUN_ERROR"


def check_agui(outs: list[Any]) -> list[dict[str, Any]]:
    verifier = AgUiVerifier()
    for o in outs:
        check_agui_event(o.data)
        verifier.feed(o.data)
    return [o.data for o in outs]


def run_of(events: list[dict[str, Any]], start: int = 0) -> list[dict[str, Any]]:
    """The run subscription's events: from a user_input up to the next one."""
    starts = [i for i, e in enumerate(events) if e["type"] == "user_input"]
    i = starts[start]
    j = starts[start + 1] if start + 1 < len(starts) else len(events)
    return events[i:j]


def assert_asks_paired(data: list[dict[str, Any]]) -> None:
    """Each opening is ended by exactly one `ask` of its kind, after it and before the turn ends."""
    opened: dict[str, str] = {}
    ended: set[str] = set()
    for d in data:
        if d["type"] in ("permission", "question", "plan"):
            ask_id = d[d["type"]]["id"]
            assert ask_id not in opened
            opened[ask_id] = d["type"]
        elif d["type"] == "ask":
            a = d["ask"]
            assert a["id"] in opened and a["id"] not in ended
            assert a["kind"] == opened[a["id"]]
            ended.add(a["id"])
        elif d["type"] == "turn" and d["turn"]["phase"] == "ended":
            assert set(opened) == ended


def assert_tool_rows(data: list[dict[str, Any]]) -> None:
    """A row is re-published whole under its id; never changed after a terminal status; every
    row ends terminal by the turn's end."""
    rows: dict[str, dict[str, Any]] = {}
    for d in data:
        if d["type"] == "tool":
            row = d["tool"]
            old = rows.get(row["id"])
            if old is not None:
                assert old["status"] not in ("completed", "failed", "cancelled")
                for key in ("name", "toolName", "kind", "rawInput"):
                    assert row.get(key) == old.get(key)
                assert {k: v for k, v in row.items() if k != "at"} != {
                    k: v for k, v in old.items() if k != "at"
                }
            rows[row["id"]] = row
    assert all(r["status"] in ("completed", "failed", "cancelled") for r in rows.values())


def received_until(outs: list[Out], cursor: Cursor | None) -> list[Out]:
    """What a client holding `cursor` as its last id received."""
    assert cursor is not None
    if cursor.seq == 0:
        return []
    last = max(i for i, o in enumerate(outs) if o.id == str(cursor))
    return outs[: last + 1]


def ev(seq: int, type: str, data: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return {
        "seq": seq,
        "event_id": kw.pop("event_id", f"e{seq}"),
        "thread_id": "t",
        "branch_id": "b",
        "type": type,
        "time": 1_700_000_000_000 + seq,
        "actor": kw.pop("actor", {"kind": "host"}),
        "data": data,
    }


def use(seq: int, rid: str, *parts: dict[str, Any]) -> dict[str, Any]:
    return ev(
        seq,
        "model_response",
        {
            "request_event_id": rid,
            "content": list(parts),
            "stop_reason": "tool_use",
            "usage": {"input_tokens": None, "output_tokens": 3},
            "completeness": "complete",
        },
    )
