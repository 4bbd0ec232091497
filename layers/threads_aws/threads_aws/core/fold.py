"""`validate_next` and `reduce` as one incremental fold over a resolved chain.

A `Fold` holds exactly the state the semantic rules (semantics.md §3, rules 1-30) and the
ReducedState need. `apply` checks one parsed event against that state and then advances it, so
import, writers and recovery share one decision procedure, and reducing a log is the same walk
that verified it. Rules 14-15 (request bytes) need artifacts and live in `render.verify_requests`.

The fold is also the branch's derived state, so nobody rescans the log for it: the pinned agent
config (`started`), the current settings epoch (`settings`), the thread's permission rules, the
mode, the latest turn (`turn`: its opener, last model event, pauses, steer, stop_when_idle), each
call's effect history and each challenge's decision, and event_id → seq (`seq_of`). Every update
is O(1) per event: the fold is the import-time validator too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .ask_user import ambiguous_options, match, options_of
from .canonical import canonical_hash, sha256_hex
from .errors import LogError
from .manifest import manifest_of_receipt

MAX_INT = (1 << 53) - 1
EFFECT_STATUS = {
    "effect_begin": "begun",
    "effect_commit": "committed",
    "effect_unknown": "unknown",
    "effect_resolved": "resolved",
}
RESPONSES = ("model_response", "model_response_recovered")


@dataclass(slots=True)
class Call:
    call_id: str
    seq: int
    branch_id: str
    name: str
    input: dict[str, Any]
    effect_class: str
    decision: str | None = None
    approved: bool = False
    result_origin: str | None = None
    deferred: bool = False
    late: bool = False  # its tool_result_late is recorded (a deferred call's real result)
    # its effect history (read by recovery and cancel; no backward scans)
    attempt: int = 0  # attempt of its latest effect_begin
    first_begin_time: int | None = None  # `time` of its first effect_begin (dedup windows)
    settled_seq: int = 0  # seq of its latest effect_commit / effect_resolved
    resolution: str | None = None  # outcome of its latest effect_resolved

    @property
    def effect_key(self) -> str:
        return f"{self.branch_id}:{self.call_id}"


@dataclass(slots=True)
class Challenge:
    call_id: str
    args_hash: str
    consumed: bool = False
    expires_at: int | None = None  # approval_requested.expires_at
    decided_seq: int = 0  # seq of its approval_granted / approval_denied


@dataclass(slots=True)
class Turn:
    """The latest turn, opened by the latest user_input (what the engine and the host ask of it
    while it is open; `Fold.turn_open` says whether it is)."""

    opener: dict[str, Any] | None = None  # its user_input event
    principal: dict[str, Any] | None = None  # of its latest input (opener or steer) naming one
    last_model: dict[str, Any] | None = None  # its latest model_request/response(_recovered)/abandoned
    pauses: int = 0  # its model_responses that stopped with pause_turn
    steered: bool = False  # a steer follows its latest model_request (the model hasn't seen it)
    stop_when_idle: bool = False  # finish what is in flight, request nothing new
    # run limits (engine.budgets, engine.output, engine.compaction read these)
    first_request_seq: int = 0  # its first model_request (the one that holds the turn's unit)
    turn_request_seq: int = 0  # its latest model_request of purpose turn
    truncations: int = 0  # its turn responses that stopped with max_tokens
    output_rejections: int = 0  # its output_validated{rejected}
    validated: str | None = None  # source_event_id of its latest output_validated
    instructed: str | None = None  # origin.id of its latest injected{source: recovery}
    # Retries (engine.retry reads these): counted since its latest response or settings epoch.
    failures: int = 0  # abandoned attempts other than steered/cancelled/crash
    retries: int = 0  # retry_scheduled
    crashes: int = 0  # abandoned{crash} (re-sent under policy.retry.crash_resends)
    waited_ms: int = 0  # the sum of its retry_scheduled.delay_ms (max_total_wait_ms)
    retry: dict[str, Any] | None = None  # its latest retry_scheduled data, until the next request
    epoch_seq: int = 0  # seq of its latest settings_changed
    # Deferred calls (engine.deferred): a late result or a heartbeat since its latest
    # model_request (the model hasn't seen it), and the `time` of its latest answer or heartbeat
    woken: bool = False
    quiet_since: int = 0
    heartbeats: int = 0  # its heartbeats


def epoch_settings(ev: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ModelSettings a settings epoch starts with: `thread_started` pins model, params and
    adapter (reasoning carried over: keep); `settings_changed` replaces them. None for any other
    event (or data that isn't an object: projections read unvalidated events too)."""
    d = ev.get("data")
    if not isinstance(d, Mapping):
        return None
    t = ev.get("type")
    if t == "thread_started":
        return {
            "adapter": d.get("adapter"),
            "model": d.get("model"),
            "model_params": d.get("model_params"),
            "reasoning_carryover": "keep",
        }
    if t == "settings_changed":
        s = d.get("settings")
        return dict(s) if isinstance(s, Mapping) else None
    return None


