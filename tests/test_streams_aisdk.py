"""The log → AI SDK UI message stream mapper (`streams.aisdk`) over the recorded demo-agent runs,
resumed at every cursor; the stream route's `?format=ai-sdk` (header, `[DONE]`); and the `ai`
package's own parser in node (`tests/node/ai_sdk_parse.mjs`) over a tool + approval run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers.engine import make_ctx
from helpers.engine import run as advance
from helpers.host import ALICE
from helpers.streams import recorded, recorded_names, run_of
from test_live_stream import FAST, call, events_path
from threads_aws.core.canonical import new_uuid7
from threads_aws.host import sse, sse_formats
from threads_aws.host.stream_app import StreamApp
from threads_aws.streams import AiSdkMapper
from threads_aws.streams.frames import Out

NODE_SCRIPT = Path(__file__).parent / "node" / "ai_sdk_parse.mjs"
# v5's chunk keys (ai 5.0's uiMessageChunkSchema; its objects are loose, so unknown keys are
# checked here: a key the client would silently ignore is a bug of ours).
KEYS = {
    "start": {"messageId"},
    "start-step": set(),
    "finish-step": set(),
    "text-start": {"id"},
    "text-delta": {"id", "delta"},
    "text-end": {"id"},
    "reasoning-start": {"id"},
    "reasoning-delta": {"id", "delta"},
    "reasoning-end": {"id"},
    "tool-input-available": {"toolCallId", "toolName", "input", "dynamic"},
    "tool-output-available": {"toolCallId", "output", "dynamic"},
    "tool-output-error": {"toolCallId", "errorText", "dynamic"},
    "finish": {"finishReason"},
    "abort": set(),
    "error": {"errorText"},
}


def mapped(events: list[dict[str, Any]]) -> list[Out]:
    m = AiSdkMapper()
    return [o for e in events for o in m.event(e)]


def check(data: list[dict[str, Any]], *, resumed: bool = False) -> None:
    """One UI message: `start` first, one end chunk last, parts opened before use and closed,
    steps balanced, every tool input answered by one output (a resumed stream's outputs may
    answer inputs sent before the cursor), data parts with an id."""
    assert data[0]["type"] == "start" and data[-1]["type"] in ("finish", "abort", "error")
    open_parts: set[str] = set()
    step = False
    inputs, outputs = [], []
    for d in data:
        typ = d["type"]
        if typ.startswith("data-"):
            assert set(d) == {"type", "id", "data"} and d["data"]["status"] in ("open", "resolved")
            continue
        assert set(d) - {"type"} == KEYS[typ], d
        if typ.endswith("-start") and typ != "start-step":
            assert d["id"] not in open_parts
            open_parts.add(d["id"])
        elif typ.endswith("-delta"):
            assert d["id"] in open_parts
        elif typ.endswith("-end"):
            open_parts.remove(d["id"])
        elif typ in ("start-step", "finish-step"):
            assert step == (typ == "finish-step")
            step = not step
        elif typ == "tool-input-available":
            inputs.append(d["toolCallId"])
        elif typ.startswith("tool-output"):
            outputs.append(d["toolCallId"])
    assert not open_parts and not step
    assert set(inputs) <= set(outputs) if resumed else sorted(inputs) == sorted(outputs)


@pytest.mark.parametrize("name", recorded_names())
def test_recorded_runs_are_one_ui_message_each(name: str) -> None:
    events = recorded(name)
    for k in range(sum(e["type"] == "user_input" for e in events)):
        run = run_of(events, k)
        data = [o.data for o in mapped(run)]
        check(data)
        assert data[0]["messageId"] == run[0]["event_id"]


def test_approval_is_a_waiting_tool_part_then_resolved() -> None:
    data = [o.data for o in mapped(run_of(recorded("approval_granted")))]
    types = [d["type"] for d in data]
    call_at, park_at = types.index("tool-input-available"), types.index("data-approval")
    call_id = data[call_at]["toolCallId"]
    park = data[park_at]
    assert park_at > call_at and types.index("tool-output-available") > park_at
    assert park["data"]["status"] == "open" and park["data"]["toolCallId"] == call_id
    assert park["data"]["toolName"] == "note" and park["data"]["input"] == {"text": "buy milk"}
    assert park["data"]["message"] == "Allow note: buy milk?"
    (done,) = [d for d in data[park_at + 1 :] if d["type"] == "data-approval"]
    assert done["id"] == park["id"] and done["data"]["status"] == "resolved"
    assert done["data"]["decision"] == "grant"
    assert data[-1] == {"type": "finish", "finishReason": "stop"}
    denied = [o.data for o in mapped(run_of(recorded("approval_denied")))]
    assert [d["data"].get("decision") for d in denied if d["type"] == "data-approval"][-1] == "deny"
    assert any(d["type"] == "tool-output-error" for d in denied)


def test_reasoning_text_cancel_and_failure() -> None:
    data = [o.data for o in mapped(run_of(recorded("thinking")))]
    rs = [d for d in data if d["type"].startswith("reasoning")]
    assert rs and rs[0]["id"].endswith(":reasoning") and rs[1]["delta"]
    assert [o.data for o in mapped(run_of(recorded("cancel_parked")))][-1] == {"type": "abort"}
    err = [o.data for o in mapped(run_of(recorded("failed_turn")))][-1]
    assert err == {"type": "error", "errorText": "turn ended: model_unavailable"}


def test_live_deltas_then_the_committed_rest() -> None:
    run = run_of(recorded("text_only"))
    m = AiSdkMapper()
    out = [o.data for e in run[:2] for o in m.event(e)]
    rid = run[2]["data"]["request_event_id"]
    out += [o.data for o in m.delta(rid, "Hello", offset=0)]
    out += [o.data for o in m.delta(rid, "lo! ", offset=3)]  # overlaps: trimmed
    out += [o.data for e in run[2:] for o in m.event(e)]
    texts = [d for d in out if d["type"].startswith("text")]
    assert texts == [
        {"type": "text-start", "id": rid},
        {"type": "text-delta", "id": rid, "delta": "Hello"},
        {"type": "text-delta", "id": rid, "delta": "! "},
        {"type": "text-delta", "id": rid, "delta": "Streams are **on**."},
        {"type": "text-end", "id": rid},
    ]
    # a retry wait is transient: no id, and the client keeps it out of the message
    assert m.status("retry_wait", 1_700_000_000_000) == []  # the run is over
    m = AiSdkMapper()
    for e in run[:2]:
        m.event(e)
    (wait,) = m.status("retry_wait", 1_700_000_000_000)
    assert wait.id is None
    assert wait.data == {
        "type": "data-retry-wait",
        "data": {"until": "2023-11-14T22:13:20Z"},
        "transient": True,
    }


@pytest.mark.parametrize("name", ["approval_granted", "question", "thinking", "tool_allowed"])
def test_resume_at_every_cursor_reopens_the_message_and_repeats_nothing(name: str) -> None:
    run = run_of(recorded(name))
    whole = mapped(run)
    for i, o in enumerate(whole):
        if o.id is None:
            continue
        _, rest = AiSdkMapper.resumed(run, o.id)
        tail = [x.data for x in whole[i + 1 :]]
        got = [x.data for x in rest]
        assert got[len(got) - len(tail) :] == tail, o.id
        if tail:
            assert got[0]["type"] == "start"
            check(got, resumed=True)


# ------------------------------------------------------------------ the route, and the ai package


def approval_run(host: Any, aws: Any) -> dict[str, str]:
    """The demo agent's tool + approval run, decided and finished."""
    run = host.start_run(ALICE, {"agent": "demo", "input": "note: buy milk"}, new_uuid7())
    ctx = make_ctx(aws)
    assert advance(ctx, run["branch_id"]).state == "parked"
    (pending,) = host.pending_approvals(ALICE, run["thread_id"], run["branch_id"])
    host.decide_approval(ALICE, run["thread_id"], pending["challenge_id"], {"decision": "grant"})
    assert advance(ctx, run["branch_id"]).state == "idle"
    return run


