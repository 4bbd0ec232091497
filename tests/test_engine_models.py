"""The offline models: the demo model's commands and the scripted model."""

from __future__ import annotations

import json

import pytest
from threads_aws.engine.demo_model import DemoModel
from threads_aws.engine.models import ModelError, ScriptedModel, adapter_for, call_id_for


def request(*lines: dict) -> bytes:
    head = {"adapter": {}, "model": {}, "params": {}, "system": "s", "tools": []}
    return b"".join(json.dumps(x).encode() + b"\n" for x in (head, *lines))


def user(text: str) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def complete(model: object, req: bytes):  # type: ignore[no-untyped-def]
    return model.complete(req, settings={}, request_event_id="r", branch_id="b")  # type: ignore[attr-defined]


def test_demo_commands() -> None:
    m = DemoModel()
    req = request(user("note: buy milk"))
    r = complete(m, req)
    assert r.stop_reason == "tool_use"
    assert r.content == [
        {"type": "tool_use", "call_id": call_id_for(req, 0), "name": "note", "input": {"text": "buy milk"}}
    ]
    assert complete(m, req).content == r.content  # a re-send proposes the same call id
    assert complete(m, request(user("ask: why?"))).content[0]["input"] == {"question": "why?"}
    todos = complete(m, request(user("todo: a; b;; c"))).content[0]["input"]["todos"]
    assert todos == [
        {"id": "t1", "content": "a", "status": "pending"},
        {"id": "t2", "content": "b", "status": "pending"},
        {"id": "t3", "content": "c", "status": "pending"},
    ]
    assert complete(m, request(user(" Time "))).content[0]["name"] == "time"
    r = complete(m, request(user("hello")))
    assert (r.content, r.stop_reason) == ([{"type": "text", "text": 'You said: "hello"'}], "end_turn")
    assert r.usage["input_tokens"] == len(request(user("hello"))) // 4


def test_demo_after_tool_result() -> None:
    tool = {
        "role": "tool",
        "call_id": "c",
        "is_error": False,
        "content": [{"type": "text", "text": "stored note 1"}],
    }
    r = complete(DemoModel(), request(user("note: x"), {"role": "assistant", "content": []}, tool))
    assert (r.content, r.stop_reason) == ([{"type": "text", "text": "Done: stored note 1"}], "end_turn")


def test_scripted() -> None:
    m = ScriptedModel(
        [
            {"content": [{"type": "text", "text": "a"}], "stop_reason": "end_turn"},
            {"error": {"reason": "rate_limited", "http_status": 429, "retry_after_ms": 5}},
        ]
    )
    assert complete(m, b"x").content[0]["text"] == "a"
    with pytest.raises(ModelError) as info:
        complete(m, b"y")
    assert (info.value.reason, info.value.http_status, info.value.retry_after_ms) == ("rate_limited", 429, 5)
    with pytest.raises(AssertionError):
        complete(m, b"z")
    assert complete(ScriptedModel(), b"x").content == [{"type": "text", "text": "Done."}]


def test_registry() -> None:
    assert isinstance(adapter_for({"provider": "demo", "name": "demo-1"}, {"name": "demo"}), DemoModel)
    with pytest.raises(LookupError):
        adapter_for({"provider": "nope", "name": "x"}, {"name": "nope"})
