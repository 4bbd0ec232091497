"""Structured output and output continuation in the worker (semantics: stop reasons, rule 20):
a pinned `policy.output` checks the final answer (accepted → `output_validated` + the run's
result carries the value; rejected → feedback and a retry, then `output_invalid`), and a
`max_tokens` answer is continued up to `context.max_output_continuations`, then `max_output`.
Every log is exported, re-imported (requests re-rendered) and its projections compared."""

from __future__ import annotations

import json
from typing import Any

from helpers.engine import make_ctx, of_type, run, scripted, types
from helpers.limits import ask, done, round_trip, thread, use
from threads_aws.config.agents_file import CONTEXT_DEFAULTS
from threads_aws.core.canonical import canonical_hash
from threads_aws.engine.continuation import CONTINUATION_INSTRUCTION
from threads_aws.engine.models import ScriptedModel
from threads_aws.engine.output import REJECTED_INSTRUCTION

SCHEMA = {
    "additionalProperties": False,
    "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
    "required": ["city", "population"],
    "type": "object",
}
OUTPUT = {"max_retries": 1, "mode": "native", "schema": SCHEMA, "schema_sha256": canonical_hash(SCHEMA)}


def truncated(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "stop_reason": "max_tokens"}


def test_a_valid_answer_is_the_runs_output(aws: Any) -> None:
    value = {"city": "Lisbon", "population": 545_000}
    model = ScriptedModel([use("time"), done("```json\n" + json.dumps(value) + "\n```")])
    ctx = make_ctx(aws, scripted(model))
    b = thread(ctx, output=OUTPUT)
    run_id = ask(ctx, b, "a city")
    assert run(ctx, b).state == "idle"
    assert types(ctx, b)[-3:] == ["model_response", "output_validated", "turn_completed"]
    (check,) = of_type(ctx, b, "output_validated")
    response = of_type(ctx, b, "model_response")[-1]
    assert check["data"] == {
        "outcome": "accepted",
        "schema_sha256": OUTPUT["schema_sha256"],
        "source_event_id": response["event_id"],
        "value": value,
    }
    assert of_type(ctx, b, "turn_completed")[-1]["data"] == {"reason": "end_turn"}
    out = round_trip(ctx, b, run_id)
    assert out["output"] == {"outcome": "accepted", "value": value}
    assert out["outcome"]["status"] == "completed" and out["outcome"]["output"] == value


def test_an_invalid_answer_is_retried_with_its_errors_then_accepted(aws: Any) -> None:
    model = ScriptedModel(
        [done('{"city": "Lisbon", "population": "many"}'), done('{"city": "Lisbon", "population": 1}')]
    )
    ctx = make_ctx(aws, scripted(model))
    b = thread(ctx, output=OUTPUT)
    run_id = ask(ctx, b, "a city")
    assert run(ctx, b).state == "idle"
    assert types(ctx, b, 2) == [
        "model_request",
        "model_response",
        "output_validated",
        "injected",
        "model_request",
        "model_response",
        "output_validated",
        "turn_completed",
    ]
    first, second = of_type(ctx, b, "output_validated")
    assert first["data"]["outcome"] == "rejected"
    assert first["data"]["errors"] == [{"message": "data.population must be integer", "path": "/population"}]
    (feedback,) = of_type(ctx, b, "injected")
    assert feedback["data"]["source"] == "recovery" and feedback["data"]["trust"] == "trusted_instruction"
    assert feedback["data"]["text"].startswith(REJECTED_INSTRUCTION)
    assert "/population" in model.requests[1].decode()  # the model saw what failed
    assert second["data"]["outcome"] == "accepted"
    assert round_trip(ctx, b, run_id)["outcome"]["output"] == {"city": "Lisbon", "population": 1}


def test_retries_exhausted_end_the_turn_output_invalid(aws: Any) -> None:
    model = ScriptedModel([done("not json"), done('{"city": 3}')])
    ctx = make_ctx(aws, scripted(model))
    b = thread(ctx, output=OUTPUT)
    run_id = ask(ctx, b, "a city")
    assert run(ctx, b).state == "idle"
    assert len(model.requests) == 2  # max_retries 1: one re-request
    checks = of_type(ctx, b, "output_validated")
    assert [c["data"]["outcome"] for c in checks] == ["rejected", "rejected"]
    assert checks[0]["data"]["errors"][0]["message"].startswith("the answer is not one JSON value")
    assert of_type(ctx, b, "turn_completed")[-1]["data"] == {"reason": "output_invalid"}
    out = round_trip(ctx, b, run_id)
    assert out["output"]["outcome"] == "rejected"
    assert out["outcome"]["status"] == "failed"
    assert out["outcome"]["error"]["code"] == "output_invalid"


