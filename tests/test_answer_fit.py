"""An answer too large for one line is recorded as a preview naming the artifact that holds the
whole answer (engine.answer_fit): one model request, never re-sent, the turn completes, the
log exports and re-imports, and the artifact's bytes are the whole answer."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers.engine import make_ctx, new_thread, of_type, run, say, verify_export
from threads_aws.core.canonical import MAX_LINE_BYTES, NotCanonical, canonical_bytes
from threads_aws.engine import answer_fit


def test_an_answer_over_the_line_limit_is_kept_whole_as_an_artifact(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    text = "é" + "x" * (MAX_LINE_BYTES - 600)  # the input fits; the echo around it does not
    say(ctx, b, text)
    assert run(ctx, b).state == "idle"
    assert len(of_type(ctx, b, "model_request")) == 1  # answered once, never re-sent
    assert of_type(ctx, b, "model_attempt_abandoned") == []
    (resp,) = of_type(ctx, b, "model_response")
    data = resp["data"]
    assert data["completeness"] == "partial" and data["stop_reason"] == "end_turn"
    (part,) = data["content"]
    assert part["text"].startswith('You said: "é' + "x" * 1000)
    sha = part["text"].rsplit("sha256:", 1)[1].rstrip("]")
    whole = json.loads(ctx.artifacts.get(sha))
    assert whole == [{"type": "text", "text": f'You said: "{text}"'}]
    (done,) = of_type(ctx, b, "turn_completed")
    assert done["data"]["reason"] == "end_turn"
    verify_export(ctx, b)


def test_a_small_answer_is_untouched() -> None:
    response = {"completeness": "complete", "content": [{"type": "text", "text": "hi"}]}
    assert answer_fit.fit(response, _no_put) is response


def test_the_quick_bound_agrees_with_the_exact_measure_at_the_limit() -> None:
    # fits() skips the exact JCS measure only when twice orjson's size is under the budget;
    # around the limit, with numbers JCS spells differently, it must answer as the exact one.
    budget = answer_fit.DATA_BUDGET
    for size in (budget // 2 - 200, budget // 2 + 200, budget - 300, budget - 100, budget + 100):
        for extra in ({}, {"f": [1.0, 1e21, 0.1] * 50}):
            r = {"content": [{"type": "text", "text": "x" * size}], **extra}
            assert answer_fit.fits(r) == (len(canonical_bytes(r)) <= budget), (size, extra)
        unsafe = {"content": [{"type": "text", "text": "x" * size}], "n": 2**60}
        with pytest.raises(NotCanonical):  # JCS has no such integer, whatever the size
            answer_fit.fits(unsafe)


def test_escapes_are_measured_and_calls_never_cut() -> None:
    stored: dict[str, bytes] = {}

    def put(data: bytes, media_type: str) -> dict[str, Any]:
        stored["whole"] = data
        return {"bytes": len(data), "media_type": media_type, "sha256": "0" * 64}

    text = {"type": "text", "text": "\u0001" * (MAX_LINE_BYTES // 4)}  # six bytes a character on the line
    quoted = {"completeness": "complete", "stop_reason": "end_turn", "content": [text]}
    cut = answer_fit.fit(quoted, put)
    assert answer_fit.fits(cut) and cut["completeness"] == "partial"
    whole = {"bytes": len(stored["whole"]), "sha256": "0" * 64}
    assert cut["content"][0]["text"].endswith(answer_fit.marker(whole))
    call = {"type": "tool_use", "call_id": "c1", "name": "note", "input": {"text": "y" * MAX_LINE_BYTES}}
    huge = {
        "completeness": "complete",
        "stop_reason": "tool_use",
        "content": [{"type": "text", "text": "ok"}, call],
    }
    only = answer_fit.fit(huge, put)
    assert only["stop_reason"] == "other" and [p["type"] for p in only["content"]] == ["text"]
    assert json.loads(stored["whole"])[1] == call
    assert len(canonical_bytes(only)) < 1024


def _no_put(data: bytes, media_type: str) -> dict[str, Any]:
    raise AssertionError("nothing to store")
