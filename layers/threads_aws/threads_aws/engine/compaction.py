"""Compaction (semantics §7 `compacted`, rule 10, §8 `context_preflight_blocked`, the breaker):
the one place that decides when a turn's history is summarized and what happens when it can't.

Triggers, checked on the turn request Render v1 would send next (estimate = bytes / 4):
- threshold: the estimate reaches `context.compact.trigger` (tokens, or permille of the effective
  window = the model's `policy.models[].context_window` − `context.reserve_tokens`): compact
  first (`trigger: threshold`); if nothing can be compacted the request goes as it is;
- preflight: the estimate reaches the effective window: `context_preflight_blocked{action:
  compact}` and a compaction right after it (`trigger: reactive`), or,
  when none can run, `context_preflight_blocked{action: fail}` + `turn_completed
  {context_exhausted}`: no request is created, sent or billed;
- the provider answered `prompt_too_long` (`model_attempt_abandoned`): a compaction right after
  it (`trigger: reactive`), else the turn ends `context_exhausted`.

The compaction request carries no `cause_event_id`: semantics.md lists one on `model_request`,
but the contract's `model_request` has no such property (additionalProperties: false) and the
contract is the authority on wire shapes; the cause is the event the request follows.

A compaction can run when the policy has `context.compact`, the breaker is closed (fewer
`compaction_failed` since the last `compacted` than `compact.max_failures`, derived by the
fold) and a range exists that makes progress: from the first `user_input` to the latest step
boundary (rule 10: no pending call, no attempt awaiting) before the kept tail
(`compact.keep_tail`, estimated per event), past every earlier compacted range (a new range
contains the earlier ones: ranges never partly overlap).

Ordering: `model_request{purpose: compaction}` (Render v1 + the instruction line; bytes in S3
first, C2; the reservation of every covering budget with it) → the model → one sticky batch:
`model_response` + `compacted{from/to, summary_ref = the response's UTF-8 text, summary_request_
event_id}` (the summary bytes are put to S3 before), or `model_response` + `compaction_failed
{summary, empty_summary}`, or `model_attempt_abandoned` + `compaction_failed{summary,
prompt_too_long | model_error}`. A crash while the compaction awaits its answer is abandoned by
recovery; the next step then records its `compaction_failed`. After either outcome the turn
requests again and the checks run on the new history, so the breaker bounds every loop.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..core.canonical import sha256_hex
from ..core.fold import Fold, Turn
from ..writer import Draft, View
from .budget_plan import attempt_of
from .budgets import Budgets
from .loop import HOST, MODEL
from .models import ModelError
from .output import APPENDED, REQUEST, final_text

ANSWERS = frozenset({"model_response", "model_response_recovered", "model_attempt_abandoned"})


def _tokens(threshold: Mapping[str, Any] | None, effective: int) -> int | None:
    if not isinstance(threshold, Mapping):
        return None
    if "tokens" in threshold:
        return int(threshold["tokens"])
    if "permille" in threshold:
        return effective * int(threshold["permille"]) // 1000
    return None


def effective_window(f: Fold) -> int | None:
    """The current model's window less `context.reserve_tokens` (None: no window declared)."""
    entry = attempt_of(f).entry
    window = entry.get("context_window") if entry is not None else None
    if not isinstance(window, int) or window <= 0:
        return None
    ctx = f.policy.get("context") or {}
    return max(0, window - int(ctx.get("reserve_tokens", 0)))


def _event_tokens(ev: Mapping[str, Any]) -> int:
    return len(json.dumps(ev.get("data", {}), separators=(",", ":"))) // 4


def compaction_range(f: Fold, keep_tail_tokens: int) -> tuple[int, int] | None:
    """(from_seq, to_seq) of the next compaction, or None when none makes progress."""
    if not f.inputs:
        return None
    lo = f.inputs[0]
    head = len(f.events)
    done = max((hi for a, hi in f.compacted_ranges if a <= lo), default=lo - 1)
    kept = 0
    cut = head  # events after `cut` are the kept tail
    for seq in range(head, lo - 1, -1):
        kept += _event_tokens(f.events[seq - 1])
        if kept > keep_tail_tokens:
            break
        cut = seq - 1
    for hi in range(cut, done, -1):
        if f.boundary_after.get(hi, False) and f.events[hi - 1]["type"] not in (
            "compacted",
            "compaction_failed",
        ):
            return lo, hi
    return None


