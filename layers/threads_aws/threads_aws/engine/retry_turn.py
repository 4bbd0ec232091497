"""The step's side of retries and fallback: it turns `engine.retry` decisions into appends and
wake-ups; a live attempt's lease is kept alive by `loop.StepBase.heartbeat` (`heartbeat_ms`).

Ordering:
- a retry's wake-up is armed (`EngineContext.timer`: a delayed message, see `store.step_timer`)
  before its `retry_scheduled` is appended: a crash in between leaves a spare wake-up, never a
  recorded wait that nobody wakes;
- the wait holds no Lambda: the step ends `wait` and the branch is advanced again at
  `not_before`; a step that finds the retry not yet due (woken by a control, a duplicate) arms
  another wake-up and appends nothing;
- a failure and its decision are one append (`failure_drafts`), re-decided on the new head after a
  lost race with the same `now` (so the same wait);
- while the adapter call runs, a thread renews the lease every `heartbeat_ms` (a long stream
  outlives the lease TTL otherwise, and a concurrent step would abandon a live attempt as a
  crash); a dead worker stops renewing, so recovery finds its attempt within one lease TTL.
"""

from __future__ import annotations

import logging
from typing import Any

from ..writer import Draft, DraftLike, View
from . import fallback, retry
from .calls import Calls
from .loop import HOST

log = logging.getLogger("threads_aws.engine")


class RetryTurn(Calls):
    def arm(self, not_before: int) -> bool:
        """Schedule the branch's wake-up at `not_before`; False without a timer (or if it
        failed: the queue handler then backs the step off instead)."""
        self.wake_at = not_before
        timer = self.ctx.timer
        if timer is None:
            return False
        try:
            timer.wake_at(self.branch_id, not_before, now_ms=self.ctx.clock())
        except Exception:  # noqa: BLE001 - the record's backoff redelivers the step instead
            log.exception("could not arm the retry wake-up of %s", self.branch_id)
            return False
        return True

    def wait(self, not_before: int) -> str:
        self.armed = self.arm(not_before)
        return "wait"

    def failure_drafts(self, view: View, failure: retry.Failure, now: int) -> list[DraftLike]:
        """The abandoned attempt and the decision after it, as one batch."""
        decision = retry.decide(view.fold, failure, now)
        drafts: list[DraftLike] = [Draft("model_attempt_abandoned", failure.data, HOST)]
        return drafts + self.decision_drafts(view, decision, failure.data, cause=None)

    def decision_drafts(
        self, view: View, decision: retry.Decision, abandoned: dict[str, Any], cause: str | None
    ) -> list[DraftLike]:
        """Drafts of a decision (`cause`: the abandoned event's id when it is in the log already;
        else it is the first line of the batch)."""
        if isinstance(decision, retry.Retry):
            return [Draft("retry_scheduled", retry.retry_data(abandoned["request_event_id"], decision), HOST)]
        if isinstance(decision, retry.Fallback):

            def settings_changed(lines: list[Any]) -> Draft:
                data = {
                    "cause_event_id": cause or lines[0].event_id,
                    "reason": "fallback",
                    "settings": decision.settings,
                }
                return Draft("settings_changed", data, HOST)

            return [settings_changed]
        if isinstance(decision, retry.End):
            data: dict[str, Any] = {"reason": decision.reason}
            if decision.code is not None:
                data["code"] = decision.code
            return [Draft("turn_completed", data, HOST)]
        return []  # Resend: nothing to record

    def record_failure(self, failure: retry.Failure) -> str | None:
        """Append a failed attempt with its decision (sticky: it happened), arming a retry's
        wake-up first; `wait` if the step should end until then."""
        now = self.ctx.clock()
        waits: list[int] = []
        armed: set[int] = set()

        def build(view: View) -> list[DraftLike]:
            drafts = self.failure_drafts(view, failure, now)
            waits.clear()
            for d in drafts:
                if isinstance(d, Draft) and d.type == "retry_scheduled" and d.data["not_before"] > now:
                    nb = d.data["not_before"]
                    if nb not in armed:  # a re-decision after a lost race: the same now, same wait
                        self.armed = self.arm(nb)
                        armed.add(nb)
                    waits.append(nb)
            return drafts

        self.append_sticky(build)
        return "wait" if waits else None

    def after_failure(self, view: View) -> str | retry.Resend | None:
        """The turn's latest event is an abandoned attempt: wait, re-send (returned), or append
        what the log has not decided yet."""
        f = view.fold
        now = self.ctx.clock()
        step = retry.after_abandoned(f, now)
        if isinstance(step, retry.Wait):
            return self.wait(step.not_before)
        if isinstance(step, retry.Resend):
            return step
        last = f.turn.last_model
        assert last is not None
        waiting = isinstance(step, retry.Retry) and step.not_before > now
        if waiting:
            assert isinstance(step, retry.Retry)
            self.armed = self.arm(step.not_before)
        self.append(view, self.decision_drafts(view, step, last["data"], cause=last["event_id"]))
        return "wait" if waiting else None

    def revert_if_due(self, view: View) -> bool:
        """A turn-scoped fallback whose turn ended goes back to the settings before it."""
        data = fallback.revert_data(view.fold)
        if data is None:
            return False
        self.append(view, [Draft("settings_changed", data, HOST)])
        return True
