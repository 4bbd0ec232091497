"""The run-step worker's core: `advance` drives one branch as far as it can go.

Every decision is derived from the log alone (`Writer.load(branch).fold` plus a short backward
scan of the open turn), so crash recovery is the normal path: a step that finds an open model
request, a begun effect or an approved call it never dispatched continues from there. One loop
iteration = one decision = one atomic append (a few events and their side rows in one
transaction), then re-load and decide again, until the branch is parked or idle.

Ordering guarantees:
- request bytes are put to S3 before `model_request` is appended, and `model_request` is durable
  before the model is called (C2);
- `effect_begin` is durable and fenced before dispatch, and the lease is renewed right before the
  tool body runs; a timeout/transport error after dispatch becomes `effect_unknown` + `parked`;
- a `cancel_requested` barrier stops all dispatch: calls that never began close `not_executed`,
  in-doubt effects settle or park first (rule 11), then `cancelled` + `turn_completed{cancelled}`.

Races: controls from the API (approvals, answers, cancel, settings, mode) append under
`View.writer_epoch()`, this worker under its lease epoch. A lost head race (`seq_conflict`)
before a dispatch re-loads and re-decides; after a dispatch (a model answer, an effect's
result) the same facts are re-appended on the new head ("sticky"), because they happened. A
`stale_epoch` means another worker took the lease: stop at once and dispatch nothing more.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core import render
from ..core.canonical import canonical_bytes, canonical_hash, new_uuid7
from ..core.errors import LogError
from ..core.fold import Call, Fold
from ..core.lines import StoredLine
from ..store.approvals import ApprovalRow
from ..store.protocol import Artifacts, EventLog, StepQueue, Stores
from ..store.questions import QuestionRow
from ..store.records import Companion, Lease, wall_ms
from ..writer import Companions, Draft, View, Writer
from .models import ModelAdapter, ModelError, adapter_for
from .permissions import Decision, PermissionEngine, category_of, suggested_rules
from .tools import BUILTIN_EXECUTORS, Executor, ToolContext, ToolOutput, ToolUncertain

LEASE_TTL_MS = 60_000
DEADLINE_MARGIN_MS = 10_000  # stop and re-enqueue this long before the Lambda deadline
APPROVAL_TTL_MS = 24 * 3_600_000
QUESTION_TTL_MS = 24 * 3_600_000
MAX_ATTEMPTS = 3  # model attempts per request (crash re-sends and provider failures)
MAX_PAUSE_CONTINUATIONS = 3
MAX_DECISIONS = 500  # per advance call; then `more`
STICKY_RETRIES = 8

HOST = {"kind": "host"}
MODEL = {"kind": "model"}
TOOL = {"kind": "tool"}
RECOVERY = {"kind": "recovery"}

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
DEDUP_RESOLUTIONS = frozenset({"safe_to_retry", "not_sent", "assume_not_done"})
INTERRUPTED_PREVIEW = "Interrupted by a cancel: the call began and may or may not have taken effect."
ASSUMED_DONE_PREVIEW = "The effect was confirmed done; its output is not available."

ModelResolver = Callable[[dict[str, Any], dict[str, Any]], ModelAdapter]


@dataclass(frozen=True)
class StepOutcome:
    state: str  # idle | parked | more | busy
    appended: int


class _BranchCache:
    """Per-branch incremental state fed from the committed events: the Render v1 renderer, the
    current settings epoch and the thread's permission rules (so a step never re-walks the
    whole log)."""

    def __init__(self) -> None:
        self.fed = 0
        self.renderer = render.Renderer()
        self.settings: dict[str, Any] = {}
        self.thread_rules: list[tuple[str, str]] = []

    def feed(self, events: Sequence[dict[str, Any]]) -> None:
        for ev in events[self.fed :]:
            t = ev["type"]
            if t == "thread_started":
                d = ev["data"]
                self.settings = {
                    "model": d["model"],
                    "model_params": d["model_params"],
                    "adapter": d["adapter"],
                }
                self.thread_rules = []
            elif t == "settings_changed":
                self.settings = dict(ev["data"]["settings"])
            elif t == "permission_rule_added":
                self.thread_rules.append((ev["data"]["rule"], ev["data"]["decision"]))
            self.renderer.feed(ev)
        self.fed = len(events)


@dataclass
class EngineContext:
    """What a step runs on (built by `services.Services.engine`): the writer, the stores, the
    run-step queue (to re-enqueue a step that runs out of time), the deployed agents."""

    writer: Writer
    stores: Stores
    steps: StepQueue | None = None
    agents: dict[str, Any] | None = None
    models: ModelResolver = adapter_for
    clock: Callable[[], int] = wall_ms
    tools: dict[str, Executor] = field(default_factory=lambda: dict(BUILTIN_EXECUTORS))
    lease_ttl_ms: int = LEASE_TTL_MS
    margin_ms: int = DEADLINE_MARGIN_MS
    _caches: OrderedDict[str, _BranchCache] = field(default_factory=OrderedDict)

    @property
    def store(self) -> EventLog:
        return self.writer.store

    @property
    def artifacts(self) -> Artifacts:
        return self.stores.artifacts

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, session: Any = None) -> EngineContext:
        """This container's engine (`services.Services.from_env().engine()`)."""
        from ..services import Services

        return Services.from_env(environ, session=session).engine()

    def cache(self, view: View) -> _BranchCache:
        c = self._caches.pop(view.branch_id, None)
        events = view.fold.events
        if c is None or c.fed > len(events):
            c = _BranchCache()
        c.feed(events)
        self._caches[view.branch_id] = c
        while len(self._caches) > 64:
            self._caches.popitem(last=False)
        return c


