"""Structured output (semantics §Turn structure "after structured output, if pinned", rule 20):
a turn's final answer under a pinned `policy.output` is checked before the turn completes.

Native mode (the only mode this host implements; the agents file refuses `tool`): the candidate
is the final `model_response`'s text, parsed as JSON (one fenced ```json block is accepted) and
validated with the compiled validator of the pinned schema (`core.output_schema`).

Ordering: the check appends one batch, so a crash leaves either nothing or the whole decision:
- accepted: `output_validated{accepted, value}` + `turn_completed{end_turn}` (the run's result
  carries the value: the `output` projection and RunOutcome read the same event);
- rejected with retries left (`policy.output.max_retries` counts re-requests): `output_validated
  {rejected, errors}` + `injected{source: recovery, trust: trusted_instruction}` naming the
  response (`origin.id`) and telling the model what failed; the next step requests again
  (`Turn.validated` names the checked response, so it is never checked twice);
- rejected with none left: `output_validated{rejected}` + `turn_completed{output_invalid}`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..core import output_schema
from ..core.fold import Fold, Turn
from ..writer import Draft, View
from .loop import HOST, StepBase

RESPONSES = frozenset({"model_response", "model_response_recovered"})
FINAL_STOPS = frozenset({"end_turn", "stop_sequence"})
#: The instruction after a rejected candidate (ours: the spec gives no text). The errors follow.
REJECTED_INSTRUCTION = (
    "Your final answer does not match the required output schema. "
    "Answer again with one JSON value matching the schema, and nothing else. Problems: "
)
_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n(.*)\n```\s*$", re.S)

# A hook's answer to the step: the caller requests next (REQUEST) or the hook appended (APPENDED).
REQUEST = "request"
APPENDED = "appended"


def final_text(content: list[dict[str, Any]]) -> str:
    return "".join(str(p.get("text", "")) for p in content if p.get("type") == "text")


def candidate(text: str) -> tuple[Any, list[dict[str, str]]]:
    """(value, []) when `text` is one JSON value, else (None, errors)."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        return json.loads(body, parse_constant=_no_constant), []
    except json.JSONDecodeError as exc:
        return None, [{"message": f"the answer is not one JSON value ({exc.msg})", "path": "/"}]
    except ValueError as exc:  # a constant JSON has no value for (NaN) or too deep a value
        return None, [{"message": f"the answer is not one JSON value ({exc})", "path": "/"}]


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def turn_answer(f: Fold, turn: Turn) -> dict[str, Any] | None:
    """The turn's latest answer when it is a response to a turn request (not a compaction)."""
    last = turn.last_model
    if last is None or last["type"] not in RESPONSES:
        return None
    return last if f.purpose_of(last["data"]["request_event_id"]) == "turn" else None


class Output(StepBase):
    def output_next(self, view: View, turn: Turn) -> str | None:
        """The structured-output decision on the turn's final answer, or None (not ours)."""
        f = view.fold
        out = f.policy.get("output")
        last = turn_answer(f, turn)
        if out is None or last is None or turn.steered:
            return None
        d = last["data"]
        if d["stop_reason"] not in FINAL_STOPS or any(p.get("type") == "tool_use" for p in d["content"]):
            return None
        if turn.validated == last["event_id"]:
            return REQUEST  # rejected, retry owed (an accepted check completed the turn with it)
        value, errors = candidate(final_text(d["content"]))
        if not errors:
            errors = output_schema.errors(out["schema"], value)
        check: dict[str, Any] = {
            "outcome": "rejected" if errors else "accepted",
            "schema_sha256": out["schema_sha256"],
            "source_event_id": last["event_id"],
        }
        if errors:
            check["errors"] = errors
        else:
            check["value"] = value
        drafts = [Draft("output_validated", check, HOST)]
        if not errors:
            drafts.append(Draft("turn_completed", {"reason": "end_turn"}, HOST))
        elif turn.output_rejections + 1 > int(out.get("max_retries", 0)):
            drafts.append(Draft("turn_completed", {"reason": "output_invalid"}, HOST))
        else:
            problems = "; ".join(f"{e['path']}: {e['message']}" for e in errors)
            feedback = {
                "origin": {"id": last["event_id"]},
                "source": "recovery",
                "text": REJECTED_INSTRUCTION + problems,
                "trust": "trusted_instruction",
            }
            drafts.append(Draft("injected", feedback, HOST))
        self.append(view, drafts)
        return APPENDED
