"""The worker under the §ask_user matching rule: a call whose options repeat under trim +
case-fold is closed with an error result (`not_executed`) and never parks; the answer route
matches under the same rule."""

from __future__ import annotations

from typing import Any

from helpers.engine import make_ctx, new_thread, of_type, run, say, scripted, types, verify_export
from threads_aws.engine.models import ScriptedModel


def _ask(options: list[str]) -> dict[str, Any]:
    use = {
        "type": "tool_use",
        "call_id": "call_q",
        "name": "ask_user",
        "input": {"question": "Ok?", "options": options},
    }
    return {"content": [use], "stop_reason": "tool_use"}


def test_ambiguous_options_close_the_call_and_never_park(aws: Any) -> None:
    done = {"content": [{"type": "text", "text": "fine"}], "stop_reason": "end_turn"}
    model = ScriptedModel([_ask(["Yes", " yes ", "No"]), done])
    ctx = make_ctx(aws, scripted(model))
    b = new_thread(ctx, "scripted")
    say(ctx, b, "go")
    assert run(ctx, b).state == "idle"
    assert "parked" not in types(ctx, b)
    res = of_type(ctx, b, "tool_result")[0]["data"]
    assert (res["origin"], res["is_error"]) == ("not_executed", True)
    assert "' yes '" in res["preview"]
    assert of_type(ctx, b, "turn_completed")[0]["data"] == {"reason": "end_turn"}
    # the model saw the error result
    assert b'"is_error":true' in model.requests[1]
    verify_export(ctx, b)


def test_distinct_options_park(aws: Any) -> None:
    model = ScriptedModel([_ask(["Yes", "No"])])
    ctx = make_ctx(aws, scripted(model))
    b = new_thread(ctx, "scripted")
    say(ctx, b, "go")
    assert run(ctx, b).state == "parked"
    assert of_type(ctx, b, "parked")[0]["data"]["address"] == {"id": "call_q", "kind": "input"}
