"""`Host`: the library every route calls (semantics.md §4-5), pure of HTTP.

Each method takes the authenticated Principal and answers a contract value or raises
`ApiError`/`LogError` with one of its route's codes. Rules that hold on every route:

- tenancy: another tenant's thread (or a branch of another thread) is `not_found`;
- controls append with `Writer` under `View.writer_epoch()` (no lease of their own), so they land
  while a worker holds the lease mid-step; a lost head race re-loads and re-decides;
- a decision, answer, resolution, cancel or new run wakes the branch (one run step enqueued).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..agents import Agent
from ..core.canonical import canonical_hash, new_uuid7
from ..core.errors import LogError
from ..core.importer import Importer
from ..core.lines import StoredLine, header_line
from ..store.approvals import ApprovalRow
from ..store.branches import BranchRecord, NewBranch
from ..store.index import ThreadRecord
from ..store.protocol import StepQueue, Stores
from ..store.receipts import Receipt
from ..store.records import Companion, CompanionFailed, wall_ms
from ..writer import Draft, View, Writer
from .errors import ApiError, invalid, not_found
from .principal import Principal

log = logging.getLogger("threads_aws.host")

RETRIES = 5  # re-decide this often after a lost head race before answering branch_busy
NOT_WRITABLE = ("read_only", "corrupt", "fork_failed")
NOT_RUNNABLE = ("inspection_only", *NOT_WRITABLE)
HIDDEN = ("forking", "fork_failed")

Maker = Callable[[list[StoredLine]], Draft]  # writer.DraftLike: a draft from the lines built before it


def _user(principal: Principal) -> dict[str, Any]:
    return {"kind": "user", "principal": principal.as_dict()}


def _approver(principal: Principal) -> dict[str, Any]:
    return {"kind": "approver", "principal": principal.as_dict()}


HOST = {"kind": "host"}


class Host:
    def __init__(
        self,
        stores: Stores,
        writer: Writer,
        steps: StepQueue | None,
        agents: Mapping[str, Agent],
        clock: Callable[[], int] = wall_ms,
        *,
        sandbox: Any = None,
    ) -> None:
        self.stores = stores
        self.writer = writer
        self.store = writer.store
        self.index = stores.threads
        self.steps = steps
        self.agents = agents
        self.clock = clock
        self.sandbox = sandbox  # a sandbox.fork.SandboxProvider; none in this deployment
        # Views are cached and advanced in place by the Writer: one load-decide-commit at a time
        # per process (a Lambda container runs one request anyway; the local gateway threads).
        self._lock = threading.RLock()

    # ================================================================ lookups
    def _thread(self, principal: Principal, thread_id: str) -> ThreadRecord:
        thread = self.index.get_thread(principal.tenant, thread_id)
        if thread is None:
            raise not_found(f"thread {thread_id} not found")
        return thread

    def _branch(self, principal: Principal, thread_id: str, branch_id: str | None) -> BranchRecord:
        thread = self._thread(principal, thread_id)
        bid = branch_id or thread.main_branch_id
        rec = self.index.branch_of(principal.tenant, thread_id, bid)
        if rec is None or rec.state in HIDDEN:
            raise not_found(f"branch {bid} not found in thread {thread_id}")
        return rec

    def _load(self, rec: BranchRecord) -> View:
        """The cached view. A reader that walks it must hold `self._lock` while it does: a
        control builds into the cached view before it commits (and drops it if it loses)."""
        with self._lock:
            return self.writer.load(rec.branch_id, record=rec)

    def _wake(self, branch_id: str, reason: str) -> None:
        if self.steps is None:
            return
        try:
            self.steps.enqueue(branch_id, reason=reason)
        except Exception:  # noqa: BLE001 - the append is durable; a later wake or replay recovers
            log.exception("could not enqueue a run step for branch %s", branch_id)

    # ================================================================ commits
    def _commit(
        self,
        view: View,
        makers: Sequence[Maker],
        companions: Callable[[list[StoredLine]], Sequence[Companion]] | None = None,
    ) -> list[StoredLine]:
        """Commit `makers` (each sees the lines built before it) with `companions` in one
        fenced transaction under the view's writer epoch."""
        _, lines = self.writer.append(
            view.branch_id,
            makers,
            view=view,
            now=self.clock(),
            companions=(lambda _view, built: companions(built)) if companions is not None else None,
        )
        return lines

    def _control(self, rec: BranchRecord, decide: Callable[[View], list[StoredLine]]) -> list[StoredLine]:
        """Load, decide and commit; on a lost race (seq_conflict/stale_epoch) re-load and decide
        again. `decide` raises the route's typed failure, or commits via `_commit`."""
        if rec.state in NOT_WRITABLE:
            raise ApiError("forbidden", f"branch {rec.branch_id} is {rec.state}: this host cannot write it")
        for _ in range(RETRIES):
            with self._lock:
                view = self.writer.load(rec.branch_id)
                try:
                    return decide(view)
                except LogError as exc:
                    if exc.code not in ("seq_conflict", "stale_epoch"):
                        raise
        raise ApiError("branch_busy", "the branch kept moving; retry")

    @staticmethod
    def _appended(lines: list[StoredLine]) -> dict[str, str]:
        assert lines[0].event_id is not None
        return {"event_id": lines[0].event_id}

    # ================================================================ runs
    def start_run(
        self, principal: Principal, body: dict[str, Any], idempotency_key: str | None
    ) -> dict[str, str]:
        if idempotency_key is None or not 1 <= len(idempotency_key) <= 255:
            raise invalid("the Idempotency-Key header is required (1-255 characters)")
        if "branch_id" in body and "thread_id" not in body:
            raise invalid("body.branch_id needs body.thread_id")
        body_hash = canonical_hash(body)
        replay = self._replay(principal, idempotency_key, body_hash)
        if replay is not None:
            return replay
        agent = self.agents.get(body["agent"])
        if agent is None:
            raise not_found(f"agent {body['agent']} not found")
        user_input: dict[str, Any] = {"source": "api"}
        if isinstance(body["input"], str):
            user_input["text"] = body["input"]
        else:
            user_input["content"] = body["input"]
        if "budget" in body:
            user_input["budget"] = body["budget"]
        for _ in range(RETRIES):
            try:
                if "thread_id" in body:
                    accepted = self._continue(principal, agent, body, user_input, idempotency_key, body_hash)
                else:
                    accepted = self._new_thread(principal, agent, user_input, idempotency_key, body_hash)
            except CompanionFailed:
                # Another request with this key won the receipt: answer as its replay.
                replay = self._replay(principal, idempotency_key, body_hash)
                if replay is None:  # pragma: no cover - the receipt is never deleted
                    raise ApiError("branch_busy", "retry") from None
                return replay
            except LogError as exc:
                if exc.code in ("seq_conflict", "stale_epoch"):
                    continue
                if exc.code == "invalid_transition":
                    raise ApiError("branch_not_runnable", exc.message) from None
                raise
            self._wake(accepted["branch_id"], "user_input")
            return accepted
        raise ApiError("branch_busy", "the branch kept moving; retry")

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

    def _receipt_items(
        self, principal: Principal, key: str, body_hash: str, thread_id: str, branch_id: str
    ) -> Callable[[list[StoredLine]], list[Companion]]:
        def items(lines: list[StoredLine]) -> list[Companion]:
            run_id = lines[-1].event_id
            assert run_id is not None
            receipt = Receipt(principal.key, body_hash, thread_id, branch_id, run_id)
            return [self.stores.receipts.companion(principal.tenant, key, receipt, self.clock())]

        return items

    def _new_thread(
        self, principal: Principal, agent: Agent, user_input: dict[str, Any], key: str, body_hash: str
    ) -> dict[str, str]:
        thread_id, branch_id, now = new_uuid7(), new_uuid7(), self.clock()
        header = StoredLine.of_header(header_line(thread_id, branch_id, now))
        importer = Importer(now=now)
        importer.feed(header.raw)
        rec = BranchRecord(
            branch_id=branch_id,
            thread_id=thread_id,
            tenant=principal.tenant,
            parent_branch_id=None,
            fork_at_seq=None,
            state="ready",
            head_seq=0,
            head_hash=header.hash,
            head_epoch=0,
            head_verified=True,
            writer_impl="threads-aws",
            header_hash=header.hash,
            created_at=now,
        )
        view = View(rec, importer)
        drafts = [
            Draft("thread_started", agent.thread_started(), HOST),
            Draft("user_input", user_input, _user(principal)),
        ]
        lines = self.writer.build(view, drafts, epoch=1, now=now)
        extra = self._receipt_items(principal, key, body_hash, thread_id, branch_id)(lines)
        self.store.create_branch(
            NewBranch(
                thread_id=thread_id,
                tenant=principal.tenant,
                branch_id=branch_id,
                header=header,
                create_thread=True,
                lines=lines,
                companions=extra,
            )
        )
        run_id = lines[-1].event_id
        assert run_id is not None
        return {"thread_id": thread_id, "branch_id": branch_id, "run_id": run_id}

    def _continue(
        self,
        principal: Principal,
        agent: Agent,
        body: dict[str, Any],
        user_input: dict[str, Any],
        key: str,
        body_hash: str,
    ) -> dict[str, str]:
        rec = self._branch(principal, body["thread_id"], body.get("branch_id"))
        if rec.state in NOT_RUNNABLE:
            raise ApiError("branch_not_runnable", f"branch {rec.branch_id} is {rec.state}")
        with self._lock:
            view = self.writer.load(rec.branch_id)
            fold = view.fold
            why = _not_runnable(fold, agent)
            if why:
                raise ApiError("branch_not_runnable", why)
            lines = self._commit(
                view,
                [lambda _: Draft("user_input", user_input, _user(principal))],
                self._receipt_items(principal, key, body_hash, rec.thread_id, rec.branch_id),
            )
        run_id = lines[-1].event_id
        assert run_id is not None
        return {"thread_id": rec.thread_id, "branch_id": rec.branch_id, "run_id": run_id}

    # ================================================================ reads
    def timeline(self, principal: Principal, thread_id: str, branch_id: str | None) -> dict[str, Any]:
        rec = self._branch(principal, thread_id, branch_id)
        with self._lock:
            view = self._load(rec)
            points = {p["seq"] for p in _fork_points(view, self.clock())}
            entries = [
                {"event": ev, "fork_point": ev["seq"] in points}
                for ev, known in zip(view.fold.events, view.fold.known, strict=True)
                if known
            ]
        return {"thread_id": thread_id, "branch_id": rec.branch_id, "entries": entries}

    def branches(self, principal: Principal, thread_id: str) -> list[dict[str, Any]]:
        self._thread(principal, thread_id)
        out = []
        for rec in self.index.list_branches(principal.tenant, thread_id):
            if rec.state in HIDDEN:
                continue
            info: dict[str, Any] = {
                "branch_id": rec.branch_id,
                "mode": "live",  # stub forks are not offered by this host
                "runnable": rec.state not in NOT_RUNNABLE,
            }
            if rec.parent_branch_id is not None:
                info["parent_branch_id"] = rec.parent_branch_id
            if rec.fork_at_seq is not None:
                info["fork_at_seq"] = rec.fork_at_seq
            out.append(info)
        return out

    def fork_points(
        self, principal: Principal, thread_id: str, branch_id: str | None
    ) -> list[dict[str, Any]]:
        rec = self._branch(principal, thread_id, branch_id)
        with self._lock:
            points = _fork_points(self._load(rec), self.clock())
        return [
            {"branch_id": rec.branch_id, "seq": p["seq"], "event_id": p["event_id"], "snapshot": p["data"]}
            for p in points
        ]

    def fork(
        self, principal: Principal, thread_id: str, branch_id: str | None, body: dict[str, Any]
    ) -> dict[str, str]:
        rec = self._branch(principal, thread_id, branch_id)
        now = self.clock()
        with self._lock:
            view = self._load(rec)
            ev = next((e for e in view.fold.events if e["event_id"] == body["event_id"]), None)
            snap = view.fold.snapshots.get(ev["seq"]) if ev is not None else None
        if ev is None:
            raise LogError("no_snapshot_boundary", None, "no such event on this branch")
        if ev["type"] != "snapshot" or snap is None or not snap[0]:
            raise LogError("no_snapshot_boundary", ev["seq"], "not a quiescent snapshot")
        if snap[1] is not None and snap[1] <= now:
            raise LogError("snapshot_expired", ev["seq"], "the snapshot has expired")
        if self.sandbox is None:
            raise ApiError("sandbox_required", "this host has no sandbox provider to restore the snapshot")
        if body.get("mode") == "stub":
            raise invalid("stub forks are not supported by this host")
        from ..sandbox.fork import fork

        result = fork(
            self.store,
            self.stores.resources,
            self.sandbox,
            tenant=principal.tenant,
            branch_id=rec.branch_id,
            event_id=body["event_id"],
            knowledge_policy=body.get("knowledge", "pinned"),
            now=now,
        )
        return {"thread_id": result.thread_id, "branch_id": result.branch_id}

    def pending_approvals(
        self, principal: Principal, thread_id: str, branch_id: str | None
    ) -> list[dict[str, Any]]:
        rec = self._branch(principal, thread_id, branch_id)
        with self._lock:
            fold = self._load(rec).fold
            requested = {
                ev["data"]["challenge_id"]: ev["data"]
                for ev in fold.events
                if ev["type"] == "approval_requested"
            }
            open_ = [
                (cid, ch, fold.calls.get(ch.call_id))
                for cid, ch in fold.challenges.items()
                if not ch.consumed and ("approval", cid) in fold.parked
            ]
        out = []
        for cid, ch, call in open_:
            row = self.stores.approvals.get(cid)
            out.append(
                {
                    "challenge_id": cid,
                    "call_id": ch.call_id,
                    "tool": row.tool if row and row.tool else (call.name if call else "unknown"),
                    "input": row.input if row else (call.input if call else {}),
                    "args_hash": ch.args_hash,
                    "expires_at": requested.get(cid, {}).get("expires_at", row.expires_at if row else 0),
                    "suggested_rules": row.suggested_rules if row else [],
                }
            )
        return out

    # ================================================================ controls
    def _require_authority(self, principal: Principal, view: View) -> None:
        if not self._has_authority(principal, view):
            raise ApiError("forbidden", "no approval authority under the root run's approver set")

    def _has_authority(self, principal: Principal, view: View) -> bool:
        """The ROOT run's approver set: the root agent's configured approvers, else the root
        thread's latest user_input principal (compared by issuer, tenant, subject)."""
        events = view.fold.events
        for _ in range(16):  # follow thread_started.parent up to the root
            started = next((e for e in events if e["type"] == "thread_started"), None)
            parent = (started or {}).get("data", {}).get("parent") or {}
            parent_tid = parent.get("thread_id") if isinstance(parent, dict) else None
            if not parent_tid:
                break
            thread = self.index.get_thread(principal.tenant, parent_tid)
            if thread is None:
                return False
            with self._lock:
                events = self.writer.load(thread.main_branch_id).fold.events
        started = next((e for e in events if e["type"] == "thread_started"), None)
        if started is not None:
            agent = self.agents.get(started["data"].get("agent_name", ""))
            if (
                agent is not None
                and agent.config_hash == started["data"].get("config_hash")
                and agent.approvers
            ):
                return any(principal.same(a) for a in agent.approvers)
        origin = next((e for e in reversed(events) if e["type"] == "user_input"), None)
        return origin is not None and principal.same(origin["actor"].get("principal"))

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
        expired: list[bool] = []

        def decide(view: View) -> list[StoredLine]:
            self._require_authority(principal, view)
            ch = view.fold.challenges.get(challenge_id)
            if ch is None:
                raise not_found(f"challenge {challenge_id} not found on this branch")
            if ch.consumed or row.state in ("granted", "denied"):
                raise ApiError("approval_duplicate", "this challenge was already answered")
            if row.state == "expired":
                raise ApiError("approval_expired", "this challenge expired")
            if ch.call_id != row.call_id or ch.args_hash != row.args_hash:
                raise ApiError("approval_mismatch", "the challenge's binding does not match its call")
            now = self.clock()
            late = now >= row.expires_at
            expired[:] = [late]
            ok = grant and not late
            data: dict[str, Any] = {
                "challenge_id": challenge_id,
                "call_id": ch.call_id,
                "args_hash": ch.args_hash,
            }
            reason = "expired" if late else body.get("reason")
            if reason is not None:
                data["reason"] = reason
            makers: list[Maker] = [
                lambda _: Draft("approval_granted" if ok else "approval_denied", data, _approver(principal))
            ]
            if ok and rule is not None:
                rule_data = {"rule": rule, "decision": "allow", "challenge_id": challenge_id}
                makers.append(lambda _: Draft("permission_rule_added", rule_data, _approver(principal)))
            if ("approval", challenge_id) in view.fold.parked:
                makers.append(
                    lambda built: Draft(
                        "resumed",
                        {
                            "address": {"kind": "approval", "id": challenge_id},
                            "cause_event_id": built[0].event_id,
                        },
                        HOST,
                    )
                )
            state = "expired" if late else ("granted" if ok else "denied")
            try:
                return self._commit(
                    view,
                    makers,
                    lambda _: [self.stores.approvals.consume(challenge_id, state, principal.key, now)],
                )
            except CompanionFailed as exc:
                old = ApprovalRow.from_item(exc.item) if exc.item else self.stores.approvals.get(challenge_id)
                if old is not None and old.state == "expired":
                    raise ApiError("approval_expired", "this challenge expired") from None
                raise ApiError("approval_duplicate", "this challenge was already answered") from None

        lines = self._control(rec, decide)
        self._wake(rec.branch_id, "approval")
        if expired and expired[0]:
            raise ApiError("approval_expired", "this challenge expired; recorded as a denial")
        return self._appended(lines)

    def answer_question(
        self,
        principal: Principal,
        thread_id: str,
        call_id: str,
        branch_id: str | None,
        body: dict[str, Any],
    ) -> dict[str, str]:
        rec = self._branch(principal, thread_id, branch_id)

        def decide(view: View) -> list[StoredLine]:
            fold = view.fold
            if ("input", call_id) not in fold.parked or call_id not in fold.pending:
                raise ApiError("no_open_question", f"no open question {call_id}")
            opener = next((e for e in reversed(fold.events) if e["type"] == "user_input"), None)
            if opener is None or not principal.same(opener["actor"].get("principal")):
                raise ApiError("forbidden", "only the principal who opened the turn may answer")
            text = _answer_text(fold.calls[call_id].input, body["answer"])
            question = self.stores.questions.get(rec.branch_id, call_id)
            result = {
                "call_id": call_id,
                "completeness": "complete",
                "is_error": False,
                "origin": "answered",
                "preview": text,
            }
            return self._commit(
                view,
                [
                    lambda _: Draft("tool_result", result, _user(principal)),
                    lambda built: Draft(
                        "resumed",
                        {"address": {"kind": "input", "id": call_id}, "cause_event_id": built[0].event_id},
                        HOST,
                    ),
                ],
                # The questions row moves to answered in the transaction of the settling result.
                (lambda _: [self.stores.questions.answered(rec.branch_id, call_id, self.clock())])
                if question is not None
                else None,
            )

        try:
            lines = self._control(rec, decide)
        except CompanionFailed:
            raise ApiError("no_open_question", f"question {call_id} was answered meanwhile") from None
        self._wake(rec.branch_id, "answer")
        return self._appended(lines)

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
            return self._commit(
                view,
                [
                    lambda _: Draft("effect_resolved", data, _approver(principal)),
                    lambda built: Draft(
                        "resumed",
                        {
                            "address": {"kind": "effect", "id": effect_key},
                            "cause_event_id": built[0].event_id,
                        },
                        HOST,
                    ),
                ],
            )

        lines = self._control(rec, decide)
        self._wake(rec.branch_id, "resolution")
        return self._appended(lines)

    def cancel(self, principal: Principal, thread_id: str, branch_id: str | None) -> dict[str, str]:
        rec = self._branch(principal, thread_id, branch_id)
        lines = self._control(
            rec,
            lambda view: self._commit(
                view, [lambda _: Draft("cancel_requested", {"scope": "thread"}, _user(principal))]
            ),
        )
        self._wake(rec.branch_id, "cancel")
        return self._appended(lines)

    def set_model(
        self, principal: Principal, thread_id: str, branch_id: str | None, body: dict[str, Any]
    ) -> dict[str, str]:
        rec = self._branch(principal, thread_id, branch_id)

        def decide(view: View) -> list[StoredLine]:
            agent = _pinned_agent(view, self.agents)
            if agent is None:
                raise invalid("the thread's agent is not deployed on this host")
            want = body["model"]
            if not any(
                m.get("provider") == want["provider"] and m.get("name") == want["name"]
                for m in agent.models()
            ):
                raise invalid("body.model is not in the agent's model or fallback list")
            if view.fold.awaiting:
                raise LogError("invalid_transition", None, "a model attempt awaits its response (rule 18)")
            settings = {
                "adapter": agent.adapter,
                "model": {"provider": want["provider"], "name": want["name"]},
                "model_params": body.get("model_params", agent.model_params),
                "reasoning_carryover": body.get("reasoning_carryover", "keep"),
            }
            data = {"reason": "user", "settings": settings}
            return self._commit(view, [lambda _: Draft("settings_changed", data, _user(principal))])

        return self._appended(self._control(rec, decide))

    def set_mode(
        self, principal: Principal, thread_id: str, branch_id: str | None, body: dict[str, Any]
    ) -> dict[str, str]:
        rec = self._branch(principal, thread_id, branch_id)

        def decide(view: View) -> list[StoredLine]:
            data = {"from": view.fold.mode, "to": body["mode"]}
            return self._commit(view, [lambda _: Draft("mode_changed", data, _user(principal))])

        return self._appended(self._control(rec, decide))

    # ================================================================ subscribe
    def run_start(self, principal: Principal, thread_id: str, run_id: str) -> tuple[BranchRecord, int]:
        """The branch and seq of run `run_id`'s user_input on this tenant's thread."""
        self._thread(principal, thread_id)
        for rec in self.index.list_branches(principal.tenant, thread_id):
            if rec.state in HIDDEN:
                continue
            with self._lock:
                view = self._load(rec)
                seq = next(
                    (
                        ev["seq"]
                        for ev in reversed(view.fold.events)
                        if ev["event_id"] == run_id
                        and ev["type"] == "user_input"
                        and ev["branch_id"] == rec.branch_id
                    ),
                    None,
                )
            if seq is not None:
                return rec, seq
        raise not_found(f"run {run_id} not found")