@pytest.fixture
def host(aws):
    from helpers.host import make_host

    return make_host(aws)


def test_the_route_serves_ai_sdk_with_its_header_and_done(host, aws) -> None:
    run = approval_run(host, aws)
    app = StreamApp(lambda: host, lambda: FAST)
    got = call(app, events_path(run), query="format=ai-sdk&through_parks=true")
    assert got.status == 200 and got.headers["x-vercel-ai-ui-message-stream"] == "v1"
    assert got.body.startswith(b": open\n\n") and got.body.endswith(b"data: [DONE]\n\n")
    lines = [b[len("data: ") :] for b in got.body.split(b"\n") if b.startswith(b"data: ")]
    data = [json.loads(x) for x in lines[:-1]]
    check(data)
    assert "data-approval" in [d["type"] for d in data]
    # the window fallback: the same chunks and the same end
    body = sse_formats.subscribe(
        host,
        ALICE,
        run["thread_id"],
        run["run_id"],
        fmt="ai-sdk",
        raw_cursor=None,
        window=sse.Window(wait_ms=0),
    )
    assert body.endswith(b"data: [DONE]\n\n")
    assert [json.loads(b[6:]) for b in body.split(b"\n") if b.startswith(b"data: {")] == data


def ai_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with `ai@5` installed: $THREADS_AI_SDK_DIR if set, else `npm install` in a
    temp dir (skipped without npm or a registry)."""
    pre = os.environ.get("THREADS_AI_SDK_DIR")
    if pre:
        return Path(pre)
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.skip("node/npm not installed")
    d = tmp_path_factory.mktemp("ai_sdk")
    (d / "package.json").write_text('{"private": true, "type": "module"}')
    r = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "ai@5"], cwd=d, capture_output=True, timeout=300
    )
    if r.returncode != 0:
        pytest.skip(f"npm install ai@5 failed: {r.stderr.decode()[-300:]}")
    return d


def test_the_ai_package_parses_a_tool_and_approval_run(host, aws, tmp_path_factory) -> None:
    run = approval_run(host, aws)
    got = call(
        StreamApp(lambda: host, lambda: FAST), events_path(run), query="format=ai-sdk&through_parks=true"
    )
    d = ai_package(tmp_path_factory)
    script = d / NODE_SCRIPT.name  # ESM resolves `ai` next to the script
    shutil.copyfile(NODE_SCRIPT, script)
    r = subprocess.run(["node", str(script)], input=got.body, capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    res = json.loads(r.stdout)
    sent = [ln for ln in got.body.split(b"\n") if ln.startswith(b"data: {")]
    assert res["failures"] == [] and res["errors"] == []
    assert len(res["chunks"]) == len(sent)  # every chunk validated by uiMessageChunkSchema
    msg = res["message"]
    assert msg["id"] == run["run_id"] and msg["role"] == "assistant"
    parts = msg["parts"]
    (tool,) = [p for p in parts if p["type"] == "dynamic-tool"]
    assert tool["toolName"] == "note" and tool["input"] == {"text": "buy milk"}
    assert tool["state"] == "output-available" and tool["output"].startswith("stored note")
    (appr,) = [p for p in parts if p["type"] == "data-approval"]  # updated in place by its id
    assert appr["data"]["status"] == "resolved" and appr["data"]["decision"] == "grant"
    assert appr["data"]["toolCallId"] == tool["toolCallId"]
    assert any(p["type"] == "text" and p["text"].startswith("Done: stored note") for p in parts)
    assert sum(p["type"] == "step-start" for p in parts) == 2
