"""Craze events on the wire (`../shared/spec/craze-event.schema.json`, codec v1): the builders
the craze mapper (`craze`) emits through. Every output validates against the closed seed
schema: `type` first, then keys in the schema's order, zero values omitted; tool rows, subagent
rows, questions, asks, usage and model state in the schema's shapes. Pure: no state, no I/O."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.ask_user import norm
from .event_data import as_list, budget_message, obj
from .frames import JsonObj

ORDER = (
    "type text mode agent tool todos permission question plan subagent subagentChange queue "
    "queueChange queuePos command interjection foreignTurn turn ask state replay replayed "
    "compaction cause err stopReason at"
).split()
TOOL_ORDER = "id name status kind title toolName rawInput contentText locations output diffs task".split()
SUBAGENT_ORDER = (
    "id attemptId parentId toolCallId description subagentType model status error prompt output "
    "activity startedAt endedAt durationMs toolCalls turns tokensUsed toolsUsed transcript background"
).split()
TERMINAL = frozenset({"completed", "failed", "cancelled"})
DONE_REASONS = {
    "end_turn": "end_turn",
    "cancelled": "cancelled",
    "interrupted": "cancelled",
    "max_output": "max_tokens",
    "max_turns": "max_turn_requests",
    "handoff": "handoff",
}
ERROR_CLASSES = {
    "context_exhausted": "context_too_large",
    "model_unavailable": "provider",
    "error": "provider",
}
SPEND_KEYS = ("input", "output", "reasoning", "cacheRead", "cacheCreation", "costPicoUsd", "unpriced")
USAGE_KEYS = (
    ("input", "input_tokens"),
    ("output", "output_tokens"),
    ("reasoning", "reasoning_tokens"),
    ("cacheRead", "cache_read_tokens"),
    ("cacheCreation", "cache_write_tokens"),
)


def craze_event(type: str, **fields: Any) -> JsonObj:
    """One craze event: `type` first, then the schema's order; zero values omitted."""
    out: JsonObj = {"type": type}
    for key in ORDER[1:]:
        v = fields.get(key)
        if v is not None and v != "" and v is not False and v != []:
            out[key] = v
    return out


def clean(d: Mapping[str, Any]) -> JsonObj:
    return {k: v for k, v in d.items() if v is not None and v != "" and v is not False and v != []}


def tool_row(row: Mapping[str, Any], at: str | None) -> JsonObj:
    """A tool row as published: the schema's key order, `at` last."""
    tool = {k: row[k] for k in TOOL_ORDER if k in row}
    if at:
        tool["at"] = at
    return tool


def subagent(row: Mapping[str, Any]) -> JsonObj:
    return {k: row[k] for k in SUBAGENT_ORDER if k in row and row[k] not in (None, "", 0, False, [])}


def question(call_id: str, args: Mapping[str, Any]) -> JsonObj:
    """An `ask_user` call's question (`q1`, options `o1…`)."""
    prompt = str(args.get("question", ""))
    opts = [o for o in as_list(args.get("options")) if isinstance(o, str)]
    item = clean(
        {
            "id": "q1",
            "prompt": prompt,
            "options": [{"id": f"o{i}", "label": o} for i, o in enumerate(opts, 1)],
            "allowMultiple": bool(args.get("multi_select")),
        }
    )
    return (
        {"id": call_id, "title": prompt, "questions": [item]}
        if prompt
        else {"id": call_id, "questions": [item]}
    )


def plan(plan_id: str, overview: str, todos: list[JsonObj]) -> JsonObj:
    """A plan ask's opening: the todo list as a markdown checklist, named by the overview's
    first markdown heading (else "Plan", as craze's native)."""
    heading = next((ln.lstrip("#").strip() for ln in overview.splitlines() if ln.startswith("#")), "")
    marks = {"completed": "x", "cancelled": "-"}
    body = "\n".join(f"- [{marks.get(str(t['status']), ' ')}] {t['content']}" for t in todos)
    return clean(
        {"id": plan_id, "name": heading or "Plan", "overview": overview.strip(), "plan": body, "todos": todos}
    )