def test_max_tokens_is_continued_up_to_the_limit_then_max_output(aws: Any) -> None:
    model = ScriptedModel([truncated("one"), truncated("two"), truncated("three")])
    ctx = make_ctx(aws, scripted(model))
    b = thread(ctx, context={**CONTEXT_DEFAULTS, "max_output_continuations": 2})
    run_id = ask(ctx, b, "write a lot")
    assert run(ctx, b).state == "idle"
    assert len(model.requests) == 3
    instructions = of_type(ctx, b, "injected")
    assert [i["data"]["text"] for i in instructions] == [CONTINUATION_INSTRUCTION] * 2
    responses = of_type(ctx, b, "model_response")
    assert [i["data"]["origin"]["id"] for i in instructions] == [r["event_id"] for r in responses[:2]]
    assert CONTINUATION_INSTRUCTION in model.requests[1].decode()
    assert model.requests[1].startswith(model.requests[0])  # the history prefix holds
    assert of_type(ctx, b, "turn_completed")[-1]["data"] == {"reason": "max_output"}
    out = round_trip(ctx, b, run_id)
    assert out["outcome"]["error"]["code"] == "max_output"


def test_a_continued_answer_that_finishes_ends_the_turn(aws: Any) -> None:
    model = ScriptedModel([truncated("The start"), done(" and the end.")])
    ctx = make_ctx(aws, scripted(model))
    b = thread(ctx, context={**CONTEXT_DEFAULTS, "max_output_continuations": 1})
    run_id = ask(ctx, b)
    run(ctx, b)
    assert of_type(ctx, b, "turn_completed")[-1]["data"] == {"reason": "end_turn"}
    assert round_trip(ctx, b, run_id)["outcome"]["status"] == "completed"


def test_without_a_context_policy_max_tokens_ends_the_turn(aws: Any) -> None:
    model = ScriptedModel([truncated("cut")])
    ctx = make_ctx(aws, scripted(model))
    b = thread(ctx)
    ask(ctx, b)
    run(ctx, b)
    assert "injected" not in types(ctx, b)
    assert of_type(ctx, b, "turn_completed")[-1]["data"] == {"reason": "max_output"}


def test_demo_structured_answers_the_schema_and_shows_a_rejection(aws: Any) -> None:
    ctx = make_ctx(aws)  # the demo model
    b = thread(ctx, "demo-structured")
    first = ask(ctx, b, "a city")
    assert run(ctx, b).state == "idle"
    assert round_trip(ctx, b, first)["outcome"]["output"] == {"city": "demo", "population": 1}
    second = ask(ctx, b, 'json: {"city": 3}')
    assert run(ctx, b).state == "idle"
    outcomes = [c["data"]["outcome"] for c in of_type(ctx, b, "output_validated")]
    assert outcomes == ["accepted", "rejected", "accepted"]  # the retry answers the schema
    assert round_trip(ctx, b, second)["outcome"]["status"] == "completed"


def test_demo_limits_continues_a_long_answer_twice(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = thread(ctx, "demo-limits")
    ask(ctx, b, "long: 150")  # 64 + 64 + 22 words under max_tokens 64
    assert run(ctx, b).state == "idle"
    responses = of_type(ctx, b, "model_response")
    assert [r["data"]["stop_reason"] for r in responses] == ["max_tokens", "max_tokens", "end_turn"]
    assert [r["data"]["usage"]["output_tokens"] for r in responses] == [64, 64, 22]
    text = " ".join(r["data"]["content"][0]["text"] for r in responses)
    assert len(text.split()) == 150
    assert of_type(ctx, b, "turn_completed")[-1]["data"] == {"reason": "end_turn"}
    run_id = ask(ctx, b, "long: 300")
    run(ctx, b)
    assert of_type(ctx, b, "turn_completed")[-1]["data"] == {"reason": "max_output"}
    out = round_trip(ctx, b, run_id)
    assert out["cost"]["complete"] is True and out["cost"]["known_nanos"] > 0
