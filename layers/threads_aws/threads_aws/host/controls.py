"""Controls: a human's decisions on a branch, each one append (plus the side row it moves) under
the writer epoch, then a wake: approval decisions, answers, parked-effect resolutions, cancel,
settings (model) and mode changes (semantics.md §4-5).

A decision that closes a park commits the park's `resumed` in the same append (`base.resumed`).
Approval and question rows move in the decision's transaction as companions, so a second
decision fails the row's condition and appends nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.ask_user import match, options_of
from ..core.errors import LogError
from ..core.fold import Challenge, Fold
from ..core.lines import StoredLine
from ..store.approvals import ApprovalRow
from ..store.records import CompanionFailed
from ..writer import Draft, View
from .authority import Authority, opened_turn
from .base import Maker, approver, resumed, user
from .errors import ApiError, invalid, not_found
from .principal import Principal


class Controls(Authority):
    # ------------------------------------------------------------------ approvals
    def decide_approval(
        self, principal: Principal, thread_id: str, challenge_id: str, body: dict[str, Any]
    ) -> dict[str, str]:
        self._thread(principal, thread_id)
        row = self.stores.approvals.get(challenge_id)
        if row is None or row.tenant != principal.tenant or row.thread_id != thread_id:
            raise not_found(f"challenge {challenge_id} not found")
        rec = self._branch(principal, thread_id, row.branch_id)
        grant = body["decision"] == "grant"
        rule = body.get("remember_rule")
        if rule is not None and not grant:
            raise invalid("body.remember_rule is for a grant only")
        if rule is not None and rule not in row.suggested_rules:
            raise invalid("body.remember_rule must be one of the challenge's suggested_rules")
        late: list[bool] = []

        def decide(view: View) -> list[StoredLine]:
            self._require_authority(principal, view)
            ch = _open_challenge(view.fold, row)
            now = self.clock()
            late[:] = [now >= row.expires_at]
            state = "expired" if late[0] else ("granted" if grant else "denied")
            makers = _decision(
                principal, row, ch, body, state, parked=("approval", row.challenge_id) in view.fold.parked
            )
            try:
                return self._commit(
                    view,
                    makers,
                    lambda _: [self.stores.approvals.consume(row.challenge_id, state, principal.key, now)],
                )
            except CompanionFailed as exc:
                old = (
                    ApprovalRow.from_item(exc.item)
                    if exc.item
                    else self.stores.approvals.get(row.challenge_id)
                )
                if old is not None and old.state == "expired":
                    raise ApiError("approval_expired", "this challenge expired") from None
                raise ApiError("approval_duplicate", "this challenge was already answered") from None

        lines = self._control(rec, decide)
        self._wake(rec.branch_id, "approval")
        if late and late[0]:
            raise ApiError("approval_expired", "this challenge expired; recorded as a denial")
        return self._appended(lines)

    # ------------------------------------------------------------------ questions
    def answer_question(
        self, principal: Principal, thread_id: str, call_id: str, branch_id: str | None, body: dict[str, Any]
    ) -> dict[str, str]:
        rec = self._branch(principal, thread_id, branch_id)

        def decide(view: View) -> list[StoredLine]:
            fold = view.fold
            if ("input", call_id) not in fold.parked or call_id not in fold.pending:
                raise ApiError("no_open_question", f"no open question {call_id}")
            if not opened_turn(principal, fold):
                raise ApiError("forbidden", "only the principal who opened the turn may answer")
            text = answer_text(fold.calls[call_id].input, body["answer"])
            result = {
                "call_id": call_id,
                "completeness": "complete",
                "is_error": False,
                "origin": "answered",
                "preview": text,
            }
            makers = [lambda _: Draft("tool_result", result, user(principal)), resumed("input", call_id)]
            # The questions row moves to answered in the transaction of the settling result.
            if self.stores.questions.get(rec.branch_id, call_id) is None:
                return self._commit(view, makers)
            now = self.clock()
            return self._commit(
                view, makers, lambda _: [self.stores.questions.answered(rec.branch_id, call_id, now)]
            )

        try:
            lines = self._control(rec, decide)
        except CompanionFailed:
            raise ApiError("no_open_question", f"question {call_id} was answered meanwhile") from None
        self._wake(rec.branch_id, "answer")
        return self._appended(lines)

    # ------------------------------------------------------------------ parked effects
    def resolve_parked(
        self,
        principal: Principal,
        thread_id: str,
        effect_key: str,
        branch_id: str | None,
        body: dict[str, Any],
    ) -> dict[str, str]:
        rec = self._branch(principal, thread_id, branch_id)

        def decide(view: View) -> list[StoredLine]:
            self._require_authority(principal, view)
            fold = view.fold
            effect = fold.effects.get(effect_key)
            if ("effect", effect_key) not in fold.parked or effect is None or effect["status"] != "unknown":
                raise ApiError("not_parked", f"effect {effect_key} is not parked")
            data = {"call_id": effect["call_id"], "outcome": body["resolution"], "by": "human"}
            makers = [
                lambda _: Draft("effect_resolved", data, approver(principal)),
                resumed("effect", effect_key),
            ]
            return self._commit(view, makers)

        lines = self._control(rec, decide)
        self._wake(rec.branch_id, "resolution")
        return self._appended(lines)

    # ------------------------------------------------------------------ cancel, settings, mode
    def cancel(
        self,
        principal: Principal,
        thread_id: str,
        branch_id: str | None,
        body: Mapping[str, Any] | None = None,
    ) -> dict[str, str]:
        """Append the thread-scoped barrier while a run is open (a turn or a park). With no open
        run, or a barrier already standing (not yet `cancelled`), it is a no-op answer: nothing
        is appended and `event_id` names the standing barrier, else the thread's latest
        `cancel_requested`, else the branch's last event. So repeated cancels never grow the
        log, and a cancel after a run ended never makes the thread final (semantics §4: a
        thread/tree `cancelled` is final; only one that cancelled work is written)."""
        rec = self._branch(principal, thread_id, branch_id)
        data: dict[str, Any] = {"scope": "thread"}
        if body and body.get("reason"):
            data["reason"] = body["reason"]
        barrier = [lambda _: Draft("cancel_requested", data, user(principal))]
        standing: list[str] = []

        def decide(view: View) -> list[StoredLine]:
            f = view.fold
            last_cancel = f.events[f.last_cancel_seq - 1]["event_id"] if f.last_cancel_seq else None
            if last_cancel is not None and last_cancel not in f.cancels_settled:
                standing[:] = [last_cancel]  # the barrier stands; the worker is settling it
                return []
            if not (f.turn_open or f.parked):
                standing[:] = [last_cancel or f.events[-1]["event_id"]]
                return []
            return self._commit(view, barrier)

        lines = self._control(rec, decide)
        if not lines:
            return {"event_id": standing[0]}
        self._wake(rec.branch_id, "cancel")
        return self._appended(lines)

    def set_model(
        self, principal: Principal, thread_id: str, branch_id: str | None, body: dict[str, Any]
    ) -> dict[str, str]:
        rec = self._branch(principal, thread_id, branch_id)

        def decide(view: View) -> list[StoredLine]:
            agent = self._pinned_agent(view)
            if agent is None:
                raise invalid("the thread's agent is not deployed on this host")
            # The model's factory (its adapter and params): the pinned primary and fallback
            # chain, then the deployed agent's (threads pinned before the chain). Imported here:
            # the engine's retry module stays off the other routes' cold start.
            from ..engine import fallback

            settings = fallback.settings_for(
                view.fold,
                body["model"],
                model_params=body.get("model_params"),
                reasoning_carryover=body.get("reasoning_carryover"),
                extra=agent.fallback_settings(),
            )
            if settings is None:
                # Rule 18 (its model must be in policy.models): a domain refusal, as the contract
                # has it for this route ("invalid_transition comes from rule 18"), not a bad body.
                why = "body.model is not in the agent's model or fallback list (rule 18)"
                raise LogError("invalid_transition", None, why)
            models = view.fold.policy.get("models")
            if models is not None and not any(
                m["provider"] == settings["model"]["provider"] and m["name"] == settings["model"]["name"]
                for m in models
            ):
                why = "body.model is not in the thread's policy.models (rule 18)"
                raise LogError("invalid_transition", None, why)
            if view.fold.awaiting:
                raise LogError("invalid_transition", None, "a model attempt awaits its response (rule 18)")
            data = {"reason": "user", "settings": settings}
            return self._commit(view, [lambda _: Draft("settings_changed", data, user(principal))])

        return self._appended(self._control(rec, decide))

    def set_mode(
        self, principal: Principal, thread_id: str, branch_id: str | None, body: dict[str, Any]
    ) -> dict[str, str]:
        rec = self._branch(principal, thread_id, branch_id)

        def decide(view: View) -> list[StoredLine]:
            data = {"from": view.fold.mode, "to": body["mode"]}
            return self._commit(view, [lambda _: Draft("mode_changed", data, user(principal))])

        return self._appended(self._control(rec, decide))


def _open_challenge(fold: Fold, row: ApprovalRow) -> Challenge:
    """The branch's challenge for this row, if it can still be decided (else the route's code)."""
    ch = fold.challenges.get(row.challenge_id)
    if ch is None:
        raise not_found(f"challenge {row.challenge_id} not found on this branch")
    if ch.consumed or row.state in ("granted", "denied"):
        raise ApiError("approval_duplicate", "this challenge was already answered")
    if row.state == "expired":
        raise ApiError("approval_expired", "this challenge expired")
    if ch.call_id != row.call_id or ch.args_hash != row.args_hash:
        raise ApiError("approval_mismatch", "the challenge's binding does not match its call")
    return ch


def _decision(
    principal: Principal, row: ApprovalRow, ch: Challenge, body: dict[str, Any], state: str, *, parked: bool
) -> list[Maker]:
    """The decision's events: granted (plus the remembered rule) or denied (a late grant is an
    `expired` denial), then the park's `resumed`."""
    granted = state == "granted"
    data: dict[str, Any] = {
        "challenge_id": row.challenge_id,
        "call_id": ch.call_id,
        "args_hash": ch.args_hash,
    }
    reason = "expired" if state == "expired" else body.get("reason")
    if reason is not None:
        data["reason"] = reason
    who = approver(principal)
    makers: list[Maker] = [lambda _: Draft("approval_granted" if granted else "approval_denied", data, who)]
    rule = body.get("remember_rule")
    if granted and rule is not None:
        rule_data = {"rule": rule, "decision": "allow", "challenge_id": row.challenge_id}
        makers.append(lambda _: Draft("permission_rule_added", rule_data, who))
    if parked:
        makers.append(resumed("approval", row.challenge_id))
    return makers


def answer_text(call_input: Mapping[str, Any], answer: str | list[str]) -> str:
    """The answer as recorded: a list joined with newlines, each item in the offered option's
    spelling (options match under the §ask_user rule: `core.ask_user.match`). An answer that is
    not an offered option is invalid_request and the question stays open."""
    picked = [answer] if isinstance(answer, str) else list(answer)
    if options_of(call_input) is None:
        return "\n".join(picked)
    if len(picked) > 1 and call_input.get("multi_select") is not True:
        raise invalid("body.answer must be a single option: the question is not multi_select")
    out = []
    for p in picked:
        spelled = match(call_input, p)
        if spelled is None:
            raise invalid(f"body.answer {p!r} is not one of the offered options; the question stays open")
        out.append(spelled)
    if len(set(out)) != len(out):
        raise invalid("body.answer repeats an option")
    return "\n".join(out)
