"""AG-UI events on the wire (ag-ui-protocol 1.0: camelCase dicts): the builders the AG-UI mapper
(`agui`) emits through — how a run ends, an Interrupt and the body its answer takes, usage,
tool-call argument and result fields, and what a resumed connection must reopen. Pure: no
state, no I/O."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from . import tools as t
from .event_data import budget_message
from .frames import JsonObj, Out

ERROR_CODES = frozenset(
    {
        "max_output",
        "max_turns",
        "context_exhausted",
        "model_unavailable",
        "output_invalid",
        "input_denied",
        "stop_hook_limit",
    }
)
OPENERS = {
    "TEXT_MESSAGE_START": "text",
    "TOOL_CALL_START": "tool",
    "REASONING_START": "reasoning",
    "REASONING_MESSAGE_START": "reasoning_message",
}
CLOSERS = {
    "TEXT_MESSAGE_END": "text",
    "TOOL_CALL_END": "tool",
    "REASONING_END": "reasoning",
    "REASONING_MESSAGE_END": "reasoning_message",
}
USAGE_KEYS = (
    ("inputTokens", "input_tokens"),
    ("outputTokens", "output_tokens"),
    ("reasoningTokens", "reasoning_tokens"),
    ("cachedInputTokens", "cache_read_tokens"),
    ("cacheWriteInputTokens", "cache_write_tokens"),
)


def copy(v: Any) -> Any:
    """A deep copy through JSON: a state value sent is never aliased to the mapper's state."""
    return json.loads(json.dumps(v))


def run_end(
    reason: str,
    d: Mapping[str, Any],
    output: tuple[bool, Any],
    last_text: str,
    budget: Mapping[str, Any] | None,
) -> tuple[str, JsonObj]:
    """A `turn_completed` as the AG-UI run's end: (RUN_FINISHED | RUN_ERROR, its fields)."""
    if reason == "end_turn":
        has, value = output
        return "RUN_FINISHED", {"outcome": {"type": "success"}, "result": value if has else last_text}
    if reason == "cancelled":
        return "RUN_FINISHED", {"outcome": {"type": "cancelled"}}
    if reason == "handoff":
        return "RUN_FINISHED", {"outcome": {"type": "success"}, "result": {"handed_off": True}}
    if reason == "budget_exhausted":
        return "RUN_ERROR", {"message": budget_message(budget or {}), "code": "budget_exhausted"}
    code = reason if reason in ERROR_CODES else str(d.get("code") or "model_error")
    msg = f"turn ended: {reason}" + (f" ({d['code']})" if d.get("code") else "")
    return "RUN_ERROR", {"message": msg, "code": code}


def interrupt(
    pid: str,
    reason: str,
    *,
    message: str | None = None,
    tool_call_id: str | None = None,
    schema: JsonObj | None = None,
    expires: str | None = None,
) -> JsonObj:
    out = {
        "id": pid,
        "reason": reason,
        "message": message,
        "toolCallId": tool_call_id,
        "responseSchema": schema,
        "expiresAt": expires,
    }
    return {k: v for k, v in out.items() if v is not None}


def approval_schema(rules: list[str]) -> JsonObj:
    """The body `POST …/approvals/{challenge_id}` takes."""
    return {
        "type": "object",
        "properties": {
            "decision": {"enum": ["grant", "deny"]},
            "remember_rule": {"enum": rules},
            "reason": {"type": "string"},
        },
        "required": ["decision"],
    }


def answer_schema(args: Mapping[str, Any]) -> JsonObj:
    """The body answering an `ask_user` call: one of its options (or several), else free text."""
    raw = args.get("options")
    options = [o for o in raw if isinstance(o, str)] if isinstance(raw, list) else []
    answer: JsonObj = {"type": "string", "minLength": 1}
    if options:
        answer = {"enum": options}
    if args.get("multi_select"):
        answer = {"type": "array", "items": answer, "minItems": 1}
    return {"type": "object", "properties": {"answer": answer}, "required": ["answer"]}


def resolution_schema() -> JsonObj:
    """The body `POST …/parked/{effect_key}/resolve` takes."""
    return {
        "type": "object",
        "properties": {"resolution": {"enum": ["assume_done", "assume_not_done"]}},
        "required": ["resolution"],
    }


def add_usage(total: JsonObj, usage: Any) -> None:
    if not isinstance(usage, dict):
        return
    for key, field in USAGE_KEYS:
        v = usage.get(field)
        if isinstance(v, int):
            total[key] = total.get(key, 0) + v


def usage_list(total: Mapping[str, Any]) -> list[JsonObj] | None:
    if not total:
        return None
    u = dict(total)
    if "inputTokens" in u or "outputTokens" in u:
        u["totalTokens"] = u.get("inputTokens", 0) + u.get("outputTokens", 0)
    return [u]


def args_json(args: Mapping[str, Any]) -> str:
    return json.dumps(args, separators=(",", ":"), ensure_ascii=False)


def tool_result(call_id: str, d: Mapping[str, Any]) -> JsonObj:
    """TOOL_CALL_RESULT's fields for a `tool_result` / `tool_result_late`."""
    return {
        "messageId": f"{call_id}:result",
        "toolCallId": call_id,
        "content": t.result_text(d),
        "role": "tool",
    }


def reopen(seen: list[Out], state: Any) -> list[Out]:
    """What the outputs a client already has left open, reopened for a new connection: the run
    (with a STATE_SNAPSHOT of `state`), its step, and a message or tool call a cursor inside a
    group cut through; nothing when no run is open."""
    run: JsonObj | None = None
    step: str | None = None
    opened: dict[tuple[str, str], JsonObj] = {}  # (kind, id) → its opening event
    for o in seen:
        typ = str(o.data["type"])
        if typ == "RUN_STARTED":
            run = {"threadId": o.data["threadId"], "runId": o.data["runId"]}
        elif typ in ("RUN_FINISHED", "RUN_ERROR"):
            run, step, opened = None, None, {}
        elif typ == "STEP_STARTED":
            step = o.data["stepName"]
        elif typ == "STEP_FINISHED":
            step = None
        elif typ in OPENERS:
            opened[(OPENERS[typ], _ident(o.data))] = {k: v for k, v in o.data.items() if k != "timestamp"}
        elif typ in CLOSERS:
            opened.pop((CLOSERS[typ], _ident(o.data)), None)
    if run is None:
        return []
    out = [Out({"type": "RUN_STARTED", **run}), Out({"type": "STATE_SNAPSHOT", "snapshot": copy(state)})]
    if step is not None:
        out.append(Out({"type": "STEP_STARTED", "stepName": step}))
    out.extend(Out(data) for data in opened.values())
    return out


def _ident(data: Mapping[str, Any]) -> str:
    return str(data.get("toolCallId") or data.get("messageId"))