class _Stop(Exception):
    def __init__(self, state: str) -> None:
        self.state = state


def advance(ctx: EngineContext, branch_id: str, *, holder_id: str, deadline_ms: int) -> StepOutcome:
    """Take the lease and drive the branch until it parks, goes idle, or the deadline nears."""
    try:
        lease = ctx.store.acquire_lease(branch_id, holder_id, ttl_ms=ctx.lease_ttl_ms, now_ms=ctx.clock())
    except LogError as exc:
        if exc.code == "branch_busy":
            return StepOutcome("busy", 0)
        raise
    step = _Step(ctx, branch_id, lease)
    try:
        return StepOutcome(step.run(deadline_ms), step.appended)
    finally:
        try:
            ctx.store.release(branch_id, step.lease)
        except Exception:  # noqa: BLE001 - the lease lapses by itself; never mask the outcome
            pass


@dataclass
class _Turn:
    """The open turn, from a backward scan to its opening user_input."""

    opener: dict[str, Any] | None = None
    last_model: dict[str, Any] | None = None  # latest model_request/response/abandoned
    pauses: int = 0
    steered: bool = False  # a steer follows the turn's latest model_request (it hasn't seen it)
    stop_when_idle: bool = False  # finish what is in flight, request nothing new


def _scan_turn(f: Fold) -> _Turn:
    t = _Turn()
    requested = False
    for ev in reversed(f.events):
        typ = ev["type"]
        if typ == "model_request":
            requested = True
        elif typ == "steer" and not requested:
            t.steered = True
        elif typ == "stop_when_idle":
            t.stop_when_idle = True
        if typ in ("model_response", "model_response_recovered", "model_attempt_abandoned", "model_request"):
            if t.last_model is None:
                t.last_model = ev
            if typ == "model_response" and ev["data"]["stop_reason"] == "pause_turn":
                t.pauses += 1
        elif typ == "user_input":
            t.opener = ev
            break
    return t


def _find_last(
    f: Fold, typ: str, pred: Callable[[dict[str, Any]], bool], since_seq: int = 0
) -> dict[str, Any] | None:
    for ev in reversed(f.events):
        if ev["seq"] <= since_seq:
            return None
        if ev["type"] == typ and pred(ev["data"]):
            return ev
    return None


