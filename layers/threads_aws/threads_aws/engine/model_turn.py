"""The model turn: request, answer, and when the turn ends.

Ordering (C2): the rendered request bytes are put to S3 before `model_request` is appended, and
`model_request` is durable (and the lease renewed) before the model is called. The answer and
the calls it proposes (`model_response`, then each `tool_call` with its `permission_decision`)
are recorded sticky: they happened. A provider failure is `model_attempt_abandoned` (the adapter
classifies it: `ModelError.abandoned`), appended with what follows it (a retry, a fallback or the
turn's end: `engine.retry`, `engine.retry_turn`); an exception of unknown outcome is abandoned
`unknown`. Before anything is stored, the adapter's capability pre-check (`preflight`) may end
the turn `error` with content_unsupported / continuation_unsupported: no model_request then.
"""

from __future__ import annotations

from typing import Any

from .. import observability
from ..core.canonical import sha256_hex
from ..core.fold import Fold, Turn
from ..writer import Draft, View
from . import answer_fit, retry
from .budgets import Budgets
from .compaction import Compaction
from .continuation import Continuation
from .deltas import DeltaPublisher
from .loop import HOST, MODEL, RECOVERY
from .models import ModelError
from .models import preflight as capability_check
from .output import APPENDED, REQUEST, Output
from .retry_turn import RetryTurn

MAX_PAUSE_CONTINUATIONS = 3
ABANDON_REASONS = frozenset(
    {
        "crash",
        "timeout",
        "provider_error",
        "stream_broken",
        "cancelled",
        "steered",
        "rate_limited",
        "overloaded",
        "server_error",
        "prompt_too_long",
        "guardrail",
    }
)


def abandon_open_attempts(f: Fold, reason: str) -> list[Draft]:
    """Close every attempt still awaiting its response: sent or not, we can't tell (no lookup)."""
    data = {"provider_outcome": "unknown", "reason": reason}
    return [
        Draft("model_attempt_abandoned", {**data, "request_event_id": rid}, RECOVERY) for rid in f.awaiting
    ]