def chosen_options(args: Mapping[str, Any], answer: str) -> list[str]:
    """An answer's `answers` list: the option ids it picked (one per line; options match by the
    §ask_user rule), or, for a question without options, the free text itself as the one entry
    (craze has no free-text slot: an entry that is no option id of the question is the typed
    text — `{q1: []}` would say "nothing chosen" and lose it). A line that matches no option
    (the answer route refuses those) is kept as text too, never dropped."""
    opts = [str(o) for o in as_list(args.get("options")) if isinstance(o, str)]
    if not opts:
        return [answer] if answer else []
    folded = [norm(o) for o in opts]
    return [
        f"o{folded.index(norm(a)) + 1}" if norm(a) in folded else a for a in answer.split("\n") if a.strip()
    ]


def approval_options(rules: list[str]) -> list[JsonObj]:
    options = [{"optionId": "grant", "name": "Allow", "kind": "allow_once"}]
    for rule in rules:
        options.append(
            {"optionId": f"remember:{rule}", "name": f"Always allow {rule}", "kind": "allow_always"}
        )
    options.append({"optionId": "deny", "name": "Deny", "kind": "reject_once"})
    return options


def effect_options() -> list[JsonObj]:
    return [
        {"optionId": "assume_done", "name": "It took effect", "kind": "allow_once"},
        {"optionId": "assume_not_done", "name": "It did not: run it again", "kind": "reject_once"},
    ]


def ask(
    ask_id: str,
    kind: str,
    *,
    outcome: str,
    by: str,
    option: str | None,
    answers: Any,
    options: list[JsonObj],
) -> JsonObj:
    """An ask's ending; an effect's ask is a permission on the wire."""
    out: JsonObj = {
        "id": ask_id,
        "kind": "permission" if kind == "effect" else kind,
        "outcome": outcome,
        "by": by,
    }
    if option is not None:
        out["optionId"] = option
    if answers is not None:
        out["answers"] = answers
    if option is not None:
        label = next((o["name"] for o in options if o["optionId"] == option), None)
        out["label"] = label or option
    return out


def turn_error(
    reason: str, d: Mapping[str, Any], http_status: int, budget: Mapping[str, Any] | None
) -> JsonObj:
    """The `err` of a turn that ended for a reason not in DONE_REASONS."""
    cls = ERROR_CLASSES.get(reason, "other")
    code = http_status if reason == "model_unavailable" else 0
    message = f"turn ended: {reason}" + (f" ({d['code']})" if d.get("code") else "")
    if reason == "error" and d.get("code"):
        cls = "other"
    if reason == "budget_exhausted" and budget is not None:
        message = budget_message(budget)
    return {"message": message, "class": cls, "code": code}


def zero_spend() -> JsonObj:
    return {k: (False if k == "unpriced" else 0) for k in SPEND_KEYS}


def spend_of(sums: Sequence[int]) -> JsonObj:
    """A spend from usage sums in USAGE_KEYS order (the fold's USAGE_FIELDS); unpriced when any."""
    spend = zero_spend()
    for (key, _), v in zip(USAGE_KEYS, sums, strict=False):
        spend[key] = int(v)
    spend["unpriced"] = any(sums)
    return spend


def add_spend(spend: JsonObj, usage: Mapping[str, Any]) -> None:
    for key, field in USAGE_KEYS:
        v = usage.get(field)
        if isinstance(v, int):
            spend[key] += v
    spend["unpriced"] = True  # a run stream carries no price table


def usage_state(usage: Mapping[str, Any], turn: JsonObj, session: JsonObj) -> JsonObj:
    ctx = sum(v for v in (usage.get("input_tokens"), usage.get("output_tokens")) if isinstance(v, int))
    return {"usage": {"contextTokens": ctx, "contextWindow": 0, "turn": dict(turn), "session": dict(session)}}


def model_state(settings: Mapping[str, Any]) -> JsonObj:
    """`settings_changed` → `meta.state`: the model as `provider/name`, its params as options."""
    model = obj(settings.get("model"))
    params = obj(settings.get("model_params"))
    options = [
        {
            "id": k,
            "name": k,
            "current": v if isinstance(v, str) else json.dumps(v, separators=(",", ":"), sort_keys=True),
        }
        for k, v in sorted(params.items())
    ]
    return {
        "model": f"{model.get('provider')}/{model.get('name')}",
        "config": {"options": options} if options else {},
    }


def todos(items: Any) -> list[JsonObj]:
    return [
        {"id": str(x.get("id")), "content": str(x.get("content")), "status": str(x.get("status"))}
        for x in as_list(items)
        if isinstance(x, dict)
    ]