class _Step:
    def __init__(self, ctx: EngineContext, branch_id: str, lease: Lease) -> None:
        self.ctx = ctx
        self.branch_id = branch_id
        self.lease = lease
        self.appended = 0

    # ------------------------------------------------------------------ plumbing
    def run(self, deadline_ms: int) -> str:
        for _ in range(MAX_DECISIONS):
            if self.ctx.clock() + self.ctx.margin_ms >= deadline_ms:
                return "more"
            try:
                self.maybe_renew()
                state = self.decide(self.ctx.writer.load(self.branch_id))
            except _Stop as stop:
                return stop.state
            except LogError as exc:
                if exc.code == "seq_conflict":
                    continue  # a control landed: re-load and re-decide
                if exc.code == "stale_epoch":
                    return "busy"  # another worker holds the branch now
                raise
            if state is not None:
                return state
        return "more"

    def maybe_renew(self, force: bool = False) -> None:
        now = self.ctx.clock()
        if force or self.lease.expires_at - now < self.ctx.lease_ttl_ms // 2:
            self.lease = self.ctx.store.renew(
                self.branch_id, self.lease, now_ms=now, ttl_ms=self.ctx.lease_ttl_ms
            )

    def append(
        self,
        view: View,
        drafts: Sequence[Draft],
        companions: Companions | None = None,
    ) -> list[StoredLine]:
        _, lines = self.ctx.writer.append(
            self.branch_id, drafts, epoch=self.lease.epoch, view=view, companions=companions
        )
        self.appended += len(lines)
        return lines

    def append_sticky(self, build: Callable[[View], Sequence[Draft]]) -> list[StoredLine]:
        """Record facts that already happened (a model answer, an effect's result): a lost head
        race re-appends them on the new head; a lost lease stops (recovery takes over)."""
        for _ in range(STICKY_RETRIES):
            view = self.ctx.writer.load(self.branch_id)
            try:
                return self.append(view, build(view))
            except LogError as exc:
                if exc.code == "seq_conflict":
                    continue
                if exc.code == "stale_epoch":
                    raise _Stop("busy") from exc
                raise
        raise _Stop("more")

    # ------------------------------------------------------------------ decisions
    def decide(self, view: View) -> str | None:
        f = view.fold
        if view.record.state != "ready" or f.status() == "inspection_only":
            return "idle"
        if self.resume_satisfied(view):
            return None
        # Only walk the effects when one is open (the fold counts them): a thread's settled
        # effects are never looked at again.
        for entry in f.effects.values() if f.open_effects else ():
            if entry["status"] == "begun":  # its holder crashed between begin and commit
                self.append(
                    view,
                    [
                        Draft(
                            "effect_unknown",
                            {"call_id": entry["call_id"], "reason": "crash_after_begin"},
                            RECOVERY,
                        )
                    ],
                )
                return None
        turn = _scan_turn(f) if f.turn_open else _Turn()
        opener_seq = turn.opener["seq"] if turn.opener else 0
        cancel = self.open_cancel(f)
        if not f.turn_open:
            if cancel is not None and f.open_effects == 0:
                self.append(view, [Draft("cancelled", {"request_event_id": cancel["event_id"]}, HOST)])
                return None
            return "parked" if f.parked else "idle"
        if cancel is not None and cancel["seq"] > opener_seq:
            return self.cancel_turn(view, cancel)
        if f.parked:
            return "parked"
        if f.awaiting:
            self.append(view, _abandon_open_attempts(f, "crash"))
            return None
        if f.pending:
            return self.advance_call(view, f.calls[next(iter(f.pending))])
        return self.next_model_step(view, turn)

    def open_cancel(self, f: Fold) -> dict[str, Any] | None:
        """The latest cancel_requested if no `cancelled` names it yet (from the fold: no scan)."""
        if not f.last_cancel_seq:
            return None
        ev = f.events[f.last_cancel_seq - 1]
        return None if ev["event_id"] in f.cancels_settled else ev

    def resume_satisfied(self, view: View) -> bool:
        """Close parks whose cause is settled but that nobody resumed (the API normally appends
        `resumed` with its decision; this makes the worker robust to a control that didn't)."""
        f = view.fold
        for (kind, ident), addr in f.parked.items():
            cause: dict[str, Any] | None = None
            if kind == "approval":
                ch = f.challenges.get(ident)
                if ch is not None and ch.consumed:
                    cause = _decision_event(f, ident)
            elif kind == "effect":
                entry = f.effects.get(ident)
                if entry is not None and entry["status"] in ("resolved", "committed"):
                    cause = _settling_event(f, entry["call_id"])
            if cause is not None:
                self.append(
                    view,
                    [Draft("resumed", {"address": dict(addr), "cause_event_id": cause["event_id"]}, HOST)],
                )
                return True
        return False

    # ------------------------------------------------------------------ cancel
    def cancel_turn(self, view: View, cancel: dict[str, Any]) -> str | None:
        f = view.fold
        if f.awaiting:
            self.append(view, _abandon_open_attempts(f, "cancelled"))
            return None
        closing: list[Draft] = []
        for call_id in f.pending:
            call = f.calls[call_id]
            entry = f.effects.get(call.effect_key)
            if entry is not None and entry["status"] == "unknown":
                # In doubt: it settles through a human (C3) before `cancelled` (rule 11).
                if ("effect", call.effect_key) in f.parked:
                    return "parked"
                self.append(view, [self.park_effect(call)])
                return None
            settled = self.settled_result(f, call) if entry is not None else None
            if settled is None and entry is not None and self.may_have_run(f, call):
                # It began and nobody knows whether it took effect: never claim it didn't run.
                settled = _result(call_id, INTERRUPTED_PREVIEW, "interrupted", True)
            closing.append(
                settled or _result(call_id, "Not executed: the turn was cancelled.", "not_executed", True)
            )
        for addr in f.parked.values():
            closing.append(
                Draft("resumed", {"address": dict(addr), "cause_event_id": cancel["event_id"]}, HOST)
            )
        closing.append(Draft("cancelled", {"request_event_id": cancel["event_id"]}, HOST))
        closing.append(Draft("turn_completed", {"reason": "cancelled"}, HOST))
        self.append(view, closing)
        return None

    # ------------------------------------------------------------------ calls
    def advance_call(self, view: View, call: Call) -> str | None:
        f = view.fold
        entry = f.effects.get(call.effect_key)
        if entry is not None:
            status = entry["status"]
            if status == "unknown":
                if self.dedup_covers(f, call):
                    data = {"by": "provider_dedup", "call_id": call.call_id, "outcome": "safe_to_retry"}
                    self.append(view, [Draft("effect_resolved", data, RECOVERY)])
                else:
                    self.append(view, [self.park_effect(call)])
                return None
            settled = self.settled_result(f, call)
            if settled is not None:
                self.append(view, [settled])
                return None
            # resolved as not done / safe to retry: dispatch again under the same key
            return self.dispatch(view, call, attempt=self.last_attempt(f, call) + 1)
        if call.decision is None:
            d = self.decision_for(view, call.name, call.input)
            self.append(view, [Draft("permission_decision", d.data(call.call_id), HOST)])
            return None
        if call.decision == "deny":
            self.append(
                view, [_result(call.call_id, f"Permission denied for tool {call.name}.", "denied", True)]
            )
            return None
        if call.decision == "ask":
            ch_id, ch = next(
                ((k, c) for k, c in f.challenges.items() if c.call_id == call.call_id), (None, None)
            )
            if ch is None or ch_id is None:
                return self.request_approval(view, call)
            if not ch.consumed:  # resumed without a decision: wait on it again
                park = {"address": {"id": ch_id, "kind": "approval"}, "reason": "awaiting_approval"}
                self.append(view, [Draft("parked", park, HOST)])
                return None
            if not call.approved:
                self.append(view, [_result(call.call_id, "The approver denied this call.", "denied", True)])
                return None
        return self.dispatch(view, call, attempt=1)

    def decision_for(self, view: View, name: str, args: dict[str, Any]) -> Decision:
        f = view.fold
        spec = f.tools.get(name)
        mode = f.mode
        if spec is None or (name != "ask_user" and name not in self.ctx.tools):
            return Decision("deny", "default", None, mode)
        schema = spec.get("input_schema")
        from ..core.output_schema import validates  # compiled lazily: keeps the worker's cold start small

        if isinstance(schema, dict) and not validates(schema, args):
            return Decision("deny", "default", None, mode)
        engine = PermissionEngine(f.policy.get("permissions"), self.ctx.cache(view).thread_rules)
        return engine.decide(name, args, category=category_of(spec["effect_class"]), mode=mode)

    def request_approval(self, view: View, call: Call) -> str | None:
        now = self.ctx.clock()
        challenge_id = new_uuid7()
        args_hash = canonical_hash(call.input)
        expires = now + APPROVAL_TTL_MS
        req = {
            "args_hash": args_hash,
            "call_id": call.call_id,
            "challenge_id": challenge_id,
            "expires_at": expires,
        }
        park = {
            "address": {"id": challenge_id, "kind": "approval"},
            "expires_at": expires,
            "reason": "awaiting_approval",
        }
        rec = view.record
        row = ApprovalRow(
            challenge_id=challenge_id,
            tenant=rec.tenant,
            thread_id=rec.thread_id,
            branch_id=self.branch_id,
            call_id=call.call_id,
            args_hash=args_hash,
            expires_at=expires,
            tool=call.name,
            input=call.input,
            suggested_rules=suggested_rules(call.name, call.input),
            created_at=now,
        )
        extra = [self.ctx.stores.approvals.open(row)]
        self.append(
            view, [Draft("approval_requested", req, HOST), Draft("parked", park, HOST)], lambda v, ls: extra
        )
        return None

    def ask_user(self, view: View, call: Call) -> str | None:
        now = self.ctx.clock()
        expires = now + QUESTION_TTL_MS
        opener = _scan_turn(view.fold).opener
        rec = view.record
        row = QuestionRow(
            tenant=rec.tenant,
            thread_id=rec.thread_id,
            branch_id=self.branch_id,
            call_id=call.call_id,
            input=call.input,
            expires_at=expires,
            asked_by=(opener or {}).get("actor", {}).get("principal"),
            created_at=now,
        )
        park = {
            "address": {"id": call.call_id, "kind": "input"},
            "expires_at": expires,
            "reason": "awaiting_input",
        }
        extra: list[Companion] = [self.ctx.stores.questions.open(row)]
        self.append(view, [Draft("parked", park, HOST)], lambda v, ls: extra)
        return None

    def park_effect(self, call: Call) -> Draft:
        park = {"address": {"id": call.effect_key, "kind": "effect"}, "reason": "effect_unknown"}
        return Draft("parked", park, HOST)

    def dedup_covers(self, f: Fold, call: Call) -> bool:
        """An idempotent provider dedups on the effect key inside its window, counted from the
        first dispatch: re-sending under the same key is safe (`safe_to_retry`)."""
        spec = f.tools.get(call.name) or {}
        window = spec.get("dedup_window_ms")
        if call.effect_class != "idempotent" or not isinstance(window, int):
            return False
        first = next(
            (
                ev
                for ev in f.events[call.seq :]
                if ev["type"] == "effect_begin" and ev["data"]["call_id"] == call.call_id
            ),
            None,
        )
        return first is not None and self.ctx.clock() < first["time"] + window

    def may_have_run(self, f: Fold, call: Call) -> bool:
        """A resolution that allows a retry without saying the effect didn't happen
        (`safe_to_retry`: the provider dedups, so a re-send is harmless, not a no-op)."""
        ev = _find_last(f, "effect_resolved", lambda d: d["call_id"] == call.call_id, call.seq)
        return ev is not None and ev["data"]["outcome"] == "safe_to_retry"

    def last_attempt(self, f: Fold, call: Call) -> int:
        ev = _find_last(f, "effect_begin", lambda d: d["call_id"] == call.call_id, call.seq)
        return int(ev["data"]["attempt"]) if ev else 0

    def settled_result(self, f: Fold, call: Call) -> Draft | None:
        """A committed or confirmed effect whose call has no result yet: the result comes from the
        settlement record (`materialized_from_commit`), never from a new dispatch."""
        entry = f.effects.get(call.effect_key)
        if entry is None:
            return None
        if entry["status"] == "committed":
            ev = _find_last(f, "effect_commit", lambda d: d["call_id"] == call.call_id, call.seq)
            ref = ev["data"]["result_ref"] if ev else None
        elif entry["status"] == "resolved":
            ev = _find_last(f, "effect_resolved", lambda d: d["call_id"] == call.call_id, call.seq)
            if ev is None or ev["data"]["outcome"] in DEDUP_RESOLUTIONS:
                return None
            ref = ev["data"].get("result_ref")
        else:
            return None
        text, is_error = ASSUMED_DONE_PREVIEW, False
        if ref is not None:
            text, is_error = _read_result(self.ctx.artifacts.get_ref(ref))
        return _result(call.call_id, text, "materialized_from_commit", is_error)

    def dispatch(self, view: View, call: Call, *, attempt: int) -> str | None:
        if call.name == "ask_user":
            return self.ask_user(view, call)
        executor = self.ctx.tools.get(call.name)
        if executor is None:
            self.append(
                view, [_result(call.call_id, f"Tool {call.name} is not available.", "not_executed", True)]
            )
            return None
        rec = view.record
        readonly = call.effect_class == "read_only"
        tc = ToolContext(
            tenant=rec.tenant,
            thread_id=rec.thread_id,
            branch_id=self.branch_id,
            call_id=call.call_id,
            effect_key=None if readonly else call.effect_key,
            attempt=attempt,
            clock=self.ctx.clock,
            stores=self.ctx.stores,
        )
        if readonly:
            out = _run(executor, call.input, tc)
            drafts = []
            if call.name == "todo_write" and not out.is_error:
                drafts.append(
                    Draft("todos_updated", {"call_id": call.call_id, "todos": call.input["todos"]}, TOOL)
                )
            drafts.append(_result(call.call_id, out.text, "executed", out.is_error))
            self.append(view, drafts)  # a lost race re-decides: a read-only call may run again
            return None
        self.maybe_renew(force=True)
        lines = self.append(
            view, [Draft("effect_begin", {"attempt": attempt, "call_id": call.call_id}, HOST)]
        )
        if not self.clear_to_dispatch(lines[-1].seq):
            # A cancel barrier landed after our begin: we know the body never started.
            data = {"by": "adapter", "call_id": call.call_id, "outcome": "not_sent"}
            self.append_sticky(lambda v: [Draft("effect_resolved", data, HOST)])
            return None
        try:
            out = executor(call.input, tc)
        except ToolUncertain as exc:
            reason = exc.reason if exc.reason in ("timeout", "transport_error") else "transport_error"
            self._record_unknown(call, reason)
            return None
        except Exception:  # noqa: BLE001 - after dispatch, any failure is an unknown outcome
            self._record_unknown(call, "transport_error")
            return None
        body = canonical_bytes({"is_error": out.is_error, "text": out.text})
        ref = self.ctx.artifacts.put(body, "application/json")
        self.append_sticky(
            lambda v: [
                Draft("effect_commit", {"call_id": call.call_id, "result_ref": ref}, HOST),
                _result(call.call_id, out.text, "executed", out.is_error),
            ]
        )
        return None

    def clear_to_dispatch(self, begin_seq: int) -> bool:
        """Fencing right before a tool body starts, with one consistent read of the branch
        record: the lease is still ours (else `stale_epoch`: stop, recovery settles the begun
        effect), and no `cancel_requested` barrier landed after our `effect_begin`."""
        rec = self.ctx.store.head(self.branch_id)
        if (
            rec is None
            or rec.lease_holder != self.lease.holder_id
            or rec.lease_epoch != self.lease.epoch
            or rec.lease_expires_at <= self.ctx.clock()
        ):
            self.maybe_renew(force=True)  # raises stale_epoch when the lease is gone
        if rec is None or rec.head_seq == begin_seq:
            return True
        return self.ctx.writer.load(self.branch_id, record=rec).fold.last_cancel_seq < begin_seq

    def _record_unknown(self, call: Call, reason: str) -> None:
        self.append_sticky(
            lambda v: [
                Draft("effect_unknown", {"call_id": call.call_id, "reason": reason}, HOST),
                self.park_effect(call),
            ]
        )

    # ------------------------------------------------------------------ model
    def next_model_step(self, view: View, turn: _Turn) -> str | None:
        """Request again or complete the turn, from the latest answer. Under `stop_when_idle`
        (the in-flight work is done by now) nothing new starts: the turn ends `interrupted`."""
        attempt, reason = self.after_answer(view, turn)
        if attempt is not None and turn.stop_when_idle:
            return self.complete_turn(view, "interrupted")
        if attempt is not None:
            return self.request(view, attempt=attempt)
        return self.complete_turn(view, reason)

    def after_answer(self, view: View, turn: _Turn) -> tuple[int | None, str]:
        """(attempt to request next, None) or (None, turn_completed reason)."""
        last = turn.last_model
        if last is None:
            return 1, ""
        d = last["data"]
        if last["type"] == "model_attempt_abandoned":
            req = _find_last(view.fold, "model_request", lambda x: True, 0)
            attempt = int(req["data"]["attempt"]) if req else 1
            if d.get("reason") == "prompt_too_long":
                return None, "context_exhausted"
            if attempt >= MAX_ATTEMPTS:
                return None, "model_unavailable"
            return attempt + 1, ""
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

    def complete_turn(self, view: View, reason: str) -> str | None:
        self.append(view, [Draft("turn_completed", {"reason": reason}, HOST)])
        return None

    def request(self, view: View, *, attempt: int) -> str | None:
        cache = self.ctx.cache(view)
        settings = cache.settings
        try:
            adapter = self.ctx.models(settings["model"], settings["adapter"])
        except LookupError:
            return self.complete_turn(view, "model_unavailable")
        body = cache.renderer.request(self.ctx.artifacts.get_ref)
        head = cache.renderer.line0()
        prefix = {"bytes": len(head), "sha256": canonical_hash_bytes(head)}
        ref = self.ctx.artifacts.put(body, "application/x-ndjson")  # the bytes first (C2)
        self.maybe_renew(force=True)
        lines = self.append(
            view,
            [
                Draft(
                    "model_request", {"attempt": attempt, "declared_prefix": prefix, "request_ref": ref}, HOST
                )
            ],
        )
        rid = lines[0].event_id
        assert rid is not None
        try:
            result = adapter.complete(
                body, settings=settings, request_event_id=rid, branch_id=self.branch_id,
                artifacts=self.ctx.artifacts,
            )
        except ModelError as exc:  # classified by the adapter: outcome, reason, billing, retry-after
            data: dict[str, Any] = exc.abandoned(rid, ABANDON_REASONS)
            self.append_sticky(lambda v: [Draft("model_attempt_abandoned", data, HOST)])
            return None
        except Exception:  # noqa: BLE001 - the request may have reached the provider
            data = {"provider_outcome": "unknown", "reason": "provider_error", "request_event_id": rid}
            self.append_sticky(lambda v: [Draft("model_attempt_abandoned", data, HOST)])
            return None
        response = {
            "completeness": "complete",
            "content": result.content,
            "request_event_id": rid,
            "stop_reason": result.stop_reason,
            "usage": result.usage,
        }

        def build(v: View) -> list[Draft]:
            drafts = [Draft("model_response", response, MODEL)]
            for part in result.content:
                if part.get("type") != "tool_use":
                    continue
                call = {
                    "call_id": part["call_id"],
                    "input": part["input"],
                    "name": part["name"],
                    "request_event_id": rid,
                }
                drafts.append(Draft("tool_call", call, MODEL))
                decision = self.decision_for(v, part["name"], part["input"])
                drafts.append(Draft("permission_decision", decision.data(part["call_id"]), HOST))
            return drafts

        self.append_sticky(build)
        return None