# ==================================================================== helpers
def _started(view: View) -> dict[str, Any] | None:
    return next((e for e in view.fold.events if e["type"] == "thread_started"), None)


def _pinned_agent(view: View, agents: Mapping[str, Agent]) -> Agent | None:
    started = _started(view)
    if started is None:
        return None
    agent = agents.get(started["data"].get("agent_name", ""))
    return agent


def _not_runnable(fold: Any, agent: Agent) -> str | None:
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
    started = next((e for e in fold.events if e["type"] == "thread_started"), None)
    if started is not None:
        d = started["data"]
        if d.get("agent_name") != agent.name or d.get("config_hash") != agent.config_hash:
            return f"the thread is pinned to agent {d.get('agent_name')} ({d.get('config_hash')})"
    return None


def _fork_points(view: View, now: int) -> list[dict[str, Any]]:
    out = []
    fold = view.fold
    by_seq = {ev["seq"]: ev for ev in fold.events if ev["type"] == "snapshot"}
    for seq, (quiet, expires, event_id) in sorted(fold.snapshots.items()):
        if quiet and (expires is None or expires > now) and seq in by_seq:
            out.append({"seq": seq, "event_id": event_id, "data": by_seq[seq]["data"]})
    return out


def _norm(s: str) -> str:
    return s.strip().casefold()


def _answer_text(call_input: Mapping[str, Any], answer: str | list[str]) -> str:
    """The answer as recorded: a list joined with newlines, each item in the offered option's
    spelling (options match ignoring case and surrounding spaces). An answer that is not an
    offered option is invalid_request and the question stays open."""
    picked = [answer] if isinstance(answer, str) else list(answer)
    options = call_input.get("options")
    if not isinstance(options, list) or not options:
        return "\n".join(picked)
    spelled = {_norm(o): o for o in options if isinstance(o, str)}
    if len(picked) > 1 and call_input.get("multi_select") is not True:
        raise invalid("body.answer must be a single option: the question is not multi_select")
    out = []
    for p in picked:
        if _norm(p) not in spelled:
            raise invalid(f"body.answer {p!r} is not one of the offered options; the question stays open")
        out.append(spelled[_norm(p)])
    if len(set(out)) != len(out):
        raise invalid("body.answer repeats an option")
    return "\n".join(out)
