"""Runs: `POST /v1/runs` (a new thread, or the next run of a branch), exactly once per
Idempotency-Key, and finding a run for its subscription.

Ordering: the run receipt is a companion of the run's `user_input` (one transaction,
`store.receipts`), so a receipt exists iff its run does. Of requests racing on one key exactly
one commits; every other one answers the winner's receipt. The receipt is looked up first, again
when our receipt companion fails, and again whenever the branch turns out not runnable or busy:
the winner's run is what opened the turn a loser finds open.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import observability
from ..agents import Agent
from ..config.provider_access import unreachable
from ..core.budgets import unenforceable
from ..core.canonical import canonical_hash, new_uuid7
from ..core.errors import LogError
from ..core.fold import Fold, epoch_settings
from ..core.lines import StoredLine
from ..new_thread import start_thread
from ..store.branches import BranchRecord
from ..store.receipts import Receipt
from ..store.records import Companion, CompanionFailed
from ..writer import Draft
from .base import HIDDEN, NOT_RUNNABLE, RETRIES, CompanionsOf, HostBase, user
from .errors import ApiError, invalid, not_found
from .principal import Principal


class Runs(HostBase):
    def start_run(
        self, principal: Principal, body: dict[str, Any], idempotency_key: str | None
    ) -> dict[str, str]:
        if idempotency_key is None or not 1 <= len(idempotency_key) <= 255:
            raise invalid("the Idempotency-Key header is required (1-255 characters)")
        key, body_hash = idempotency_key, canonical_hash(body)
        replay = self._replay(principal, key, body_hash)
        if replay is not None:
            return replay
        agent = self.agents.get(body["agent"])
        if agent is None:
            raise not_found(f"agent {body['agent']} not found")
        if (needs := unreachable(agent.models())) is not None:
            # before anything is written: a run that could only end model_unavailable
            raise invalid(f"agent {agent.name} cannot reach a model here: {needs}")
        user_input = _user_input(body)
        continuing = "thread_id" in body or "branch_id" in body
        for _ in range(RETRIES):
            try:
                if continuing:
                    accepted = self._continue(principal, agent, body, user_input, key, body_hash)
                else:
                    accepted = self._new_thread(principal, agent, user_input, key, body_hash)
            except CompanionFailed:
                # Another request with this key won the receipt: answer as its replay.
                return self._replay_or(principal, key, body_hash, ApiError("branch_busy", "retry"))
            except LogError as exc:
                if exc.code in ("seq_conflict", "stale_epoch"):
                    continue
                if exc.code == "invalid_transition":
                    return self._replay_or(
                        principal, key, body_hash, ApiError("branch_not_runnable", exc.message)
                    )
                raise
            except ApiError as exc:
                if exc.code != "branch_not_runnable":
                    raise
                return self._replay_or(principal, key, body_hash, exc)
            self._wake(accepted["branch_id"], "user_input")
            observability.count(observability.Metric.RUNS_STARTED)  # a new receipt, not a replay
            return accepted
        return self._replay_or(
            principal, key, body_hash, ApiError("branch_busy", "the branch kept moving; retry")
        )

    def _replay(self, principal: Principal, key: str, body_hash: str) -> dict[str, str] | None:
        receipt = self.stores.receipts.get(principal.tenant, key)
        if receipt is None:
            return None
        # The principal first: another principal of the tenant never learns about the body.
        if receipt.principal_key != principal.key:
            raise ApiError(
                "idempotency_key_principal_mismatch", "this Idempotency-Key belongs to another principal"
            )
        if receipt.body_hash != body_hash:
            raise ApiError("idempotency_key_reused", "this Idempotency-Key was used with another body")
        # Wake again (deduplicated by the queue): a replay after a lost enqueue still runs.
        self._wake(receipt.branch_id, "user_input")
        return receipt.accepted()

    def _replay_or(self, principal: Principal, key: str, body_hash: str, failure: ApiError) -> dict[str, str]:
        """The receipt of the request with this key that committed meanwhile, else `failure`."""
        replay = self._replay(principal, key, body_hash)
        if replay is None:
            raise failure
        return replay

    def _receipt(
        self, principal: Principal, key: str, body_hash: str, thread_id: str, branch_id: str
    ) -> CompanionsOf:
        def companions(lines: list[StoredLine]) -> list[Companion]:
            run_id = lines[-1].event_id
            assert run_id is not None
            receipt = Receipt(principal.key, body_hash, thread_id, branch_id, run_id)
            return [self.stores.receipts.companion(principal.tenant, key, receipt, self.clock())]

        return companions

    def _new_thread(
        self, principal: Principal, agent: Agent, user_input: dict[str, Any], key: str, body_hash: str
    ) -> dict[str, str]:
        """Header, thread_started and the user_input, created with the thread and the receipt in
        one transaction (`new_thread.start_thread`)."""
        thread_id, branch_id, now = new_uuid7(), new_uuid7(), self.clock()
        started = agent.thread_started()
        settings = epoch_settings({"type": "thread_started", "data": started})
        _check_budgets(user_input, started["policy"], [settings or {}, *agent.fallback_settings()])
        lines = start_thread(
            self.stores,
            self.writer,
            agent,
            tenant=principal.tenant,
            thread_id=thread_id,
            branch_id=branch_id,
            now_ms=now,
            companions=self._receipt(principal, key, body_hash, thread_id, branch_id),
            started=started,
            drafts=[Draft("user_input", user_input, user(principal))],
        )
        return _accepted(thread_id, branch_id, lines)

    def _continue(
        self,
        principal: Principal,
        agent: Agent,
        body: dict[str, Any],
        user_input: dict[str, Any],
        key: str,
        body_hash: str,
    ) -> dict[str, str]:
        rec = self._target(principal, body)
        if rec.state in NOT_RUNNABLE:
            raise ApiError("branch_not_runnable", f"branch {rec.branch_id} is {rec.state}")
        with self._lock:
            view = self.writer.load(rec.branch_id)
            why = _not_runnable(view.fold, agent)
            if why:
                raise ApiError("branch_not_runnable", why)
            f = view.fold
            _check_budgets(user_input, f.policy, [f.settings or {}, *agent.fallback_settings()])
            lines = self._commit(
                view,
                [lambda _: Draft("user_input", user_input, user(principal))],
                self._receipt(principal, key, body_hash, rec.thread_id, rec.branch_id),
            )
        return _accepted(rec.thread_id, rec.branch_id, lines)

    def _target(self, principal: Principal, body: dict[str, Any]) -> BranchRecord:
        """The branch a continuing run lands on: `branch_id` of `thread_id` (default: its main
        branch), or with `branch_id` alone that branch of the caller's tenant, in its thread."""
        if "thread_id" in body:
            return self._branch(principal, body["thread_id"], body.get("branch_id"))
        rec = self.index.branch_of(principal.tenant, None, body["branch_id"])
        if rec is None or rec.state in HIDDEN:
            raise not_found(f"branch {body['branch_id']} not found")
        return rec

    # ------------------------------------------------------------------ subscriptions
    def run_start(self, principal: Principal, thread_id: str, run_id: str) -> tuple[BranchRecord, int]:
        """The branch and seq of run `run_id`'s user_input on this tenant's thread."""
        self._thread(principal, thread_id)
        for rec in self.index.list_branches(principal.tenant, thread_id):
            if rec.state in HIDDEN:
                continue
            with self._lock:
                fold = self._load(rec).fold
                seq = fold.seq_of.get(run_id)
                ev = fold.events[seq - 1] if seq is not None else None
            if ev is not None and ev["type"] == "user_input" and ev["branch_id"] == rec.branch_id:
                assert seq is not None
                return rec, seq
        raise not_found(f"run {run_id} not found")