class ModelTurn(RetryTurn, Output, Continuation, Compaction, Budgets):
    def next_model_step(self, view: View, turn: Turn) -> str | None:
        """Request again or complete the turn, from the latest answer. Under `stop_when_idle`
        (the in-flight work is done by now) nothing new starts: the turn ends `interrupted`.
        A failed attempt is the retry policy's (engine.retry)."""
        compacting = self.compaction_next(view, turn)  # compaction's answers, prompt_too_long
        if compacting == APPENDED:
            return None
        if compacting == REQUEST:
            return (
                self.complete_turn(view, "interrupted")
                if turn.stop_when_idle
                else self.request(view, attempt=1)
            )
        last = turn.last_model
        if last is not None and last["type"] == "model_attempt_abandoned":
            if turn.stop_when_idle:
                return self.complete_turn(view, "interrupted")
            after = self.after_failure(view)  # retries and fallback (engine.retry)
            if not isinstance(after, retry.Resend):
                return after
            return self.request(view, attempt=after.attempt)
        limits = self.output_next(view, turn) or self.continuation_next(view, turn)  # run limits
        if limits == APPENDED:
            return None
        attempt, reason = (1, "") if limits else self.after_answer(view.fold, turn)
        if attempt is not None and turn.stop_when_idle:
            return self.complete_turn(view, "interrupted")
        if attempt is not None:
            return self.request(view, attempt=attempt)
        return self.complete_turn(view, reason)

    @staticmethod
    def after_answer(f: Fold, turn: Turn) -> tuple[int | None, str]:
        """(attempt to request next, None) or (None, turn_completed reason)."""
        last = turn.last_model
        if last is None:
            return 1, ""
        d = last["data"]
        stop = d["stop_reason"]
        if any(p.get("type") == "tool_use" for p in d["content"]):
            return 1, ""  # its calls have their results now
        if stop == "tool_use":  # nothing to dispatch: re-asking would loop forever
            return None, "error"
        if stop in ("end_turn", "stop_sequence", "refusal"):
            if turn.steered:  # a steer landed while the model answered: it renders next
                return 1, ""
            return None, "end_turn"
        if stop == "pause_turn":
            if turn.pauses > MAX_PAUSE_CONTINUATIONS:
                return None, "error"
            return 1, ""
        if stop == "max_tokens":
            return None, "max_output"
        if stop == "context_window_exceeded":
            return None, "context_exhausted"
        return None, "error"

    def complete_turn(self, view: View, reason: str, code: str | None = None) -> str | None:
        data = {"reason": reason} if code is None else {"code": code, "reason": reason}
        self.append(view, [Draft("turn_completed", data, HOST)])
        return None

    def request(self, view: View, *, attempt: int) -> str | None:
        settings: dict[str, Any] = view.fold.settings or {}
        try:
            adapter = self.ctx.models(settings["model"], settings["adapter"])
        except LookupError:
            return self.complete_turn(view, "model_unavailable")
        adapter = observability.model_latency(adapter, settings["adapter"])  # its calls timed
        renderer = self.ctx.renderer(view)
        body = renderer.request(self.ctx.artifacts.get_ref)
        refused = capability_check(adapter, body, self.ctx.artifacts)  # before anything is stored
        if refused is not None:
            return self.complete_turn(view, "error", retry.turn_code(refused.code))
        head = renderer.line0()
        prefix = {"bytes": len(head), "sha256": sha256_hex(head)}
        if self.preflight(view, body):
            return None  # compacted first, or the turn ended context_exhausted (engine.compaction)
        ref = self.ctx.artifacts.put(body, "application/x-ndjson")  # the bytes first (C2)
        self.maybe_renew(force=True)
        data = {"attempt": attempt, "declared_prefix": prefix, "request_ref": ref}
        lines = self.append_request(view, [Draft("model_request", data, HOST)])  # with its budgets
        if lines is None:
            return None  # a covering budget refused it (engine.budgets)
        rid = lines[0].event_id
        assert rid is not None
        live = DeltaPublisher(self.ctx.stores.deltas, self.branch_id, rid)  # token deltas
        try:
            with self.heartbeat(view):  # the lease outlives a long answer
                answer = adapter.complete(
                    body,
                    settings=settings,
                    request_event_id=rid,
                    branch_id=self.branch_id,
                    artifacts=self.ctx.artifacts,
                    on_delta=live,
                )
        except ModelError as exc:  # classified by the adapter: outcome, reason, billing, retry-after
            # The event has no message field: the words naming a missing key or secret go to the
            # worker's log, with the branch and request ids the run result points to.
            observability.logger.warning(
                "model attempt abandoned", extra={"request_event_id": rid, "detail": str(exc)}
            )
            failed = exc.abandoned(rid, ABANDON_REASONS)
            return self.record_failure(retry.Failure(failed, exc.retryable, exc.retry_after_ms, exc.code))
        except Exception:  # noqa: BLE001 - the request may have reached the provider
            unknown = {"provider_outcome": "unknown", "reason": "provider_error", "request_event_id": rid}
            return self.record_failure(retry.Failure(unknown, retryable=False))
        finally:
            live.close()  # every delta is written before the answer commits
        response = {
            "completeness": "complete",
            "content": answer.content,
            "request_event_id": rid,
            "stop_reason": answer.stop_reason,
            "usage": answer.usage,
        }
        response = answer_fit.fit(response, self.ctx.artifacts.put)  # one line, or a preview
        self.append_sticky(lambda v: self.answer_drafts(v, response))
        return None

    def answer_drafts(self, view: View, response: dict[str, Any]) -> list[Draft]:
        """The response, then each proposed call with its permission decision."""
        rid = response["request_event_id"]
        drafts = [Draft("model_response", response, MODEL)]
        for part in response["content"]:
            if part.get("type") != "tool_use":
                continue
            call = {
                "call_id": part["call_id"],
                "input": part["input"],
                "name": part["name"],
                "request_event_id": rid,
            }
            drafts.append(Draft("tool_call", call, MODEL))
            drafts += self.gate_drafts(view, call)  # hook and permission decisions (engine.calls)
        return drafts
