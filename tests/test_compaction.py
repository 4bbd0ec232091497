"""Compaction in the worker (engine/compaction.py): a turn request that would not fit the model's
window (Render v1 bytes / 4 against `policy.models[].context_window`) is compacted first
(`model_request{purpose: compaction}` → `compacted`), or blocked (`context_preflight_blocked`),
and a provider's `prompt_too_long` compacts reactively; a failing compaction is
`compaction_failed` until the breaker (`compact.max_failures`) opens. Every log is exported,
re-imported, its requests re-rendered by `core.render.verify_requests` (the compaction request
with its instruction line, the next request over the compacted history) and its projections
compared."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.engine import make_ctx, of_type, run, scripted, types
from helpers.limits import MODEL_ENTRY, ask, round_trip, thread
from threads_aws.config.agents_file import CONTEXT_DEFAULTS
from threads_aws.core import render
from threads_aws.engine.models import ScriptedModel

SUMMARY = "SUMMARY: the user sent long messages; nothing is open."
LONG = "lorem ipsum dolor sit amet " * 24  # ~650 bytes a message


def context(trigger: dict[str, int], max_failures: int = 2, keep_tail: int = 1) -> dict[str, Any]:
    compact = {"keep_tail": {"tokens": keep_tail}, "max_failures": max_failures, "trigger": trigger}
    return {**CONTEXT_DEFAULTS, "compact": compact}


def answers(summary: str = SUMMARY) -> Any:
    def answer(request: bytes, rid: str) -> dict[str, Any]:
        text = summary if render.COMPACTION_INSTRUCTION.encode() in request else "ok"
        return (
            {"content": [{"type": "text", "text": text}], "stop_reason": "end_turn"}
            if text
            else {
                "content": [],
                "stop_reason": "end_turn",
            }
        )

    return answer


def line0_tokens(ctx: Any) -> int:
    b = thread(ctx)
    return len(ctx.renderer(ctx.writer.load(b)).line0()) // 4


def windowed(ctx: Any, extra_tokens: int, trigger: dict[str, int], **kw: Any) -> str:
    """A thread whose window holds line 0 plus `extra_tokens`."""
    entry = {**MODEL_ENTRY, "context_window": line0_tokens(ctx) + extra_tokens}
    return thread(ctx, models=[entry], context=context(trigger, **kw))


def history(ctx: Any, b: str, turns: int) -> None:
    for _ in range(turns):
        ask(ctx, b, LONG)
        assert run(ctx, b).state == "idle"


def test_a_request_past_the_window_is_compacted_first(aws: Any) -> None:
    model = ScriptedModel([answers()] * 20)
    ctx = make_ctx(aws, scripted(model))
    b = windowed(ctx, 600, {"permille": 1000})  # compaction only when the window is reached
    history(ctx, b, 3)  # ~3 × 170 tokens: fits
    assert "compacted" not in types(ctx, b)
    run_id = ask(ctx, b, LONG)  # the fourth would not fit
    assert run(ctx, b).state == "idle"
    (blocked,) = of_type(ctx, b, "context_preflight_blocked")
    assert blocked["data"]["action"] == "compact"
    assert blocked["data"]["estimated_tokens"] >= blocked["data"]["window_tokens"]
    requests = of_type(ctx, b, "model_request")
    compaction = [r for r in requests if r["data"].get("purpose") == "compaction"]
    assert len(compaction) == 1 and compaction[0]["seq"] == blocked["seq"] + 1  # its cause precedes it
    (done,) = of_type(ctx, b, "compacted")
    d = done["data"]
    inputs = of_type(ctx, b, "user_input")
    assert d["from_seq"] == inputs[0]["seq"] and d["from_event_id"] == inputs[0]["event_id"]
    assert d["to_seq"] < compaction[0]["seq"] and d["trigger"] == "reactive"
    assert d["summary_request_event_id"] == compaction[0]["event_id"]
    assert ctx.artifacts.get_ref(d["summary_ref"]) == SUMMARY.encode()
    # the turn's request renders the compacted history and keeps line 0 (C7)
    after = model.requests[-1]
    assert b'<reference source=\\"summary\\"' in after and SUMMARY.encode() in after
    assert after.split(b"\n", 1)[0] == model.requests[0].split(b"\n", 1)[0]
    assert len(after) // 4 < blocked["data"]["window_tokens"]
    assert of_type(ctx, b, "turn_completed")[-1]["data"] == {"reason": "end_turn"}
    out = round_trip(ctx, b, run_id)  # render.verify_requests re-renders every request
    assert out["compaction"] is not None and out["outcome"]["status"] == "completed"


def test_over_the_threshold_compacts_without_blocking(aws: Any) -> None:
    model = ScriptedModel([answers()] * 20)
    ctx = make_ctx(aws, scripted(model))
    b = windowed(ctx, 2000, {"tokens": 1}, keep_tail=200)  # any history is over the threshold
    history(ctx, b, 2)
    assert "context_preflight_blocked" not in types(ctx, b)
    triggers = [c["data"]["trigger"] for c in of_type(ctx, b, "compacted")]
    assert triggers and set(triggers) == {"threshold"}
    round_trip(ctx, b)


def test_nothing_to_compact_blocks_the_request_and_ends_the_turn(aws: Any) -> None:
    model = ScriptedModel([answers()] * 5)
    ctx = make_ctx(aws, scripted(model))
    b = windowed(ctx, 50, {"permille": 1000}, keep_tail=10_000)  # the tail kept is everything
    run_id = ask(ctx, b, LONG)  # the first input alone is past the window
    assert run(ctx, b).state == "idle"
    assert model.requests == [] and "model_request" not in types(ctx, b)
    (blocked,) = of_type(ctx, b, "context_preflight_blocked")
    assert blocked["data"]["action"] == "fail"
    assert of_type(ctx, b, "turn_completed")[-1]["data"] == {"reason": "context_exhausted"}
    assert round_trip(ctx, b, run_id)["outcome"]["error"]["code"] == "context_exhausted"


def test_failed_compactions_open_the_breaker(aws: Any) -> None:
    model = ScriptedModel([answers(summary="")] * 20)  # every summary comes back empty
    ctx = make_ctx(aws, scripted(model))
    b = windowed(ctx, 600, {"permille": 1000}, max_failures=2)
    history(ctx, b, 3)
    run_id = ask(ctx, b, LONG)
    assert run(ctx, b).state == "idle"
    failed = of_type(ctx, b, "compaction_failed")
    assert [f["data"]["reason"] for f in failed] == ["empty_summary", "empty_summary"]
    assert all(f["data"]["stage"] == "summary" for f in failed)
    actions = [e["data"]["action"] for e in of_type(ctx, b, "context_preflight_blocked")]
    assert actions == ["compact", "compact", "fail"]  # the breaker: max_failures 2
    assert "compacted" not in types(ctx, b)
    assert of_type(ctx, b, "turn_completed")[-1]["data"] == {"reason": "context_exhausted"}
    round_trip(ctx, b, run_id)


def test_prompt_too_long_compacts_reactively(aws: Any) -> None:
    def too_long(request: bytes, rid: str) -> dict[str, Any]:
        return {"error": {"reason": "prompt_too_long", "http_status": 400}}

    model = ScriptedModel([answers()] * 3 + [too_long, answers(), answers()])
    ctx = make_ctx(aws, scripted(model))
    b = windowed(ctx, 100_000, {"permille": 1000})  # the estimate fits: the provider disagrees
    history(ctx, b, 3)
    run_id = ask(ctx, b, "and now?")
    assert run(ctx, b).state == "idle"
    (refused,) = [
        e for e in of_type(ctx, b, "model_attempt_abandoned") if e["data"]["reason"] == "prompt_too_long"
    ]
    compaction = [r for r in of_type(ctx, b, "model_request") if r["data"].get("purpose") == "compaction"]
    assert compaction[0]["seq"] == refused["seq"] + 1
    (done,) = of_type(ctx, b, "compacted")
    assert done["data"]["trigger"] == "reactive"
    assert of_type(ctx, b, "turn_completed")[-1]["data"] == {"reason": "end_turn"}
    assert round_trip(ctx, b, run_id)["outcome"]["status"] == "completed"


@pytest.fixture
def fake_models(monkeypatch: pytest.MonkeyPatch) -> Any:
    from threads_aws_dev.fakes.models import FakeServer

    server = FakeServer().start()
    for k, v in server.env().items():
        monkeypatch.setenv(k, v)
    yield server
    server.shutdown()


def test_prompt_too_long_from_the_anthropic_fake_compacts(aws: Any, fake_models: Any) -> None:
    ctx = make_ctx(aws)  # the real adapters: Anthropic's SDK against the local fake
    entry = {
        "context_window": 200_000,
        "input_billing_bound": "context_window",
        "max_output_tokens": 8192,
        "name": "claude-sonnet-4-5",
        "provider": "anthropic",
    }
    b = thread(ctx, "anthropic", models=[entry], context=context({"permille": 1000}))
    ask(ctx, b, "hello")
    assert run(ctx, b).state == "idle"
    fake_models.fail("anthropic", "prompt_too_long")
    run_id = ask(ctx, b, "and again")
    assert run(ctx, b).state == "idle"
    kinds = types(ctx, b)
    assert "compacted" in kinds and "compaction_failed" not in kinds
    abandoned = of_type(ctx, b, "model_attempt_abandoned")
    assert [a["data"]["reason"] for a in abandoned] == ["prompt_too_long"]
    assert of_type(ctx, b, "turn_completed")[-1]["data"] == {"reason": "end_turn"}
    assert round_trip(ctx, b, run_id)["outcome"]["status"] == "completed"


def test_demo_limits_compacts_a_long_conversation(aws: Any) -> None:
    ctx = make_ctx(aws)  # the demo model: it summarizes a compaction request
    b = thread(ctx, "demo-limits")  # a 2,000-token window, compaction at 90%
    short = "lorem ipsum dolor sit amet " * 8
    for _ in range(16):
        ask(ctx, b, short)
        assert run(ctx, b).state == "idle"
        assert of_type(ctx, b, "turn_completed")[-1]["data"] == {"reason": "end_turn"}
    compacted = of_type(ctx, b, "compacted")
    assert compacted and {c["data"]["trigger"] for c in compacted} == {"threshold"}
    summary = ctx.artifacts.get_ref(compacted[0]["data"]["summary_ref"]).decode()
    assert summary.startswith("Summary of the earlier conversation:")
    window = 2000
    for req in of_type(ctx, b, "model_request"):
        assert req["data"]["request_ref"]["bytes"] // 4 < window
    round_trip(ctx, b)