class Compaction(Budgets):
    # --------------------------------------------------------------------- decisions
    def compact_policy(self, f: Fold) -> Mapping[str, Any] | None:
        """`context.compact` when a compaction may run now (the breaker closed)."""
        ctx = f.policy.get("context")
        compact = ctx.get("compact") if isinstance(ctx, Mapping) else None
        if not isinstance(compact, Mapping):
            return None
        if f.compaction_failures >= int(compact.get("max_failures", 1)):
            return None  # the breaker is open until a compaction succeeds
        return compact

    def _range(self, f: Fold) -> tuple[int, int] | None:
        compact = self.compact_policy(f)
        effective = effective_window(f)
        if compact is None or effective is None:
            return None
        return compaction_range(f, _tokens(compact.get("keep_tail"), effective) or 0)

    def preflight(self, view: View, body: bytes) -> bool:
        """Before a turn request: True when this step compacted or ended the turn instead."""
        f = view.fold
        effective = effective_window(f)
        if effective is None:
            return False
        estimate = len(body) // 4
        compact = self.compact_policy(f)
        trigger = _tokens(compact.get("trigger"), effective) if compact is not None else None
        rng = self._range(f) if estimate >= min(effective, trigger or effective) else None
        if estimate < effective:
            if trigger is None or estimate < trigger or rng is None:
                return False
            self.compact(view, rng, "threshold")
            return True
        blocked = {
            "action": "compact" if rng else "fail",
            "estimated_tokens": estimate,
            "window_tokens": effective,
        }
        drafts = [Draft("context_preflight_blocked", blocked, HOST)]
        if rng is None:
            drafts.append(Draft("turn_completed", {"reason": "context_exhausted"}, HOST))
            self.append(view, drafts)
            return True
        self.append(view, drafts)
        self.compact(self.ctx.writer.load(self.branch_id), rng, "reactive")
        return True

    def compaction_next(self, view: View, turn: Turn) -> str | None:
        """After a compaction's answer: the turn requests again (REQUEST); after a provider's
        `prompt_too_long`: a reactive compaction (APPENDED); else None (not ours)."""
        f = view.fold
        last = turn.last_model
        if last is None or last["type"] not in ANSWERS:
            return None
        rid = last["data"]["request_event_id"]
        if f.purpose_of(rid) == "compaction":
            settled = max(f.last_compacted_seq, f.last_compaction_failed_seq)
            if last["type"] == "model_attempt_abandoned" and settled < last["seq"]:
                # abandoned by recovery (a crash while it awaited): record the failure
                failed = {"reason": "model_error", "request_event_id": rid, "stage": "summary"}
                self.append(view, [Draft("compaction_failed", failed, HOST)])
                return APPENDED
            return REQUEST
        if last["type"] == "model_attempt_abandoned" and last["data"].get("reason") == "prompt_too_long":
            rng = self._range(f)
            if rng is None:
                return None  # the turn ends context_exhausted (model_turn.after_answer)
            self.compact(view, rng, "reactive")
            return APPENDED
        return None

    # -------------------------------------------------------------------- the request
    def compact(self, view: View, rng: tuple[int, int], trigger: str) -> None:
        """One compaction attempt over `rng`, recorded whatever its outcome."""
        settings: dict[str, Any] = view.fold.settings or {}
        try:
            adapter = self.ctx.models(settings["model"], settings["adapter"])
        except LookupError:
            self.append(view, [Draft("turn_completed", {"reason": "model_unavailable"}, HOST)])
            return
        renderer = self.ctx.renderer(view)
        body = renderer.request(self.ctx.artifacts.get_ref, purpose="compaction")
        head = renderer.line0()
        ref = self.ctx.artifacts.put(body, "application/x-ndjson")  # the bytes first (C2)
        self.maybe_renew(force=True)
        data: dict[str, Any] = {
            "attempt": 1,
            "declared_prefix": {"bytes": len(head), "sha256": sha256_hex(head)},
            "purpose": "compaction",
            "request_ref": ref,
        }
        lines = self.append_request(view, [Draft("model_request", data, HOST)])  # with its budgets
        if lines is None:
            return  # a covering budget refused it (engine.budgets): the turn is over
        rid = lines[0].event_id
        assert rid is not None
        try:
            answer = adapter.complete(
                body,
                settings=settings,
                request_event_id=rid,
                branch_id=self.branch_id,
                artifacts=self.ctx.artifacts,
            )
        except ModelError as exc:
            from .model_turn import ABANDON_REASONS

            abandoned = exc.abandoned(rid, ABANDON_REASONS)
            reason = "prompt_too_long" if exc.reason == "prompt_too_long" else "model_error"
            failed = {"reason": reason, "request_event_id": rid, "stage": "summary"}
            self.append_sticky(
                lambda v: [
                    Draft("model_attempt_abandoned", abandoned, HOST),
                    Draft("compaction_failed", failed, HOST),
                ]
            )
            return
        except Exception:  # noqa: BLE001 - the request may have reached the provider
            unknown = {"provider_outcome": "unknown", "reason": "provider_error", "request_event_id": rid}
            failed = {"reason": "model_error", "request_event_id": rid, "stage": "summary"}
            self.append_sticky(
                lambda v: [
                    Draft("model_attempt_abandoned", unknown, HOST),
                    Draft("compaction_failed", failed, HOST),
                ]
            )
            return
        response = {
            "completeness": "complete",
            "content": answer.content,
            "request_event_id": rid,
            "stop_reason": answer.stop_reason,
            "usage": answer.usage,
        }
        text = final_text(answer.content).encode("utf-8")
        if not text.strip():
            failed = {"reason": "empty_summary", "request_event_id": rid, "stage": "summary"}
            self.append_sticky(
                lambda v: [Draft("model_response", response, MODEL), Draft("compaction_failed", failed, HOST)]
            )
            return
        summary_ref = self.ctx.artifacts.put(text, "text/plain")  # durable before the reference

        def drafts(v: View) -> list[Draft]:
            f = v.fold
            lo, hi = rng
            compacted = {
                "from_event_id": f.events[lo - 1]["event_id"],
                "from_seq": lo,
                "summary_ref": summary_ref,
                "summary_request_event_id": rid,
                "to_event_id": f.events[hi - 1]["event_id"],
                "to_seq": hi,
                "trigger": trigger,
            }
            return [Draft("model_response", response, MODEL), Draft("compacted", compacted, HOST)]

        self.append_sticky(drafts)
