"""A run's stream as craze events (`../shared/spec/craze-event.schema.json`, codec v1): a pure,
stateful mapper (see `frames` for ordering, ids and resume).

Order of a run: `turn{started, text: <prompt>}` → the session's events → the asks' endings →
`done` or `error` → `turn{ended}`. The events' shapes are `craze_wire`'s (closed seed schema,
keys in its order, zero values omitted); `at` = the log event's `time` (RFC 3339, UTC). The asks
(permissions, questions, unknown effects, plans) are `craze_asks`' half of the mapper, sub-agents
and compaction `craze_session`'s; a fresh connection to a run continuing a thread first gets
the thread's earlier turns as a replay bracket (`craze_replay`, the `preamble`).

Mapping (craze-mapping.md §3, with these choices):
- turns: `turn-<seq of the user_input>` (stable whatever part of the log a mapper was fed),
  origin `submit`; `steer` → `user{interjection}`.
- text: live deltas are `text`/`thought` chunks; the committed `model_response` sends each text
  part (and each reasoning part's readable `summary`) minus what the deltas already showed — one
  event per non-empty part, possibly with empty text: that event is the part's commit marker,
  so the cursor moves past the response whether or not the deltas covered it (see `text`).
- tools: one row per call id, re-published whole when it changes (identical re-publishes and
  updates of a terminal row are dropped). Status follows ACP's meaning rather than the
  proposal's: `pending` from the `tool_use` part until the call may run (allowed, or approved —
  a call awaiting approval has not started), `in_progress` while it runs, then `completed` /
  `failed` from its `tool_result` (denied and not-executed calls fail; a call the cancel stopped
  is `cancelled`, as is a row still open when its turn ends). A deny keeps its reason in
  `contentText` until the denied result arrives.
- approvals: `approval_requested` opens `permission{id: challenge_id}` — the challenge id, so a
  client answers at `POST …/approvals/{challenge_id}` with no lookup; options `grant`
  (allow_once), `remember:<rule>` (allow_always, one per suggested rule) and `deny`
  (reject_once). A grant's ending waits for the next event, because the remembered rule
  (`permission_rule_added`) is committed right after the grant.
- `ask_user`: its park opens `question{id: call_id}` (questions `q1`, options `o1…`); the
  answered result ends it with `answers`: the chosen option ids, or for a question without
  options the typed text as the one entry (`{q1: ["tea, please"]}`: craze has no free-text
  slot, and an entry that is no option id of the question can only be the text).
- an effect whose outcome is unknown parks; unlike the proposal (nothing), it opens a
  `permission{id: effect key}` with options `assume_done` / `assume_not_done`, so a craze
  client can drive `POST …/parked/{effect_key}/resolve`; a human resolution answers it, any
  other ends it `automatic`.
- endings: `cancel_requested` cancels every open ask (`by: cancel`); `turn_completed` ends the
  rest (`turn_ended`), then `done` (end_turn, cancelled/interrupted → `cancelled`, max_output →
  `max_tokens`, max_turns → `max_turn_requests`, handoff → `handoff`) or `error` (error,
  context_exhausted → `context_too_large`, model_unavailable → `provider` with the last HTTP
  status as code — not the proposal's `model_not_found`: our reason means the provider kept
  failing, and `model_not_found` would tell a client its model id is wrong; budget_exhausted,
  stop_hook_limit, output_invalid, input_denied → `other`, the budget's numbers in the message).
  A run the host failed without a `turn_completed` ends from its `result` (no id).
- state: `settings_changed` → `meta{state:{model: "<provider>/<name>", config}}` (model params
  as config options); `mode_changed` → `meta{state:{mode}}`, plus top-level `mode` when the
  agent caused it; each model response's usage (compaction's included) → `meta{state:{usage}}`:
  `turn` sums this turn, `session` the thread's whole chain (the sums before the run come from
  the fold, `session_before`, so a thread's second run reports the session's figure, not its
  own); `unpriced` — a run stream has no price table.
- `retry_wait` status → a transient `meta{state:{reason: retry_wait, detail}}` (report-only
  strings), so a watching client sees why the run stalls.
- subagents: `agent_spawned` / `agent_finished` → `subagent{spawned|finished}` rows and the spawn
  call's row as a task (`task.agentId`, status, duration, receipt); the child's task prompt as
  `user{agent: <child id>}` right after `spawned`.
- plans: no `exit_plan_mode` tool exists here, so this host's plan is a todo list the agent
  writes in plan mode (the mode as the call's `permission_decision` or a `mode_changed` showed
  it): `plan{id: plan-<seq>}` after the `todos`, accepted (`accepted: true`) when an operator
  leaves plan mode, else ended with the turn; a newer list supersedes it.
- not emitted, for want of a situation: `command` (no plugin command or skill expands a prompt
  here), `queue` (no input is queued: a second run on a busy thread is refused), `foreign_turn`.
- compaction: a `purpose: compaction` request → `compaction{started, reason: auto}` (once for
  its retries); `compacted` / `compaction_failed` → `compaction{ended}` (reason from the
  trigger, or `err`); one still open when the turn ends is ended with an `err` before `done`.
- nothing for: thread_started, tool_call's repeat, hook decisions, effect commits, resumed,
  cancelled, retries and abandoned attempts, heartbeats, snapshots, forks, channels, schedules.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from . import craze_wire as w
from . import tools as t
from .craze_asks import Asks, Rules
from .craze_replay import replay
from .craze_session import Session
from .craze_wire import TERMINAL, craze_event
from .event_data import as_list, engine_rules, input_text, obj, summary
from .frames import JsonObj, Mapper, Out, rfc3339
from .text import Deltas, remainders


class CrazeMapper(Asks, Session, Mapper):
    def __init__(
        self,
        *,
        suggested_rules: Rules | None = None,
        session_before: Sequence[int] = (),
        history: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        """`session_before`: the thread's usage sums before this run's user_input, in the fold's
        USAGE_FIELDS order (`Fold.usage_at_input[start]`), so `usage.session` is the session's.
        `history`: the thread's known events before the run (from `craze_replay.history_window`),
        replayed to a connection that has seen nothing of the run (`preamble`)."""
        super().__init__()
        self._session_before = tuple(session_before)
        self._history = history
        self._rules = suggested_rules or engine_rules
        self.turn_id: str | None = None
        self.rows: dict[str, JsonObj] = {}  # call id → its row as last published (no `at`)
        self.inputs: dict[str, tuple[str, dict[str, Any]]] = {}  # call id → (tool, args)
        self.asks: dict[str, str] = {}  # open ask id → kind, in opening order
        self.grant: tuple[str, JsonObj] | None = None  # a grant whose ending awaits its rule
        self.options: dict[str, list[JsonObj]] = {}  # challenge id → its options
        self.deltas = Deltas()
        self.cancelling = False
        self.budget: Mapping[str, Any] | None = None
        self.http_status = 0
        self.spend_turn, self.spend_all = w.zero_spend(), w.spend_of(session_before)
        self.children: dict[str, JsonObj] = {}  # child thread id → its subagent row
        self.compacting = False  # a compaction started and not yet ended
        self.mode: str | None = None  # the permission mode, as the log last showed it
        self.turn_text = ""  # the turn's committed reply so far (a plan's overview)
        self._at: str | None = None

    def preamble(self, seen: list[Out]) -> list[Out]:
        """A connection that has seen nothing of a run continuing a thread first gets the
        session's history as a replay bracket (`craze_replay`); no ids: never resent."""
        if seen or not self._history:
            return []
        return [Out(d) for d in replay(self._history, self._session_before)]

    # ------------------------------------------------------------------ emit helpers
    def _out(self, type: str, **fields: Any) -> None:
        self._emit(craze_event(type, at=self._at, **fields))

    def _publish(self, call_id: str, **changes: Any) -> None:
        old = self.rows.get(call_id)
        if old is not None and old.get("status") in TERMINAL:
            return  # a terminal row is never overwritten by a late update
        row = dict(old or {"id": call_id})
        for k, v in changes.items():
            if v is None or v == "" or v == [] or v is False:
                row.pop(k, None)
            else:
                row[k] = v
        if row == old:
            return  # identical re-publishes are suppressed
        self.rows[call_id] = row
        self._out("tool", tool=w.tool_row(row, self._at))

    # ------------------------------------------------------------------ inputs
    def _on_event(self, ev: Mapping[str, Any]) -> None:
        typ = str(ev.get("type"))
        data = obj(ev.get("data"))
        self._at = rfc3339(ev.get("time"))
        if self.grant is not None and not (
            typ == "permission_rule_added" and data.get("challenge_id") == self.grant[0]
        ):
            self._end_grant(None)
        handler = getattr(self, "_ev_" + typ, None)
        if handler is not None:
            handler(ev, data)

    def _on_delta(self, rid: str, text: str, offset: int | None, thinking: bool) -> None:
        if self.turn_id is None:
            return
        chunk = self.deltas.take(rid, text, offset, thinking)
        if chunk:
            self._emit(craze_event("thought" if thinking else "text", text=chunk))

    def _on_status(self, status: str, until: Any) -> None:
        if status == "retry_wait" and self.turn_id is not None:
            when = rfc3339(until)
            detail = f"retrying at {when}" if when else "retrying"
            self._emit(craze_event("meta", state={"reason": "retry_wait", "detail": detail}))

    def _on_result(self, run_id: str, outcome: Mapping[str, Any]) -> None:
        status = outcome.get("status")
        if self.turn_id is None or status not in ("failed", "cancelled", "budget_exhausted"):
            return
        self._at = None
        err = obj(outcome.get("error"))
        if status == "cancelled":
            self._end_turn("cancelled", None)
        else:
            code = str(err.get("code", status))
            self._end_turn(None, {"message": str(err.get("message", code)), "class": "other", "code": 0})

    # ------------------------------------------------------------------ turns and text
    def _ev_user_input(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        if self.turn_id is not None:
            self._end_turn("cancelled", None, synthetic=True)
        self.turn_id = f"turn-{ev['seq']}"
        self.spend_turn = w.zero_spend()
        self.turn_text = ""
        turn = {"id": self.turn_id, "phase": "started", "text": input_text(d), "origin": "submit"}
        self._out("turn", turn=w.clean(turn))

    def _ev_steer(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        self._out("user", text=input_text(d), interjection=True)

    def _ev_model_request(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        rid = str(ev.get("event_id"))
        held = self.deltas.request(rid, str(d.get("purpose", "turn")))
        if not self.deltas.is_turn(rid) and not self.compacting:  # a retried request: still one
            self.compacting = True
            self._out("compaction", compaction={"phase": "started", "reason": "auto"})
        for text, offset, thinking in held:
            self._on_delta(rid, text, offset, thinking)

    def _ev_model_response(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        rid = str(d.get("request_event_id"))
        shown = self.deltas.close(rid)
        if not self.deltas.is_turn(rid):
            self._usage(d.get("usage"))  # a compaction's spend is the turn's and the session's too
            return
        content = [p for p in as_list(d.get("content")) if isinstance(p, dict)]
        texts = iter(
            remainders([str(p.get("text", "")) for p in content if p.get("type") == "text"], shown.text)
        )
        thoughts = iter(
            remainders([summary(p) for p in content if p.get("type") == "reasoning"], shown.thinking)
        )
        for i, part in enumerate(content):
            kind = part.get("type")
            if kind == "text":
                self.turn_text += str(part.get("text", ""))
                rest = next(texts)
                if part.get("text"):
                    self._out("text", text=rest)
            elif kind == "reasoning":
                rest = next(thoughts)
                if summary(part):
                    self._out("thought", text=rest)
            elif kind == "tool_use":
                self._tool_use(str(part.get("call_id")), str(part.get("name")), part.get("input") or {})
            elif kind == "hosted_tool":
                name = str(part.get("name"))
                kind_ = t.kind_of(name) if t.kind_of(name) in ("fetch", "search") else "other"
                self._publish(f"{rid}#{i}", name=name, toolName=name, kind=kind_, status="completed")
        self._usage(d.get("usage"))

    _ev_model_response_recovered = _ev_model_response

    def _ev_model_attempt_abandoned(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        self.deltas.close(str(d.get("request_event_id")))
        if isinstance(d.get("http_status"), int):
            self.http_status = d["http_status"]

    def _usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        for spend in (self.spend_turn, self.spend_all):
            w.add_spend(spend, usage)
        self._out("meta", state=w.usage_state(usage, self.spend_turn, self.spend_all))

    def _ev_turn_completed(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        reason = str(d.get("reason"))
        if reason in w.DONE_REASONS:
            self._end_turn(w.DONE_REASONS[reason], None)
        else:
            self._end_turn(None, w.turn_error(reason, d, self.http_status, self.budget))

    def _end_turn(self, stop: str | None, err: JsonObj | None, *, synthetic: bool = False) -> None:
        if self.turn_id is None:
            return
        if self.grant is not None:
            self._end_grant(None)
        for ask_id, kind in list(self.asks.items()):
            self._end_ask(ask_id, kind, outcome="turn_ended", by="turn")
        for call_id, row in list(self.rows.items()):
            if row.get("status") not in TERMINAL and row.get("contentText") != "deferred":
                self._publish(call_id, status="cancelled")
        if self.compacting:  # every started gets an ended, at the latest with its turn
            self.compacting = False
            self._out("compaction", compaction={"phase": "ended", "err": "the turn ended first"})
        if err is None:
            self._out("done", stopReason=stop)
            turn = {"id": self.turn_id, "phase": "ended", "stopReason": stop, "synthetic": synthetic}
        else:
            self._out("error", err=err)
            turn = {
                "id": self.turn_id,
                "phase": "ended",
                "errClass": err["class"],
                "err": err["message"],
            }
        self._out("turn", turn=w.clean(turn))
        self.turn_id = None
        self.cancelling = False
        self.budget = None
        self.rows = {k: v for k, v in self.rows.items() if v.get("status") not in TERMINAL}

    def _ev_budget_exceeded(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        self.budget = d

    def _ev_cancel_requested(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        self.cancelling = True
        for ask_id, kind in list(self.asks.items()):
            self._end_ask(ask_id, kind, outcome="cancelled", by="cancel")

    # ------------------------------------------------------------------ tools
    def _tool_use(self, call_id: str, name: str, args: Any) -> None:
        args = args if isinstance(args, dict) else {}
        self.inputs[call_id] = (name, args)
        self._publish(
            call_id,
            name=name,
            toolName=name,
            kind=t.kind_of(name),
            title=t.title_of(name, args),
            rawInput=t.raw_input(args),
            locations=t.locations_of(args),
            status="pending",
            task={} if t.is_task(name) else None,
        )

    def _ev_tool_call(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        call_id, name = str(d.get("call_id")), str(d.get("name"))
        if call_id not in self.rows:
            self._tool_use(call_id, name, d.get("input"))

    def _ev_permission_decision(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        call_id = str(d.get("call_id"))
        if isinstance(d.get("mode"), str):
            self.mode = d["mode"]
        if d.get("decision") == "allow":
            self._publish(call_id, status="in_progress")
        elif d.get("decision") == "deny":
            why = d.get("reason") or f"denied by {d.get('source')}" + (
                f" ({d['rule_id']})" if d.get("rule_id") else ""
            )
            self._publish(call_id, contentText=str(why))

    def _ev_effect_begin(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        self._publish(str(d.get("call_id")), status="in_progress")

    def _ev_effect_unknown(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        self._publish(str(d.get("call_id")), contentText=f"outcome unknown: {d.get('reason')}")

    def _ev_effect_resolved(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        call_id = str(d.get("call_id"))
        key = next(
            (k for k, kind in self.asks.items() if kind == "effect" and k.endswith(":" + call_id)), None
        )
        if key is not None:
            if d.get("by") == "human":
                self._end_ask(key, "effect", outcome="answered", by="client", option=str(d.get("outcome")))
            else:
                self._end_ask(key, "effect", outcome="automatic", by="provider")
        self._publish(call_id, contentText=f"resolved: {d.get('outcome')}")

    def _ev_tool_result(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        call_id, origin = str(d.get("call_id")), d.get("origin", "executed")
        if origin == "answered" and call_id in self.asks:
            self._end_question(call_id, t.result_text(d))
        if origin == "deferred":
            self._publish(call_id, status="in_progress", contentText="deferred")
            return
        if origin == "interrupted" or (origin == "not_executed" and self.cancelling):
            status = "cancelled"
        elif origin in ("denied", "not_executed") or d.get("is_error"):
            status = "failed"
        else:
            status = "completed"
        self._result(call_id, d, status)

    def _ev_tool_result_late(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        self._result(str(d.get("call_id")), d, "failed" if d.get("is_error") else "completed")

    def _result(self, call_id: str, d: Mapping[str, Any], status: str) -> None:
        content, cut = t.tail_bytes(t.result_text(d))
        truncated = cut or "ref" in d or d.get("completeness") == "partial"
        output = {k: v for k, v in (("content", content), ("truncated", truncated)) if v}
        row = self.rows.get(call_id, {})
        keep = row.get("contentText") if status == "failed" and row.get("contentText") != "deferred" else None
        self._publish(call_id, status=status, output=output or None, contentText=keep)

    def _ev_todos_updated(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        todos = w.todos(d.get("todos"))
        self._out("todos", todos=todos)
        self._plan_from_todos(int(ev["seq"]), todos)

    # ------------------------------------------------------------------ state
    def _ev_settings_changed(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        self._out("meta", state=w.model_state(obj(d.get("settings"))))

    def _ev_mode_changed(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        mode = str(d.get("to"))
        if d.get("from") == "plan" and mode != "plan":
            self._plan_accepted()
        self.mode = mode
        actor = obj(ev.get("actor"))
        agent_initiated = actor.get("kind") not in ("user", "approver")
        self._out("meta", mode=mode if agent_initiated else None, state={"mode": mode})
