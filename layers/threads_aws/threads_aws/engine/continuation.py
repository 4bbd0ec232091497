"""Output continuation (semantics, stop reasons: `max_tokens` → "a fixed continuation
instruction, up to `context.max_output_continuations`, then `max_output`").

A turn response that stopped at `max_tokens` (and proposed no call) gets
`injected{source: recovery, trust: trusted_instruction, origin.id: <the response>}` with
CONTINUATION_INSTRUCTION, rendered as a user line of the next request; the next step requests
again (`Turn.instructed` names the continued response, so a crash between the two never
instructs twice). The fold counts the turn's truncated responses (`Turn.truncations`); past the
limit (absent `policy.context`: 0) the turn ends `max_output` as before.
"""

from __future__ import annotations

from ..core.fold import Turn
from ..writer import Draft, View
from .loop import HOST, StepBase
from .output import APPENDED, REQUEST, turn_answer

#: The fixed continuation instruction (ours: the spec pins that it is fixed, not its text).
CONTINUATION_INSTRUCTION = (
    "Your previous answer was cut off at the output token limit. "
    "Continue exactly where it stopped, without repeating anything."
)


def max_continuations(policy: dict) -> int:
    ctx = policy.get("context")
    return int(ctx.get("max_output_continuations", 0)) if isinstance(ctx, dict) else 0


class Continuation(StepBase):
    def continuation_next(self, view: View, turn: Turn) -> str | None:
        """Continue a truncated answer, or None (not ours: the turn ends `max_output`)."""
        last = turn_answer(view.fold, turn)
        if last is None or last["data"]["stop_reason"] != "max_tokens":
            return None
        if any(p.get("type") == "tool_use" for p in last["data"]["content"]):
            return None  # its calls dispatch first; the model sees their results next
        if turn.instructed == last["event_id"]:
            return REQUEST
        if turn.truncations > max_continuations(view.fold.policy):
            return None
        data = {
            "origin": {"id": last["event_id"]},
            "source": "recovery",
            "text": CONTINUATION_INSTRUCTION,
            "trust": "trusted_instruction",
        }
        self.append(view, [Draft("injected", data, HOST)])
        return APPENDED