def _decision_event(f: Fold, challenge_id: str) -> dict[str, Any] | None:
    for ev in reversed(f.events):
        if (
            ev["type"] in ("approval_granted", "approval_denied")
            and ev["data"]["challenge_id"] == challenge_id
        ):
            return ev
    return None


def _settling_event(f: Fold, call_id: str) -> dict[str, Any] | None:
    for ev in reversed(f.events):
        if ev["type"] in ("effect_resolved", "effect_commit") and ev["data"]["call_id"] == call_id:
            return ev
    return None


def canonical_hash_bytes(data: bytes) -> str:
    from ..core.canonical import sha256_hex

    return sha256_hex(data)


def _result(call_id: str, text: str, origin: str, is_error: bool) -> Draft:
    data = {
        "call_id": call_id,
        "completeness": "complete",
        "is_error": is_error,
        "origin": origin,
        "preview": text,
    }
    return Draft("tool_result", data, TOOL if origin == "executed" else HOST)


def _run(executor: Executor, args: dict[str, Any], tc: ToolContext) -> ToolOutput:
    try:
        return executor(args, tc)
    except Exception as exc:  # noqa: BLE001 - a read-only tool's failure is its result
        return ToolOutput(f"Error: {exc}", is_error=True)


def _read_result(body: bytes) -> tuple[str, bool]:
    import json

    v = json.loads(body)
    return str(v.get("text", "")), bool(v.get("is_error", False))


def _abandon_open_attempts(f: Fold, reason: str) -> list[Draft]:
    """Close every attempt still awaiting its response: sent or not, we can't tell (no lookup)."""
    data = {"provider_outcome": "unknown", "reason": reason}
    return [
        Draft("model_attempt_abandoned", {**data, "request_event_id": rid}, RECOVERY) for rid in f.awaiting
    ]
