"""The fold's state: what one resolved chain has derived so far (`FoldState`), and the records
it keeps per call (`Call`), per approval challenge (`Challenge`) and for the latest turn (`Turn`).

`core.fold.Fold` is this state with the per-type rules of the `fold_*` modules mixed in; each
rule mixin subclasses `FoldState` with empty `__slots__`, so a Fold keeps a slotted layout.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import LogError

# The usage fields the fold sums per field (model_response.usage; each int or null).
USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
)


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
class FoldState:
    """The derived state of one resolved chain (every field the rules and the ReducedState read)."""

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
    # every usage field's sum over the chain's responses (a field past 2^53-1 stops adding), and
    # those sums as they stood at each user_input (seq → USAGE_FIELDS order): a run's stream
    # reports the session's spend before the run from here, without re-reading the log
    usage_sums: list[int] = field(default_factory=lambda: [0] * len(USAGE_FIELDS))
    usage_at_input: dict[int, tuple[int, ...]] = field(default_factory=dict)

    def _bad(self, seq: int, message: str, code: str = "invalid_transition") -> LogError:
        return LogError(code, seq, message)

    def quiescent(self) -> bool:
        """C4 without the expiry half: no open turn, nothing pending or parked, effects settled."""
        return not self.turn_open and not self.pending and not self.parked and self.open_effects == 0
