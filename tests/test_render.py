"""Render v1 (threads_aws.core.render): conformance hashes, verification order, and each render rule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import shared
from threads_aws.core.canonical import canonical_bytes, sha256_hex
from threads_aws.core.errors import LogError
from threads_aws.core.render import (
    CLEARED_RESULT_TEXT,
    COMPACTION_INSTRUCTION,
    Renderer,
    declared_prefix,
    escape,
    history_prefix_holds,
    history_prefix_violation,
    line0,
    render_request,
    request_ref_for,
    transcript,
    verify_requests,
)

CASES = shared.CASES

# ---------------------------------------------------------------------------------------------
# Conformance corpus


def _parse_lines(path: Path) -> list[Any]:
    out = []
    for raw in path.read_bytes().split(b"\n"):
        if not raw:
            continue
        try:
            out.append(json.loads(raw))
        except ValueError:
            out.append(None)  # a deliberately unreadable line
    return out


def _events(lines: list[Any]) -> list[dict[str, Any]]:
    return [x for x in lines if isinstance(x, dict) and "type" in x and "seq" in x]


def _error_seq(case: Path) -> int | None:
    exp = json.loads((case / "expected.json").read_text())
    if exp.get("outcome") == "error":
        return (exp.get("error") or {}).get("seq")
    return None


def _no_artifacts(ref: dict[str, Any]) -> bytes:
    raise LogError("artifact_missing", None, ref["sha256"])


def _case_artifacts(case: Path):
    def get(ref: dict[str, Any]) -> bytes:
        p = case / "artifacts" / ref["sha256"]
        if not p.exists():
            raise LogError("artifact_missing", None, ref["sha256"])
        return p.read_bytes()

    return get


@shared.needs
def test_conformance_request_hashes() -> None:
    """Every model_request of every case log: our declared_prefix and request bytes hash exactly
    as recorded. Requests at or after an error case's breaking seq are not trusted input (e.g.
    chain-middle-edit-detected edits seq 2), so only earlier requests count there; a header-level
    error (seq 0) leaves every event line intact, so all requests count."""
    checked = 0
    logs = 0
    mismatches: list[str] = []
    for case in sorted(CASES.iterdir()):
        err = _error_seq(case)
        for log in sorted(case.glob("log*.jsonl")):
            events = _events(_parse_lines(log))
            if not any(e["type"] == "model_request" for e in events):
                continue
            logs += 1
            r = Renderer()
            for ev in events:
                if ev["type"] == "model_request" and (not err or ev["seq"] < err):
                    checked += 1
                    head = r.line0()
                    body = r.request(_no_artifacts, purpose=ev["data"].get("purpose", "turn"))
                    dp, rr = ev["data"]["declared_prefix"], ev["data"]["request_ref"]
                    if dp != {"bytes": len(head), "sha256": sha256_hex(head)}:
                        mismatches.append(f"{log.relative_to(CASES)} seq {ev['seq']}: declared_prefix")
                    if (rr["bytes"], rr["sha256"]) != (len(body), sha256_hex(body)):
                        mismatches.append(f"{log.relative_to(CASES)} seq {ev['seq']}: request_ref")
                r.feed(ev)
    print(f"conformance: {checked} requests checked in {logs} logs")
    assert not mismatches, mismatches
    assert logs == 29
    assert checked == 54


@shared.needs
def test_conformance_transcripts() -> None:
    compared = 0
    for case in sorted(CASES.iterdir()):
        exp_path = case / "expected.json"
        state = json.loads(exp_path.read_text()).get("state") or {}
        if "transcript" not in state or not (case / "log.jsonl").exists():
            continue
        assert transcript(_events(_parse_lines(case / "log.jsonl"))) == state["transcript"], case.name
        compared += 1
    assert compared >= 8


@shared.needs
def test_conformance_shipped_request_artifacts() -> None:
    case = CASES / "answer-without-open-question-rejected"
    events = [e for e in _events(_parse_lines(case / "log.jsonl")) if e["seq"] < _error_seq(case)]
    assert verify_requests(events, _case_artifacts(case)) == 1
    (artifact,) = (case / "artifacts").iterdir()
    assert render_request(events[:2], _no_artifacts) == artifact.read_bytes()

    case = CASES / "fork-not-at-snapshot-error"
    events = _events(_parse_lines(case / "log.jsonl"))
    requests = [e for e in events if e["type"] == "model_request"]
    last = requests[-1]
    before = [e for e in events if e["seq"] < last["seq"]]
    assert (
        render_request(before, _no_artifacts)
        == (case / "artifacts" / last["data"]["request_ref"]["sha256"]).read_bytes()
    )
    # only the last request's bytes ship: verification stops at the first request's missing artifact
    with pytest.raises(LogError) as ei:
        verify_requests(events, _case_artifacts(case))
    assert (ei.value.code, ei.value.seq) == ("artifact_missing", requests[0]["seq"])


# ---------------------------------------------------------------------------------------------
# Synthetic logs

ALICE = {"issuer": "api", "subject": "alice", "tenant": "acme"}
BOB = {"issuer": "api", "subject": "bob", "tenant": "acme"}
TOOLS = [
    {
        "description": "Read a file.",
        "effect_class": "read_only",
        "input_schema": {"properties": {"path": {"type": "string"}}, "type": "object"},
        "name": "read_file",
        "output_schema": {"type": "string"},
    },
    {
        "dedup_window_ms": 60000,
        "defer_loading": True,
        "description": "Send mail.",
        "effect_class": "idempotent",
        "ends_turn": False,
        "input_schema": {"type": "object"},
        "name": "send_mail",
    },
]
SETTINGS_B = {
    "adapter": {"name": "scripted", "settings": {"flavour": "b"}, "version": "2"},
    "model": {"name": "scripted-2", "provider": "scripted"},
    "model_params": {"max_tokens": 2048, "temperature": 0.5},
    "reasoning_carryover": "keep",
}


class Store:
    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}

    def put(self, data: bytes, media_type: str = "text/plain") -> dict[str, Any]:
        self.blobs[sha256_hex(data)] = data
        return {"bytes": len(data), "media_type": media_type, "sha256": sha256_hex(data)}

    def get(self, ref: dict[str, Any]) -> bytes:
        data = self.blobs.get(ref["sha256"])
        if data is None:
            raise LogError("artifact_missing", None, ref["sha256"])
        if len(data) != ref["bytes"] or sha256_hex(data) != ref["sha256"]:
            raise LogError("artifact_corrupt", None, ref["sha256"])
        return data


class Log:
    """A list of event dicts plus an artifact store; `request()` records a model_request the way
    the loop does (declared prefix and request_ref rendered from the events before it)."""

    def __init__(
        self, tools: list[dict[str, Any]] | None = None, instructions: str = "You are a test agent."
    ) -> None:
        self.events: list[dict[str, Any]] = []
        self.store = Store()
        self.add(
            "thread_started",
            {
                "adapter": {"name": "scripted", "settings": {}, "version": "1"},
                "agent_name": "demo",
                "config_hash": "0" * 64,
                "instructions": instructions,
                "model": {"name": "scripted-1", "provider": "scripted"},
                "model_params": {"max_tokens": 1024},
                "tools": TOOLS if tools is None else tools,
            },
        )

    def add(self, type_: str, data: dict[str, Any], actor: dict[str, Any] | None = None) -> dict[str, Any]:
        seq = len(self.events) + 1
        ev = {
            "actor": actor or {"kind": "host"},
            "critical": True,
            "data": data,
            "epoch": 1,
            "event_id": f"0192e000-0000-7000-8000-{seq:012x}",
            "seq": seq,
            "type": type_,
            "type_version": 1,
        }
        self.events.append(ev)
        return ev

    def user(self, text: str, principal: dict[str, Any] = ALICE, type_: str = "user_input") -> dict[str, Any]:
        return self.add(type_, {"source": "api", "text": text}, {"kind": "user", "principal": principal})

    def request(self, purpose: str = "turn") -> dict[str, Any]:
        body = render_request(self.events, self.store.get, purpose=purpose)
        data: dict[str, Any] = {
            "attempt": 1,
            "declared_prefix": declared_prefix(self.events),
            "request_ref": self.store.put(body, "application/x-ndjson"),
        }
        if purpose != "turn":
            data["purpose"] = purpose
        return self.add("model_request", data)

    def respond(
        self, req: dict[str, Any], content: list[dict[str, Any]], stop: str = "end_turn"
    ) -> dict[str, Any]:
        return self.add(
            "model_response",
            {
                "completeness": "complete",
                "content": content,
                "request_event_id": req["event_id"],
                "stop_reason": stop,
                "usage": {"input_tokens": 10, "output_tokens": 5},
            },
            {"kind": "model"},
        )

    def call(
        self, req: dict[str, Any], call_id: str, name: str = "read_file", **result: Any
    ) -> dict[str, Any]:
        self.add(
            "tool_call",
            {"call_id": call_id, "input": {"path": "a"}, "name": name, "request_event_id": req["event_id"]},
        )
        data = {
            "call_id": call_id,
            "completeness": "complete",
            "is_error": False,
            "origin": "executed",
            "preview": "ok",
        }
        data.update(result)
        return self.add("tool_result", data, {"kind": "tool"})

    def tool_turn(self, call_id: str, **result: Any) -> dict[str, Any]:
        req = self.request()
        self.respond(
            req,
            [{"call_id": call_id, "input": {"path": "a"}, "name": "read_file", "type": "tool_use"}],
            "tool_use",
        )
        return self.call(req, call_id, **result)

    def render(self, purpose: str = "turn") -> bytes:
        return render_request(self.events, self.store.get, purpose=purpose)

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(x) for x in self.render().split(b"\n") if x]


def user_line(text: str) -> dict[str, Any]:
    return {"content": [{"text": text, "type": "text"}], "role": "user"}


def _is_jcs_lines(body: bytes) -> bool:
    assert body.endswith(b"\n")
    return all(canonical_bytes(json.loads(x)) == x for x in body[:-1].split(b"\n"))


# ---------------------------------------------------------------------------------------------
# Line 0 and C7


def test_line0_shape_tools_and_settings_epochs() -> None:
    log = Log()
    head = line0(log.events)
    assert head.endswith(b"\n") and b"\n" not in head[:-1]
    value = json.loads(head)
    assert value == {
        "adapter": {"name": "scripted", "settings": {}, "version": "1"},
        "model": {"name": "scripted-1", "provider": "scripted"},
        "params": {"max_tokens": 1024},
        "system": "You are a test agent.",
        "tools": [
            {"description": "Read a file.", "input_schema": TOOLS[0]["input_schema"], "name": "read_file"},
            {"deferred": True, "description": "Send mail.", "name": "send_mail"},
        ],
    }
    assert canonical_bytes(value) + b"\n" == head
    # byte-equal across the epoch, whatever else is appended
    log.user("hi")
    log.respond(log.request(), [{"text": "hello", "type": "text"}])
    log.add("turn_completed", {"reason": "end_turn"})
    assert line0(log.events) == head
    assert declared_prefix(log.events) == {"bytes": len(head), "sha256": sha256_hex(head)}
    # a settings change starts a new epoch: model/params/adapter change, system/tools stay
    log.add(
        "settings_changed", {"reason": "user", "settings": SETTINGS_B}, {"kind": "user", "principal": ALICE}
    )
    head_b = json.loads(line0(log.events))
    assert head_b["model"] == SETTINGS_B["model"] and head_b["params"] == SETTINGS_B["model_params"]
    assert head_b["adapter"] == SETTINGS_B["adapter"]
    assert head_b["system"] == value["system"] and head_b["tools"] == value["tools"]
    assert b'"temperature":0.5' in line0(log.events)


def _synthetic_turns() -> Log:
    log = Log()
    log.user("Read a.")
    log.tool_turn("call_1", preview="A")
    log.respond(log.request(), [{"text": "a is A", "type": "text"}])
    log.add("turn_completed", {"reason": "end_turn"})
    log.user("Again.")
    log.tool_turn("call_2", preview="B")
    log.respond(log.request(), [{"text": "done", "type": "text"}])
    log.add("turn_completed", {"reason": "end_turn"})
    return log


def test_verify_requests_passes_on_recorded_log() -> None:
    log = _synthetic_turns()
    assert verify_requests(log.events, log.store.get) == 4


@pytest.mark.parametrize("variant", ["starts_with_line0", "line0_plus_more", "other_sha", "other_bytes"])
def test_prefix_changed(variant: str) -> None:
    log = _synthetic_turns()
    target = [e for e in log.events if e["type"] == "model_request"][2]
    head = line0(log.events[: target["seq"] - 1])
    if variant == "starts_with_line0":  # a prefix of line 0 is not line 0
        bad = {"bytes": len(head) - 1, "sha256": sha256_hex(head[:-1])}
    elif variant == "line0_plus_more":  # bytes that only start with line 0
        more = head + b'{"content":[],"role":"user"}\n'
        bad = {"bytes": len(more), "sha256": sha256_hex(more)}
    elif variant == "other_sha":
        bad = {"bytes": len(head), "sha256": "0" * 64}
    else:
        bad = {"bytes": len(head) + 1, "sha256": sha256_hex(head)}
    target["data"]["declared_prefix"] = bad
    with pytest.raises(LogError) as ei:
        verify_requests(log.events, log.store.get)
    assert (ei.value.code, ei.value.seq) == ("prefix_changed", target["seq"])


def test_prefix_checked_per_epoch_and_baseline_not_reset() -> None:
    log = _synthetic_turns()
    log.add(
        "settings_changed", {"reason": "user", "settings": SETTINGS_B}, {"kind": "user", "principal": ALICE}
    )
    log.user("Third.")
    req = log.request()
    assert verify_requests(log.events, log.store.get) == 5
    # declaring the old epoch's prefix after the change is prefix_changed
    req["data"]["declared_prefix"] = declared_prefix(log.events[:3])
    with pytest.raises(LogError) as ei:
        verify_requests(log.events, log.store.get)
    assert (ei.value.code, ei.value.seq) == ("prefix_changed", req["seq"])


# ---------------------------------------------------------------------------------------------
# Verification failures


def test_request_hash_mismatch_on_tampered_artifact() -> None:
    log = _synthetic_turns()
    target = [e for e in log.events if e["type"] == "model_request"][1]
    body = log.store.get(target["data"]["request_ref"])
    tampered = body.replace(b'"text":"A"', b'"text":"Z"')
    assert tampered != body
    target["data"]["request_ref"] = log.store.put(tampered, "application/x-ndjson")  # verifies as an artifact
    with pytest.raises(LogError) as ei:
        verify_requests(log.events, log.store.get)
    assert (ei.value.code, ei.value.seq) == ("request_hash_mismatch", target["seq"])


def test_request_artifact_missing_and_corrupt() -> None:
    log = _synthetic_turns()
    target = [e for e in log.events if e["type"] == "model_request"][1]
    ref = target["data"]["request_ref"]
    good = log.store.blobs.pop(ref["sha256"])
    with pytest.raises(LogError) as ei:
        verify_requests(log.events, log.store.get)
    assert (ei.value.code, ei.value.seq) == ("artifact_missing", target["seq"])
    log.store.blobs[ref["sha256"]] = good[:-1] + b" "  # same length, wrong bytes
    lenient = lambda r: log.store.blobs[r["sha256"]]  # noqa: E731 - a getter that does not verify
    with pytest.raises(LogError) as ei:
        verify_requests(log.events, lenient)
    assert (ei.value.code, ei.value.seq) == ("artifact_corrupt", target["seq"])


def test_part_artifact_errors_name_the_carrying_event() -> None:
    log = Log()
    image = log.store.put(b"\x89PNG fake", "image/png")
    inp = log.add(
        "user_input",
        {
            "content": [
                {"text": "Look:", "type": "text"},
                {"height": 1, "ref": image, "type": "image_ref", "width": 1},
            ],
            "source": "api",
        },
        {"kind": "user", "principal": ALICE},
    )
    req = log.request()
    assert json.loads(log.render().split(b"\n")[1])["content"][1]["ref"] == image  # rendered as recorded
    assert verify_requests(log.events, log.store.get) == 1
    del log.store.blobs[image["sha256"]]
    with pytest.raises(LogError) as ei:
        verify_requests(log.events, log.store.get)
    assert (ei.value.code, ei.value.seq) == ("artifact_missing", inp["seq"])
    assert req["seq"] > inp["seq"]
    log.store.blobs[image["sha256"]] = b"\x89PNG fakf"
    with pytest.raises(LogError) as ei:
        render_request(log.events, lambda r: log.store.blobs[r["sha256"]])
    assert (ei.value.code, ei.value.seq) == ("artifact_corrupt", inp["seq"])


def test_first_failure_wins_prefix_before_artifact() -> None:
    log = _synthetic_turns()
    target = [e for e in log.events if e["type"] == "model_request"][1]
    del log.store.blobs[target["data"]["request_ref"]["sha256"]]
    target["data"]["declared_prefix"] = {"bytes": 1, "sha256": "0" * 64}
    with pytest.raises(LogError) as ei:
        verify_requests(log.events, log.store.get)
    assert ei.value.code == "prefix_changed"


# ---------------------------------------------------------------------------------------------
# History prefix


def test_history_prefix_holds_on_multi_turn_log() -> None:
    log = _synthetic_turns()
    log.user("A steer", type_="steer")  # steer appends
    log.request()
    assert history_prefix_holds(log.events, log.store.get)
    bodies = [log.store.get(e["data"]["request_ref"]) for e in log.events if e["type"] == "model_request"]
    assert all(b.startswith(a) and len(b) > len(a) for a, b in zip(bodies, bodies[1:], strict=False))
    assert all(_is_jcs_lines(b) for b in bodies)


def test_history_prefix_violation_and_excuses() -> None:
    log = _synthetic_turns()
    reqs = [e for e in log.events if e["type"] == "model_request"]
    # a recorded request that rewrote history is reported as the pair
    body = log.store.get(reqs[2]["data"]["request_ref"]).replace(b'"text":"A"', b'"text":"Z"')
    reqs[2]["data"]["request_ref"] = log.store.put(body, "application/x-ndjson")
    assert history_prefix_violation(log.events, log.store.get) == (reqs[1]["seq"], reqs[2]["seq"])
    assert not history_prefix_holds(log.events, log.store.get)

    # a context edit between two requests excuses the rewrite
    log = _synthetic_turns()
    log.add("context_edited", {"edits": [{"action": "clear", "call_id": "call_1"}], "reason": "threshold"})
    log.user("Next.")
    log.request()
    assert history_prefix_holds(log.events, log.store.get)
    assert verify_requests(log.events, log.store.get) == 5

    # a denying before_input hook excuses it too
    log = _synthetic_turns()
    first_input = log.events[1]
    log.add(
        "hook_decision",
        {
            "decision": "deny",
            "extension": "guard",
            "hook": "before_input",
            "input_event_id": first_input["event_id"],
        },
    )
    log.request()
    assert history_prefix_holds(log.events, log.store.get)

    # a compaction request is skipped: the turn request after it still extends the last turn request
    log = _synthetic_turns()
    side = log.request("compaction")
    log.respond(side, [{"text": "summary", "type": "text"}])
    log.add("compaction_failed", {"reason": "still_over_threshold", "stage": "summary"})
    log.user("More.")
    log.request()
    assert history_prefix_holds(log.events, log.store.get)


# ---------------------------------------------------------------------------------------------
# Per-event rules


def test_user_steer_response_and_result_lines() -> None:
    log = Log()
    log.user("Hi")
    req = log.request()
    log.respond(
        req,
        [
            {"text": "Reading", "type": "text"},
            {"call_id": "c1", "input": {"path": "a"}, "name": "read_file", "type": "tool_use"},
        ],
        "tool_use",
    )
    log.call(req, "c1", preview="body", is_error=True)
    log.user("also this", type_="steer")
    req2 = log.request()
    log.respond(req2, [{"call_id": "c2", "input": {}, "name": "read_file", "type": "tool_use"}], "tool_use")
    log.call(
        req2,
        "c2",
        content=[{"text": "part one", "type": "text"}, {"text": "two", "type": "text"}],
        preview="p",
    )
    assert log.lines()[1:] == [
        user_line("Hi"),
        {
            "content": [
                {"text": "Reading", "type": "text"},
                {"call_id": "c1", "input": {"path": "a"}, "name": "read_file", "type": "tool_use"},
            ],
            "role": "assistant",
        },
        {"call_id": "c1", "content": [{"text": "body", "type": "text"}], "is_error": True, "role": "tool"},
        user_line("also this"),
        {
            "content": [{"call_id": "c2", "input": {}, "name": "read_file", "type": "tool_use"}],
            "role": "assistant",
        },
        {
            "call_id": "c2",
            "content": [{"text": "part one", "type": "text"}, {"text": "two", "type": "text"}],
            "is_error": False,
            "role": "tool",
        },
    ]
    assert [t["role"] for t in transcript(log.events)] == [
        "user",
        "assistant",
        "tool",
        "user",
        "assistant",
        "tool",
    ]
    assert _is_jcs_lines(log.render())


def test_late_result_and_host_originated_call() -> None:
    log = Log()
    log.user("go")
    req = log.request()
    log.respond(req, [{"call_id": "bg", "input": {}, "name": "read_file", "type": "tool_use"}], "tool_use")
    log.call(req, "bg", origin="deferred", preview="running in background")
    # a host-originated call (no tool_use part proposed it) renders nothing, nor does its result
    log.add(
        "tool_call",
        {
            "call_id": "host_1",
            "input": {"text": "hi"},
            "name": "channel_send",
            "request_event_id": req["event_id"],
        },
    )
    log.add(
        "tool_result",
        {
            "call_id": "host_1",
            "completeness": "complete",
            "is_error": False,
            "origin": "executed",
            "preview": "sent",
        },
        {"kind": "tool"},
    )
    log.add("heartbeat", {"running_call_ids": ["bg", "x.2"]})
    log.add(
        "tool_result_late",
        {"call_id": "bg", "completeness": "complete", "is_error": False, "preview": "finished"},
        {"kind": "tool"},
    )
    lines = log.lines()[1:]
    assert lines[2] == {
        "call_id": "bg",
        "content": [{"text": "running in background", "type": "text"}],
        "is_error": False,
        "role": "tool",
    }
    assert lines[3] == user_line("<heartbeat>\nrunning: bg, x.2\n</heartbeat>")
    assert lines[4] == {
        "call_id": "bg",
        "content": [{"text": "finished", "type": "text"}],
        "is_error": False,
        "late": True,
        "role": "tool",
    }
    assert len(lines) == 5
    assert [t["role"] for t in transcript(log.events)] == ["user", "assistant", "tool", "context", "tool"]


def test_denied_input_renders_nothing() -> None:
    log = Log()
    a = log.user("bad input")
    log.add(
        "hook_decision",
        {"decision": "deny", "extension": "guard", "hook": "before_input", "input_event_id": a["event_id"]},
    )
    b = log.user("steered bad", type_="steer")
    log.add(
        "hook_decision",
        {"decision": "failed", "extension": "guard", "hook": "before_input", "input_event_id": b["event_id"]},
    )
    c = log.user("fine")
    log.add(
        "hook_decision",
        {
            "decision": "proceed",
            "extension": "guard",
            "hook": "before_input",
            "input_event_id": c["event_id"],
        },
    )
    log.add(
        "hook_decision",
        {"decision": "deny", "extension": "guard", "hook": "before_tool", "input_event_id": c["event_id"]},
    )
    assert log.lines()[1:] == [user_line("fine")]
    assert transcript(log.events) == [{"event_id": c["event_id"], "role": "user"}]


def test_escaping_and_injected_wrappers() -> None:
    assert escape("&<>\"'&amp;") == "&amp;&lt;&gt;&quot;&#39;&amp;amp;"
    log = Log()
    log.user("q")
    doc = log.store.put(b"from <artifact> & 'co'")
    log.add(
        "injected",
        {
            "origin": {"id": 'doc "1"'},
            "source": "knowledge",
            "text": "a < b && c > \"d\" 'e'",
            "trust": "untrusted_reference",
        },
    )
    log.add(
        "injected",
        {
            "origin": {"id": "terse"},
            "source": "output_style",
            "text": "Be <brief>.",
            "trust": "trusted_instruction",
        },
        {"kind": "user", "principal": ALICE},
    )
    att = log.add(
        "injected",
        {"origin": {"id": "f.txt"}, "ref": doc, "source": "attachment", "trust": "untrusted_reference"},
    )
    lines = log.lines()[2:]
    assert lines[0] == user_line(
        '<reference source="knowledge" id="doc &quot;1&quot;" untrusted="true">\n'
        "a &lt; b &amp;&amp; c &gt; &quot;d&quot; &#39;e&#39;\n</reference>"
    )
    assert lines[1] == user_line('<context source="output_style" id="terse">\nBe &lt;brief&gt;.\n</context>')
    assert lines[2] == user_line(
        '<reference source="attachment" id="f.txt" untrusted="true">\n'
        "from &lt;artifact&gt; &amp; &#39;co&#39;\n</reference>"
    )
    assert [t["role"] for t in transcript(log.events)] == ["user", "context", "context", "context"]
    # injected text from an artifact must be UTF-8
    bad = log.store.put(b"\xff\xfe")
    att["data"]["ref"] = bad
    with pytest.raises(LogError) as ei:
        log.render()
    assert (ei.value.code, ei.value.seq) == ("artifact_corrupt", att["seq"])


def test_memory_recalled_for_another_principal_is_hidden() -> None:
    log = Log()
    log.user("hi", ALICE)
    mem = log.add(
        "injected",
        {
            "origin": {"id": "m1"},
            "source": "memory",
            "text": "alice likes tea",
            "trust": "untrusted_reference",
        },
    )
    log.respond(log.request(), [{"text": "ok", "type": "text"}])
    log.add("turn_completed", {"reason": "end_turn"})
    assert any(t["event_id"] == mem["event_id"] for t in transcript(log.events))
    log.user("hello", BOB)
    assert all(t["event_id"] != mem["event_id"] for t in transcript(log.events))
    assert b"alice likes tea" not in log.render()
    log.request()
    assert history_prefix_holds(log.events, log.store.get)  # the hidden memory excuses the rewrite
    assert verify_requests(log.events, log.store.get) == 2
    log.user("me again", ALICE)
    assert b"alice likes tea" in log.render()


def test_tools_changed_line() -> None:
    log = Log()
    log.user("find mail tool")
    loaded = [{k: v for k, v in TOOLS[1].items() if k != "defer_loading"}, TOOLS[0]]
    log.add(
        "tools_changed",
        {"cause": {"kind": "host"}, "tools": loaded, "tools_hash": sha256_hex(canonical_bytes(loaded))},
    )
    assert log.lines()[2] == {
        "role": "tools",
        "tools": [
            {"description": "Send mail.", "input_schema": {"type": "object"}, "name": "send_mail"},
            {"description": "Read a file.", "input_schema": TOOLS[0]["input_schema"], "name": "read_file"},
        ],
    }
    assert [t["role"] for t in transcript(log.events)] == ["user"]  # tools lines are not transcript entries


def test_context_edited_clear_and_redact() -> None:
    log = Log()
    log.user("go")
    log.tool_turn("c1", preview="secret data")
    log.tool_turn("c2", preview="héllo wörld, token=abcdef; tail")
    log.tool_turn(
        "c3", content=[{"text": "keep", "type": "text"}, {"text": "0123456789", "type": "text"}], preview="p"
    )
    log.tool_turn("c4", preview="untouched")
    before = log.render()
    s = "héllo wörld, token=abcdef; tail"
    b = s.encode()
    tok = b.index(b"token=")
    log.add(
        "context_edited",
        {
            "edits": [
                {"action": "clear", "call_id": "c1"},
                # overlapping and touching spans merge into one [redacted]; a separate one stays separate
                {
                    "action": "redact",
                    "call_id": "c2",
                    "part": 0,
                    "spans": [{"end": tok + 9, "start": tok}, {"end": tok + 12, "start": tok + 6}],
                },
                {
                    "action": "redact",
                    "call_id": "c2",
                    "part": 0,
                    "spans": [
                        {"end": tok + 13, "start": tok + 12},
                        {"end": len("héllo".encode()), "start": 1},
                    ],
                },
                {
                    "action": "redact",
                    "call_id": "c3",
                    "part": 1,
                    "spans": [{"end": 3, "start": 1}, {"end": 9, "start": 5}],
                },
            ],
            "reason": "manual",
        },
    )
    tools = {x["call_id"]: x for x in log.lines() if x.get("role") == "tool"}
    assert tools["c1"]["content"] == [{"text": CLEARED_RESULT_TEXT, "type": "text"}]
    assert tools["c2"]["content"] == [{"text": "h[redacted] wörld, [redacted] tail", "type": "text"}]
    assert tools["c3"]["content"] == [
        {"text": "keep", "type": "text"},
        {"text": "0[redacted]34[redacted]9", "type": "text"},
    ]
    assert tools["c4"]["content"] == [{"text": "untouched", "type": "text"}]
    # the log itself is untouched, and the edit applies only from the edit on
    assert render_request(log.events[:-1], log.store.get) == before
    # a later edit adds to the earlier spans of the same part
    log.add(
        "context_edited",
        {
            "edits": [{"action": "redact", "call_id": "c3", "part": 0, "spans": [{"end": 4, "start": 0}]}],
            "reason": "guardrail",
        },
    )
    tools = {x["call_id"]: x for x in log.lines() if x.get("role") == "tool"}
    assert tools["c3"]["content"][0] == {"text": "[redacted]", "type": "text"}
    assert tools["c3"]["content"][1] == {"text": "0[redacted]34[redacted]9", "type": "text"}


def test_redact_span_off_character_boundary_is_rejected() -> None:
    log = Log()
    log.user("go")
    log.tool_turn("c1", preview="é")
    edit = log.add(
        "context_edited",
        {
            "edits": [{"action": "redact", "call_id": "c1", "part": 0, "spans": [{"end": 1, "start": 0}]}],
            "reason": "manual",
        },
    )
    with pytest.raises(LogError) as ei:
        log.render()
    assert (ei.value.code, ei.value.seq) == ("invalid_transition", edit["seq"])


def _reasoning(log: Log, tag: str) -> dict[str, Any]:
    ref = log.store.put(f"opaque {tag}".encode(), "application/json")
    return {
        "format": "thinking",
        "model": "scripted-1",
        "provider": "scripted",
        "ref": ref,
        "type": "reasoning",
    }


def test_omit_prior_drops_earlier_reasoning_and_hosted_parts() -> None:
    log = Log()
    log.user("think")
    r1 = _reasoning(log, "one")
    hosted = {
        "format": "web",
        "model": "scripted-1",
        "name": "web_search",
        "provider": "scripted",
        "ref": log.store.put(b"[]", "application/json"),
        "type": "hosted_tool",
    }
    cite = {"source_id": "https://example.com", "source_kind": "web", "type": "citation"}
    a = log.respond(log.request(), [r1, hosted, {"text": "answer", "type": "text"}, cite])
    b = log.respond(log.request(), [_reasoning(log, "only")])  # reasoning only
    log.add("turn_completed", {"reason": "end_turn"})
    assert [t["event_id"] for t in transcript(log.events) if t["role"] == "assistant"] == [
        a["event_id"],
        b["event_id"],
    ]
    keep = dict(SETTINGS_B)
    log.add("settings_changed", {"reason": "user", "settings": keep}, {"kind": "user", "principal": ALICE})
    assert [x["content"] for x in log.lines() if x.get("role") == "assistant"][0][
        0
    ] == r1  # keep renders as recorded
    omit = dict(SETTINGS_B, reasoning_carryover="omit_prior")
    log.add("settings_changed", {"reason": "fallback", "settings": omit})
    log.user("again")
    r3 = _reasoning(log, "three")
    c = log.respond(log.request(), [r3, {"text": "new", "type": "text"}])
    assistants = [x["content"] for x in log.lines() if x.get("role") == "assistant"]
    assert assistants == [[{"text": "answer", "type": "text"}, cite], [r3, {"text": "new", "type": "text"}]]
    assert [t["event_id"] for t in transcript(log.events) if t["role"] == "assistant"] == [
        a["event_id"],
        c["event_id"],
    ]
    assert verify_requests(log.events, log.store.get) == 3
    # an omitted part's artifact is no longer needed by later renders
    del log.store.blobs[r1["ref"]["sha256"]]
    assert log.render()


def test_compaction_replaces_range() -> None:
    log = Log()
    first = log.user("start")
    log.tool_turn("c1", preview="one")
    tools_v2 = [TOOLS[0]]
    log.add(
        "tools_changed",
        {
            "cause": {"kind": "mcp_list_changed", "server": "fs"},
            "tools": tools_v2,
            "tools_hash": sha256_hex(canonical_bytes(tools_v2)),
        },
    )
    tools_v3 = [dict(TOOLS[0], description="Read a file (v3).")]
    log.add(
        "tools_changed",
        {"cause": {"kind": "host"}, "tools": tools_v3, "tools_hash": sha256_hex(canonical_bytes(tools_v3))},
    )
    last = log.respond(log.request(), [{"text": "one read", "type": "text"}])
    tail = log.user("keep me", type_="steer")  # outside the range: the kept tail
    side = log.request("compaction")
    side_body = log.store.get(side["data"]["request_ref"])
    assert side_body == log.render() + canonical_bytes(user_line(COMPACTION_INSTRUCTION)) + b"\n"
    summary = "Read <c1>: one & done."
    log.respond(side, [{"text": summary, "type": "text"}])
    assert log.render() == render_request(
        log.events[:-2], log.store.get
    )  # side request/response render nothing
    comp = log.add(
        "compacted",
        {
            "from_event_id": first["event_id"],
            "from_seq": first["seq"],
            "summary_ref": log.store.put(summary.encode()),
            "summary_request_event_id": side["event_id"],
            "to_event_id": last["event_id"],
            "to_seq": last["seq"],
            "trigger": "threshold",
        },
    )
    lines = log.lines()
    assert lines[1:] == [
        user_line(
            f'<reference source="summary" id="{comp["event_id"]}" untrusted="true">\n'
            "Read &lt;c1&gt;: one &amp; done.\n</reference>"
        ),
        {
            "role": "tools",
            "tools": [
                {
                    "description": "Read a file (v3).",
                    "input_schema": TOOLS[0]["input_schema"],
                    "name": "read_file",
                }
            ],
        },
        user_line("keep me"),
    ]
    assert transcript(log.events) == [
        {"event_id": comp["event_id"], "role": "summary"},
        {"event_id": tail["event_id"], "role": "user"},
    ]
    log.user("after")
    log.respond(log.request(), [{"text": "fine", "type": "text"}])
    assert verify_requests(log.events, log.store.get) == 4
    assert history_prefix_holds(log.events, log.store.get)

    # a later compaction over a range that holds the first one replaces both
    start2 = log.events[comp["seq"]]  # the event after the compacted one
    end2 = log.events[-1]
    side2 = log.request("compaction")
    log.respond(side2, [{"text": "all", "type": "text"}])
    comp2 = log.add(
        "compacted",
        {
            "from_event_id": first["event_id"],
            "from_seq": first["seq"],
            "summary_ref": log.store.put(b"all"),
            "to_event_id": end2["event_id"],
            "to_seq": end2["seq"],
            "trigger": "reactive",
        },
    )
    assert start2["seq"] > comp["seq"]
    assert transcript(log.events) == [{"event_id": comp2["event_id"], "role": "summary"}]
    assert log.lines()[1:] == [
        user_line(
            f'<reference source="summary" id="{comp2["event_id"]}" untrusted="true">\nall\n</reference>'
        ),
        {
            "role": "tools",
            "tools": [
                {
                    "description": "Read a file (v3).",
                    "input_schema": TOOLS[0]["input_schema"],
                    "name": "read_file",
                }
            ],
        },
    ]
    # the summary artifact is verified at the compacted event's seq
    del log.store.blobs[comp2["data"]["summary_ref"]["sha256"]]
    with pytest.raises(LogError) as ei:
        log.render()
    assert (ei.value.code, ei.value.seq) == ("artifact_missing", comp2["seq"])


def test_empty_and_compaction_responses_render_nothing() -> None:
    log = Log()
    log.user("x")
    log.respond(log.request(), [], "pause_turn")
    assert [t["role"] for t in transcript(log.events)] == ["user"]
    log.add("telemetry_ping", {"n": 1})  # unknown non-critical: skipped
    log.events.append(
        {"branch_id": "b", "format": "threads.head", "format_version": 1, "hash": "0" * 64, "seq": 3}
    )
    assert log.lines()[1:] == [user_line("x")]


def test_incremental_renderer_matches_fresh_render_at_every_step() -> None:
    log = Log()
    log.user("start")
    log.add(
        "injected",
        {"origin": {"id": "m"}, "source": "memory", "text": "note", "trust": "untrusted_reference"},
    )
    log.tool_turn("c1", preview="one")
    log.add("context_edited", {"edits": [{"action": "clear", "call_id": "c1"}], "reason": "idle"})
    log.user("bob here", BOB, type_="steer")
    d = log.user("denied")
    log.add(
        "hook_decision",
        {"decision": "deny", "extension": "g", "hook": "before_input", "input_event_id": d["event_id"]},
    )
    log.add(
        "settings_changed",
        {"reason": "fallback", "settings": dict(SETTINGS_B, reasoning_carryover="omit_prior")},
    )
    first = log.events[1]
    log.respond(log.request(), [_reasoning(log, "r"), {"text": "t", "type": "text"}])
    # a streamed call whose result is recorded before its response
    req = log.request()
    log.add(
        "tool_call", {"call_id": "s1", "input": {}, "name": "read_file", "request_event_id": req["event_id"]}
    )
    log.add(
        "tool_result",
        {
            "call_id": "s1",
            "completeness": "complete",
            "is_error": False,
            "origin": "executed",
            "preview": "early",
        },
        {"kind": "tool"},
    )
    log.respond(req, [{"call_id": "s1", "input": {}, "name": "read_file", "type": "tool_use"}], "tool_use")
    last = log.events[-1]
    log.add(
        "compacted",
        {
            "from_event_id": first["event_id"],
            "from_seq": first["seq"],
            "summary_ref": log.store.put(b"S"),
            "to_event_id": last["event_id"],
            "to_seq": last["seq"],
        },
    )
    log.user("end")
    r = Renderer()
    for i, ev in enumerate(log.events):
        r.feed(ev)
        prefix = log.events[: i + 1]
        assert r.request(log.store.get) == render_request(prefix, log.store.get), ev["type"]
        assert r.transcript() == transcript(prefix)
    assert verify_requests(log.events, log.store.get) == 3


def test_request_ref_for_and_render_perf_shape() -> None:
    log = Log()
    for i in range(300):
        log.user(f"m{i}")
        log.respond(log.request(), [{"text": f"r{i}", "type": "text"}])
        log.add("turn_completed", {"reason": "end_turn"})
    body = log.render()
    assert request_ref_for(body) == {
        "bytes": len(body),
        "media_type": "application/x-ndjson",
        "sha256": sha256_hex(body),
    }
    assert verify_requests(log.events, log.store.get) == 300
    assert history_prefix_holds(log.events, log.store.get)


def test_fast_jcs_path_equals_rfc8785() -> None:
    import random
    import string

    from threads_aws.core.render.jcs import jcs as _jcs

    rnd = random.Random(8785)
    alphabet = string.printable + "\x00\x1f\x7f\u00e9\u2028\U0001f600\ue000"

    def value(depth: int = 0) -> Any:
        k = rnd.random()
        if depth > 3 or k < 0.3:
            return rnd.choice(
                [
                    lambda: "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 8))),
                    lambda: rnd.randint(-(10**6), 10**6),
                    lambda: rnd.choice([True, False, None, 9007199254740991, 1e21, 0.1, -0.0, 100.0]),
                    lambda: rnd.random() * 100,
                ]
            )()
        if k < 0.65:
            return [value(depth + 1) for _ in range(rnd.randint(0, 4))]
        return {
            "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 4))): value(depth + 1)
            for _ in range(rnd.randint(0, 4))
        }

    for _ in range(3000):
        v = value()
        assert _jcs(v) == canonical_bytes(v), v