def _user_input(body: dict[str, Any]) -> dict[str, Any]:
    user_input: dict[str, Any] = {"source": "api"}
    if isinstance(body["input"], str):
        user_input["text"] = body["input"]
    else:
        user_input["content"] = body["input"]
    if "budget" in body:
        user_input["budget"] = body["budget"]
    return user_input


def _check_budgets(
    user_input: dict[str, Any], policy: dict[str, Any], settings: Sequence[dict[str, Any]]
) -> None:
    """Refuse a run budget some model the thread may run under cannot bound per attempt
    (semantics §Budgets: budget_unenforceable at setup, before anything is written). startRun's
    typed errors don't list budget_unenforceable, so it is their nearest, invalid_request, with
    the semantics' code leading the message."""
    budget = user_input.get("budget")
    if not budget:
        return
    bad = unenforceable(budget, policy, settings)
    if bad:
        raise invalid(
            f"budget_unenforceable: {', '.join(bad)} has no per-attempt bound under this agent's "
            "models (policy.models lacks the window, output cap or price) and "
            "policy.on_unknown_usage is not stop"
        )


def _accepted(thread_id: str, branch_id: str, lines: list[StoredLine]) -> dict[str, str]:
    run_id = lines[-1].event_id
    assert run_id is not None
    return {"thread_id": thread_id, "branch_id": branch_id, "run_id": run_id}


def _not_runnable(fold: Fold, agent: Agent) -> str | None:
    """Why a new run can't start on this branch (branch_not_runnable), or None."""
    status = fold.status()
    if status == "inspection_only":
        return "the branch is an inspection-only repair branch"
    if status == "cancelled":
        return "the thread was cancelled"
    if fold.turn_open:
        return "a turn is open on this branch"
    if fold.parked:
        return "the branch is parked on something else"
    if fold.handed_off:
        return "the thread was handed off"
    started = fold.started
    if started is not None and (
        started.get("agent_name") != agent.name or started.get("config_hash") != agent.config_hash
    ):
        return f"the thread is pinned to agent {started.get('agent_name')} ({started.get('config_hash')})"
    return None
