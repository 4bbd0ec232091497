"""Budgets in the step: every `model_request` is appended with its reservation, or refused.

Ordering: the plan (`budget_plan.plan`) is made from the loaded view; the request line and its
reservation rows commit in one transaction (`budget_plan.reservations`, companions of the
append). A total's failed condition means the budget cannot take this attempt: nothing was
written, and the refusal is appended instead: `budget_exceeded`, every pending call closed
`not_executed`, `turn_completed{budget_exhausted}`. After it no `model_request` until a new
`user_input` (rule 21, checked by the fold on every append). The answer's settlement rides the
answer's own append (`loop.StepBase.append`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.lines import StoredLine
from ..store.records import CompanionFailed
from ..writer import Draft, View
from . import budget_plan
from .loop import HOST, StepBase, result

NOT_EXECUTED_PREVIEW = "Not executed: the budget is exhausted."


class Budgets(StepBase):
    def append_request(self, view: View, drafts: Sequence[Draft]) -> list[StoredLine] | None:
        """Append the request `drafts` with the attempt's reservation; None when a covering
        budget refused it (the refusal is appended then)."""
        holds = budget_plan.plan(self.ctx, view, self.ctx.clock())
        if isinstance(holds, budget_plan.Refusal):
            self.refuse(view, holds)
            return None
        if not holds:
            return self.append(view, drafts)
        key = f"{self.branch_id}:{view.head_seq + 1}"  # the seq the request takes
        companions, tags = budget_plan.reservations(self.ctx.stores.budget_ledger, holds, key)
        try:
            return self.append(view, drafts, lambda v, ls: companions)
        except CompanionFailed as exc:
            hold = tags.get(exc.tag)
            if hold is None:
                raise
            self.refuse(self.ctx.writer.load(self.branch_id), budget_plan.refused(hold, exc.item))
            return None

    def refuse(self, view: View, refusal: budget_plan.Refusal) -> None:
        drafts = [Draft("budget_exceeded", refusal.data, HOST)]
        drafts += [result(cid, NOT_EXECUTED_PREVIEW, "not_executed", True) for cid in view.fold.pending]
        drafts.append(Draft("turn_completed", {"reason": "budget_exhausted"}, HOST))
        self.append(view, drafts)