@dataclass(slots=True)
class Fold:
    """Incremental validate_next + reduce state of one resolved chain."""

    now: int | None = None
    thread_id: str | None = None
    branch_id: str | None = None  # branch of the current (last) segment
    own_fork_reason: str | None = None
    head_seq: int = 0
    head_hash: str | None = None
    epoch: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)  # events[seq - 1] has that seq
    known: list[bool] = field(default_factory=list)
    seq_of: dict[str, int] = field(default_factory=dict)  # event_id -> seq
    # the pinned agent config and the current settings epoch
    started: dict[str, Any] | None = None  # thread_started.data
    settings: dict[str, Any] | None = None  # epoch_settings of the latest epoch
    thread_rules: list[tuple[str, str]] = field(
        default_factory=list
    )  # permission_rule_added (rule, decision)
    # the settings a fallback left (engine.fallback reverts to them when the scope is `turn`):
    # set by the first settings_changed{fallback} since the last revert or user change
    fallback_from: dict[str, Any] | None = None
    fallback_event_id: str | None = None  # that settings_changed{fallback}
    fallback_turn: int = 0  # turns_completed when it was appended
    # turns and runs
    turn_open: bool = False
    turn: Turn = field(default_factory=Turn)
    last_request: dict[str, Any] | None = None  # the latest model_request event
    turns_completed: int = 0
    handed_off: bool = False
    budget_blocked: bool = False
    cancelled_final: bool = False
    cancel_requests: dict[str, str] = field(default_factory=dict)  # event_id -> scope
    cancels_settled: set[str] = field(default_factory=set)  # cancel_requested ids a `cancelled` names
    last_cancel_seq: int = 0
    # model attempts
    awaiting: dict[str, int] = field(default_factory=dict)  # model_request event_id -> seq
    # calls, effects, approvals, parks
    tools: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: dict[str, Call] = field(default_factory=dict)
    pending: dict[str, None] = field(default_factory=dict)  # ordered set of call_ids
    running: dict[str, None] = field(default_factory=dict)  # deferred calls without a late result
    effects: dict[str, dict[str, str]] = field(default_factory=dict)  # effect_key -> entry
    open_effects: int = 0  # effects begun or unknown
    challenges: dict[str, Challenge] = field(default_factory=dict)
    parked: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    # open parks with an expires_at -> it; and those already escalated (park_escalated)
    park_expires: dict[tuple[str, str], int] = field(default_factory=dict)
    escalated: set[tuple[str, str]] = field(default_factory=set)
    # uniqueness (rule 9)
    item_keys: set[str] = field(default_factory=set)
    occurrences: set[str] = field(default_factory=set)
    # settings, policy, modes
    policy: dict[str, Any] = field(default_factory=dict)
    mode: str = "default"
    # children, teams, compaction
    children: dict[str, str | None] = field(default_factory=dict)  # child_thread_id -> finished status
    spawned: dict[str, dict[str, Any]] = field(default_factory=dict)  # call_id -> its agent_spawned event
    handoff: dict[str, Any] | None = None  # the handoff event (after it, rule 26)
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    message_ids: set[str] = field(default_factory=set)
    team_messages: list[dict[str, Any]] = field(default_factory=list)  # team_message data, in order
    agent_injected: set[str] = field(default_factory=set)  # origin ids of injected{source: agent}
    boundary_after: dict[int, bool] = field(default_factory=dict)
    compacted_ranges: list[tuple[int, int]] = field(default_factory=list)
    cleared: set[str] = field(default_factory=set)  # call ids whose result a context_edited cleared
    snapshots: dict[int, tuple[bool, int | None, str]] = field(
        default_factory=dict
    )  # seq -> (quiescent, expires, id)
    # the workspace: the current manifest hash (latest workspace write's receipt, or the latest
    # snapshot's manifest: a child inherits it through its fork point) and the latest snapshot's
    workspace: str | None = None
    snapshot_manifest: str | None = None
    last_compacted_seq: int = 0
    last_compacted_range: tuple[int, int] = (0, 0)
    compaction_failures: int = 0  # compaction_failed since the last compacted (the breaker)
    last_compaction_failed_seq: int = 0
    inputs: list[int] = field(default_factory=list)  # seq of every user_input (runs), in order
    last_known_seq: int = 0  # seq of the last known event (unknown ones are skipped by rules)
    last_style_seq: int = 0  # seq of the latest injected{source: output_style}
    # usage
    usage_in: int = 0
    usage_out: int = 0
    usage_unknown: int = 0

    # ------------------------------------------------------------------ checks
    def _bad(self, seq: int, message: str, code: str = "invalid_transition") -> LogError:
        return LogError(code, seq, message)

    def quiescent(self) -> bool:
        """C4 without the expiry half: no open turn, nothing pending or parked, effects settled."""
        return not self.turn_open and not self.pending and not self.parked and self.open_effects == 0

    def apply(self, ev: dict[str, Any], *, known: bool = True) -> None:
        """validate_next then advance. `ev` has passed its line schema already."""
        seq = ev["seq"]
        if seq != self.head_seq + 1:
            raise self._bad(seq, f"expected seq {self.head_seq + 1}", "seq_mismatch")
        if self.thread_id is not None and ev["thread_id"] != self.thread_id:
            raise self._bad(seq, "thread_id differs from the chain's")  # rule 4
        if self.branch_id is not None and ev["branch_id"] != self.branch_id:
            raise self._bad(seq, "branch_id differs from its segment header")  # rule 4
        # The envelope rules (1, 4, 6, 28) are chain-wide and hold for unknown events too; only
        # the per-type rules below skip them (inferred).
        if ev["epoch"] < self.epoch:
            raise self._bad(seq, "epoch decreased")  # rule 6
        if ev["event_id"] in self.seq_of:
            raise self._bad(seq, "event_id repeats along the resolved chain")  # rule 28
        if known:
            handler = _HANDLERS.get(ev["type"])
            if handler is not None:
                handler(self, ev, seq, ev["data"])
            self.last_known_seq = seq
        self.seq_of[ev["event_id"]] = seq
        self.events.append(ev)
        self.known.append(known)
        self.head_seq = seq
        self.epoch = ev["epoch"]
        self.boundary_after[seq] = not self.pending and not self.awaiting

    def begin_segment(self, thread_id: str, branch_id: str) -> None:
        if self.thread_id is None:
            self.thread_id = thread_id
        self.branch_id = branch_id
        self.own_fork_reason = None

    # ------------------------------------------------------------ per type
    def _on_thread_started(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self.started = d
        self.settings = epoch_settings(ev)
        self.thread_rules = []
        self.tools = {t["name"]: t for t in d["tools"]}
        self.policy = d.get("policy") or {}
        # Without policy.permissions the mode is `default` (inferred).
        self.mode = self.policy.get("permissions", {}).get("mode", "default")

    def _on_tools_changed(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        if canonical_hash(d["tools"]) != d["tools_hash"]:
            raise self._bad(seq, "tools_hash is not sha256(JCS(tools))")  # rule 17
        self.tools = {t["name"]: t for t in d["tools"]}

    def _on_user_input(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        if self.turn_open:
            raise self._bad(seq, "user_input while a turn is open; use steer")  # rule 12
        if self.handed_off:
            raise self._bad(seq, "user_input after handoff")  # rule 26
        self.turn_open = True
        self.turn = Turn(opener=ev, principal=ev["actor"].get("principal"))
        self.budget_blocked = False
        self.inputs.append(seq)

    def _on_steer(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        if self.handed_off:
            raise self._bad(seq, "steer after handoff")  # rule 26
        self.turn.steered = True
        if "principal" in ev["actor"]:  # the one the model now answers (Render v1's memory owner)
            self.turn.principal = ev["actor"]["principal"]

    def _on_stop_when_idle(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self.turn.stop_when_idle = True

    def _on_model_request(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        if self.budget_blocked:
            raise self._bad(seq, "model_request after budget_exceeded")  # rule 21
        if self.handed_off:
            raise self._bad(seq, "model_request after handoff")  # rule 26
        self.awaiting[ev["event_id"]] = seq
        self.last_request = self.turn.last_model = ev
        self.turn.steered = False
        self.turn.woken = False
        self.turn.retry = None
        if not self.turn.first_request_seq:
            self.turn.first_request_seq = seq
        if d.get("purpose", "turn") == "turn":
            self.turn.turn_request_seq = seq

    def purpose_of(self, request_event_id: str) -> str | None:
        """`purpose` of a model_request on the chain (turn when absent), None if unknown."""
        seq = self.seq_of.get(request_event_id)
        if seq is None:
            return None
        req = self.events[seq - 1]
        return str(req["data"].get("purpose", "turn")) if req["type"] == "model_request" else None

    def _settle_attempt(self, d: dict[str, Any]) -> None:
        self.awaiting.pop(d["request_event_id"], None)

    def _on_model_response(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self._settle_attempt(d)
        self.turn.last_model = ev
        self.turn.quiet_since = ev["time"]
        self.turn.failures = self.turn.retries = self.turn.crashes = 0
        if d["stop_reason"] == "pause_turn" and ev["type"] == "model_response":
            self.turn.pauses += 1
        if d["stop_reason"] == "max_tokens" and self.purpose_of(d["request_event_id"]) == "turn":
            self.turn.truncations += 1
        usage = d["usage"]
        i, o = usage["input_tokens"], usage["output_tokens"]
        # Sums of the known values per field; a response with either field null counts as
        # unknown once. One whose known counts would take either sum past 2^53-1 adds neither.
        if (i is not None and self.usage_in + i > MAX_INT) or (
            o is not None and self.usage_out + o > MAX_INT
        ):
            self.usage_unknown += 1
            return
        if i is not None:
            self.usage_in += i
        if o is not None:
            self.usage_out += o
        if i is None or o is None:
            self.usage_unknown += 1

    _on_model_response_recovered = _on_model_response

    def _on_model_attempt_abandoned(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self._settle_attempt(d)
        self.turn.last_model = ev
        if d["reason"] == "crash":
            self.turn.crashes += 1
        elif d["reason"] not in ("steered", "cancelled"):
            self.turn.failures += 1

    def _on_retry_scheduled(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self.turn.retries += 1
        self.turn.waited_ms += d["delay_ms"]
        self.turn.retry = d

    def _on_tool_call(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        call_id = d["call_id"]
        if call_id in self.calls:
            raise self._bad(seq, f"call_id {call_id} repeats along the resolved chain")  # rule 9
        spec = self.tools.get(d["name"])
        effect_class = spec["effect_class"] if spec else "unguarded"
        self.calls[call_id] = Call(call_id, seq, ev["branch_id"], d["name"], d["input"], effect_class)
        self.pending[call_id] = None

    def _on_permission_decision(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        call = self.calls.get(d["call_id"])
        if call is not None:
            call.decision = d["decision"]

    def _on_approval_requested(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self.challenges[d["challenge_id"]] = Challenge(
            d["call_id"], d["args_hash"], expires_at=d.get("expires_at")
        )

    def _decide(self, seq: int, d: dict[str, Any], granted: bool) -> None:
        ch = self.challenges.get(d["challenge_id"])
        if ch is not None and ch.consumed:
            # rule 9; its code is invalid_transition (the rule states none; approval_duplicate
            # is the API's answer to a second decision, inferred)
            raise self._bad(seq, "approval challenge already consumed")
        # Rule 13: a decision naming no challenge matches no open challenge (inferred:
        # approval_mismatch, like a call_id/args_hash mismatch).
        if ch is None or ch.call_id != d["call_id"] or ch.args_hash != d["args_hash"]:
            raise self._bad(seq, "decision does not match the challenge", "approval_mismatch")  # rule 13
        ch.consumed = True
        ch.decided_seq = seq
        call = self.calls.get(ch.call_id)
        if call is not None and granted:
            call.approved = True

    def _on_approval_granted(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self._decide(seq, d, True)

    def _on_approval_denied(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self._decide(seq, d, False)

    def _effect(self, ev: dict[str, Any], seq: int, d: dict[str, Any], kind: str) -> None:
        call = self.calls.get(d["call_id"])
        if call is not None and call.effect_class == "read_only":
            raise self._bad(seq, "read_only calls write no effect events")  # rule 8
        # No rule needs a tool_call before effect_commit/unknown/resolved (rule 8 covers
        # effect_begin); without one the key takes the event's own branch (inferred).
        key = call.effect_key if call is not None else f"{ev['branch_id']}:{d['call_id']}"
        entry = self.effects.get(key)
        before = entry["status"] if entry else None
        status = EFFECT_STATUS[kind]
        if entry is None:
            entry = self.effects[key] = {"effect_key": key, "call_id": d["call_id"], "status": status}
        entry["status"] = status
        self.open_effects += (status in ("begun", "unknown")) - (before in ("begun", "unknown"))
        if call is None:
            return
        if kind == "effect_begin":
            call.attempt = d["attempt"]
            if call.first_begin_time is None:
                call.first_begin_time = ev["time"]
        elif kind in ("effect_commit", "effect_resolved"):
            call.settled_seq = seq
            if kind == "effect_resolved":
                call.resolution = d["outcome"]

    def _on_effect_begin(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        call = self.calls.get(d["call_id"])
        if call is None:
            raise self._bad(seq, "effect_begin for an unknown call")
        if not (call.decision == "allow" or call.approved):
            raise self._bad(seq, "effect_begin without allow or a consumed approval")  # rule 8
        if self.last_cancel_seq > call.seq:
            raise self._bad(seq, "effect_begin after a cancel_requested barrier")  # rule 8
        self._effect(ev, seq, d, "effect_begin")

    def _on_effect_commit(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self._effect(ev, seq, d, "effect_commit")
        manifest = manifest_of_receipt(d.get("provider_receipt"))
        if manifest is not None:
            self.workspace = manifest

    def _on_effect_unknown(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self._effect(ev, seq, d, "effect_unknown")

    def _on_effect_resolved(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self._effect(ev, seq, d, "effect_resolved")

    def _on_tool_result(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        call_id = d["call_id"]
        if call_id not in self.pending:
            raise self._bad(seq, "tool_result without a pending tool_call")  # rule 7
        if d["origin"] == "answered":
            if ("input", call_id) not in self.parked:
                raise self._bad(seq, "answer without an open question")  # rule 25
            self._check_answer(seq, self.calls[call_id], d["preview"])
        del self.pending[call_id]
        call = self.calls[call_id]
        call.result_origin = d["origin"]
        call.deferred = d["origin"] == "deferred"
        if call.deferred:
            self.running[call_id] = None

    def _check_answer(self, seq: int, call: Call, answer: str) -> None:
        """Rule 25 (as the reference cases read it): an answer to a question with options is one
        of them under the §ask_user matching rule (trim + case-fold); multi_select: each
        `\n`-joined line one of them, each at most once (inferred: the answer is a selection, so
        a repeat is no offered choice)."""
        if options_of(call.input) is None:
            return
        if call.input.get("multi_select") is True:
            picked = [match(call.input, p) for p in answer.split("\n")]
            if None in picked or len(set(picked)) != len(picked):
                raise self._bad(seq, "answer is not a selection of the offered options")
        elif match(call.input, answer) is None:
            raise self._bad(seq, "answer is not one of the offered options")

    def _on_tool_result_late(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        call = self.calls.get(d["call_id"])
        if call is None or not call.deferred:
            raise self._bad(seq, "tool_result_late without a deferred tool_result")  # rule 7
        call.late = True
        self.running.pop(call.call_id, None)
        if self.turn_open:
            self.turn.woken = True

    def _on_heartbeat(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        if self.turn_open:
            self.turn.woken = True
            self.turn.quiet_since = ev["time"]
            self.turn.heartbeats += 1

    def _on_answer_rejected(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        if ("input", d["call_id"]) not in self.parked:
            raise self._bad(seq, "answer_rejected without an open question")

    def _on_snapshot(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self.snapshots[seq] = (self.quiescent(), d["expires_at"], ev["event_id"])
        self.workspace = self.snapshot_manifest = d["manifest_hash"]

    def _on_fork(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self.own_fork_reason = d["reason"]
        if d["reason"] != "snapshot":
            return
        snap = self.snapshots.get(seq - 1)
        if snap is None or not snap[0]:
            raise self._bad(seq, "fork is not at a quiescent snapshot", "no_snapshot_boundary")  # rule 16
        # Expiry is judged at the fork's own `time` (inferred): the fork is a past fact, so a
        # fork made in time stays importable after the snapshot expires; `clock.now` judges
        # only new forks (fork.fork_point) and fork_points.
        if snap[1] is not None and snap[1] <= ev["time"]:
            raise self._bad(seq, "snapshot expired before the fork", "snapshot_expired")

    def _on_parked(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        a = d["address"]
        if a["kind"] == "input":
            call = self.calls.get(a["id"])
            if call is not None and ambiguous_options(call.input):
                # §ask_user: options equal under the matching rule make the call invalid
                raise self._bad(seq, "parked on an ask_user call whose options are ambiguous")
        self.parked[(a["kind"], a["id"])] = {"kind": a["kind"], "id": a["id"]}
        if "expires_at" in d:
            self.park_expires[(a["kind"], a["id"])] = d["expires_at"]

    def _on_resumed(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        a = d["address"]
        key = (a["kind"], a["id"])
        self.parked.pop(key, None)
        self.park_expires.pop(key, None)
        self.escalated.discard(key)

    def _on_park_escalated(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        # non-critical: no rule refuses it (a reader may skip it); only the open park's counts
        a = d["address"]
        if (a["kind"], a["id"]) in self.parked:
            self.escalated.add((a["kind"], a["id"]))

    def escalations_due(self, now: int) -> list[dict[str, str]]:
        """Open parks whose expires_at has passed and that no park_escalated names yet."""
        return [
            self.parked[key]
            for key, at in self.park_expires.items()
            if at <= now and key not in self.escalated and key in self.parked
        ]

    def _on_compacted(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        lo, hi = d["from_seq"], d["to_seq"]
        # Rule 10: both edges are step boundaries, i.e. states the chain has reached: the one
        # before from_seq and the one after to_seq (so to_seq < this event's seq).
        if not self.boundary_after.get(lo - 1, True) or not self.boundary_after.get(hi, False):
            raise self._bad(seq, "compacted edges are not step boundaries")  # rule 10
        for a, b in self.compacted_ranges:
            if lo <= b and a <= hi and not (a <= lo and hi <= b) and not (lo <= a and b <= hi):
                raise self._bad(seq, "compacted ranges partly overlap")  # rule 10
        request_id = d.get("summary_request_event_id")
        if request_id is not None:
            text = self._response_text(request_id)
            ref = d["summary_ref"]
            if text is None or ref["sha256"] != sha256_hex(text) or ref["bytes"] != len(text):
                raise self._bad(seq, "summary_ref is not the summary response's UTF-8 text")  # rule 10
        self.compacted_ranges.append((lo, hi))
        self.last_compacted_seq = seq
        self.last_compacted_range = (lo, hi)
        self.compaction_failures = 0

    def _on_compaction_failed(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self.compaction_failures += 1
        self.last_compaction_failed_seq = seq

    def _response_text(self, request_event_id: str) -> bytes | None:
        """UTF-8 bytes of the text parts (concatenated, inferred) of the latest response to
        `request_event_id`, or None when it has none."""
        for ev, known in zip(reversed(self.events), reversed(self.known), strict=True):
            if known and ev["type"] in RESPONSES and ev["data"]["request_event_id"] == request_event_id:
                parts = ev["data"]["content"]
                return "".join(p["text"] for p in parts if p.get("type") == "text").encode("utf-8")
        return None

    def _on_cancel_requested(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self.cancel_requests[ev["event_id"]] = d["scope"]
        self.last_cancel_seq = seq

    def _on_cancelled(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        if self.open_effects:
            raise self._bad(seq, "cancelled while an effect is begun or unknown")  # rule 11
        self.cancels_settled.add(d["request_event_id"])
        if self.cancel_requests.get(d["request_event_id"]) in ("thread", "tree"):
            self.cancelled_final = True

    def _on_turn_completed(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self.turn_open = False
        self.turns_completed += 1

    def _on_channel_delivery(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        if d["item_key"] in self.item_keys:
            raise self._bad(seq, "channel item_key repeats")  # rule 9
        self.item_keys.add(d["item_key"])

    def _on_schedule_fired(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        if d["occurrence_id"] in self.occurrences:
            raise self._bad(seq, "schedule occurrence repeats")  # rule 9
        self.occurrences.add(d["occurrence_id"])

    def _on_settings_changed(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        if self.awaiting:
            raise self._bad(seq, "settings_changed while an attempt awaits its response")  # rule 18
        models = self.policy.get("models")
        if models is not None:
            m = d["settings"]["model"]
            if not any(x["provider"] == m["provider"] and x["name"] == m["name"] for x in models):
                raise self._bad(seq, "model is not in policy.models")  # rule 18
        if d["reason"] == "fallback" and self.fallback_from is None:
            self.fallback_from = self.settings
            self.fallback_event_id = ev["event_id"]
            self.fallback_turn = self.turns_completed
        elif d["reason"] in ("user", "revert"):
            self.fallback_from = self.fallback_event_id = None
        self.settings = epoch_settings(ev)
        t = self.turn
        t.failures = t.retries = t.crashes = 0
        t.retry = None
        t.epoch_seq = seq

    def _on_permission_rule_added(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self.thread_rules.append((d["rule"], d["decision"]))

    def _on_budget_exceeded(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self.budget_blocked = True

    def _on_output_validated(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        out = self.policy.get("output")
        if out is None or d["schema_sha256"] != out["schema_sha256"]:
            raise self._bad(seq, "schema_sha256 is not policy.output.schema_sha256")  # rule 20
        if d["outcome"] == "accepted":
            from .output_schema import validates  # rare: keep the checker off the cold path

            if not validates(out["schema"], d["value"]):
                raise self._bad(seq, "accepted value does not validate against the pinned schema")
        else:
            self.turn.output_rejections += 1
        self.turn.validated = d["source_event_id"]

    def _on_context_edited(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        for edit in d["edits"]:
            call = self.calls.get(edit["call_id"])
            if call is None or call.result_origin is None:
                raise self._bad(seq, "context_edited names a call without a recorded result")  # rule 19
            if edit["action"] == "redact":
                text = self.result_part_text(call.call_id, edit["part"])
                if text is None:
                    raise self._bad(seq, "redact part is not a text part")
                raw = text.encode("utf-8")
                for span in edit["spans"]:
                    s, e = span["start"], span["end"]
                    if not (s <= e <= len(raw)) or not _char_boundary(raw, s) or not _char_boundary(raw, e):
                        raise self._bad(seq, "redact span is not on character boundaries inside the part")
        self.cleared.update(e["call_id"] for e in d["edits"] if e["action"] == "clear")

    def result_part_text(self, call_id: str, part: int) -> str | None:
        for ev, known in zip(reversed(self.events), reversed(self.known), strict=True):
            if (
                known
                and ev["type"] in ("tool_result", "tool_result_late")
                and ev["data"]["call_id"] == call_id
            ):
                content = ev["data"].get("content")
                if content is None:
                    return ev["data"]["preview"] if part == 0 else None
                if part < len(content) and content[part].get("type") == "text":
                    return str(content[part]["text"])
                return None
        return None

    def _on_mode_changed(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        if d["from"] != self.mode:
            raise self._bad(seq, "mode_changed.from is not the current mode")  # rule 27
        if d["to"] == "bypass" and not self.policy.get("permissions", {}).get("allow_bypass", False):
            raise self._bad(seq, "bypass needs policy.permissions.allow_bypass")  # rule 27
        self.mode = d["to"]

    def _on_agent_spawned(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self.children.setdefault(d["child_thread_id"], None)
        self.spawned[d["call_id"]] = ev

    def _on_agent_finished(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        child = d["child_thread_id"]
        if child not in self.children or self.children[child] is not None:
            raise self._bad(seq, "agent_finished without exactly one agent_spawned child")  # rule 22
        self.children[child] = d["status"]

    def _on_handoff(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self.handed_off = True
        self.handoff = ev

    def _on_todos_updated(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        ids = [t["id"] for t in d["todos"]]
        if len(set(ids)) != len(ids):
            raise self._bad(seq, "todo ids repeat")  # rule 24

    def _on_team_task_created(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self.tasks[d["task_id"]] = {
            "status": "open",
            "owner": None,
            "blocked_by": d["blocked_by"],
            "subject": d["subject"],
        }

    def _on_team_task_claimed(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        task = self.tasks.get(d["task_id"])
        if task is None or task["status"] != "open":
            raise self._bad(seq, "team_task_claimed needs an open, unclaimed task")  # rule 23
        if any(self.tasks.get(b, {}).get("status") != "completed" for b in task["blocked_by"]):
            raise self._bad(seq, "team_task_claimed while a blocker is not completed")  # rule 23
        task["status"], task["owner"] = "claimed", d["member"]

    def _on_team_task_updated(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        task = self.tasks.get(d["task_id"])
        if task is None or task["status"] != "claimed":
            raise self._bad(seq, "team_task_updated needs a claimed task")  # rule 23
        if d["status"] == "released":  # released_by: a re-run release by the same member is a no-op
            task["status"], task["owner"], task["released_by"] = "open", None, task["owner"]
        else:
            task["status"] = d["status"]

    def _on_team_message(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        if d["message_id"] in self.message_ids:
            raise self._bad(seq, "team_message.message_id repeats")  # rule 23
        self.message_ids.add(d["message_id"])
        self.team_messages.append(d)

    def _on_injected(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        if d["source"] == "agent":  # a teammate's message delivered here (engine.team)
            self.agent_injected.add(d["origin"]["id"])
        if d["source"] == "recovery":  # a host instruction answering a model response
            self.turn.instructed = d["origin"]["id"]
        if d["source"] != "output_style":
            return
        styles = self.policy.get("output_styles") or {}
        style = styles.get(d["origin"]["id"])
        if d["trust"] != "trusted_instruction" or style is None or d.get("text") != style:
            raise self._bad(seq, "output_style injection does not match policy.output_styles")  # rule 29
        actor = ev["actor"]
        if actor["kind"] == "user" and "principal" in actor and not self.turn_open:
            self.last_style_seq = seq
            return
        # The L3 restore: host, right after (skipping unknown events) a compacted whose range
        # held the latest style.
        lo, hi = self.last_compacted_range
        if (
            actor["kind"] == "host"
            and self.last_compacted_seq
            and self.last_compacted_seq == self.last_known_seq
            and lo <= self.last_style_seq <= hi
        ):
            self.last_style_seq = seq
            return
        raise self._bad(seq, "output_style injection from the wrong actor or at the wrong time")  # rule 29

    # ------------------------------------------------------------- reduce
    def status(self) -> str:
        if self.own_fork_reason == "repair":
            return "inspection_only"
        if self.cancelled_final:
            return "cancelled"
        if self.parked:
            return "parked"
        if self.turn_open:
            return "in_turn"
        return "idle"

    def fork_points(self) -> list[dict[str, Any]]:
        out = []
        for seq, (quiet, expires, event_id) in sorted(self.snapshots.items()):
            if quiet and (expires is None or self.now is None or expires > self.now):
                out.append({"seq": seq, "snapshot_event_id": event_id})
        return out

    def known_events(self) -> list[dict[str, Any]]:
        return [e for e, k in zip(self.events, self.known, strict=True) if k]


_HANDLERS = {name[4:]: fn for name, fn in vars(Fold).items() if name.startswith("_on_")}


def _char_boundary(raw: bytes, i: int) -> bool:
    return i == len(raw) or (raw[i] & 0xC0) != 0x80
