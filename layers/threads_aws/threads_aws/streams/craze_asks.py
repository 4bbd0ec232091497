"""Craze asks, the human-in-the-loop half of the craze mapper (`craze`), as a mixin of
`CrazeMapper`: `approval_requested` opens `permission{id: challenge_id}` (options grant,
remember:<rule>, deny); a grant's ending waits for the next event (the remembered rule,
`permission_rule_added`, is committed right after it); an `ask_user` park opens
`question{id: call_id}`, its answered result ends it; an effect whose outcome is unknown opens
`permission{id: effect key}` (assume_done / assume_not_done); a todo list written in plan mode
opens `plan{id: plan-<seq>}` (this host's plan: no exit_plan_mode tool exists, so the plan is the
agent's todo list under plan mode, its overview the turn's reply so far), accepted when an
operator leaves plan mode, else ended with the turn. `_end_ask` closes any of them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from . import craze_wire as w
from . import tools as t
from .event_data import obj
from .frames import JsonObj

Rules = Callable[[str, dict[str, Any]], list[str]]


class Asks:
    # The mapper's state these methods share (set in CrazeMapper.__init__).
    inputs: dict[str, tuple[str, dict[str, Any]]]
    asks: dict[str, str]
    grant: tuple[str, JsonObj] | None
    options: dict[str, list[JsonObj]]
    _rules: Rules
    mode: str | None
    turn_text: str

    def _out(self, type: str, **fields: Any) -> None:
        raise NotImplementedError  # CrazeMapper's

    def _publish(self, call_id: str, **changes: Any) -> None:
        raise NotImplementedError  # CrazeMapper's

    def _ev_approval_requested(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        cid, call_id = str(d.get("challenge_id")), str(d.get("call_id"))
        name, args = self.inputs.get(call_id, ("tool", {}))
        options = w.approval_options(self._rules(name, args))
        self.options[cid] = options
        self.asks[cid] = "permission"
        self._out("permission", permission={"id": cid, "tool": t.label_of(name, args), "options": options})

    def _ev_approval_granted(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        self.grant = (str(d.get("challenge_id")), dict(d))
        self._publish(str(d.get("call_id")), status="in_progress")

    def _ev_permission_rule_added(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        if self.grant is not None and d.get("challenge_id") == self.grant[0]:
            self._end_grant(str(d.get("rule")))

    def _end_grant(self, rule: str | None) -> None:
        assert self.grant is not None
        cid, _ = self.grant
        self.grant = None
        if cid in self.asks:
            self._end_ask(
                cid,
                "permission",
                outcome="answered",
                by="client",
                option=f"remember:{rule}" if rule else "grant",
            )

    def _ev_approval_denied(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        cid = str(d.get("challenge_id"))
        if cid not in self.asks:
            return
        if d.get("reason") == "expired":
            self._end_ask(cid, "permission", outcome="cancelled", by="call")
        else:
            self._end_ask(cid, "permission", outcome="answered", by="client", option="deny")

    def _ev_parked(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        addr = obj(d.get("address"))
        ask_id = str(addr.get("id"))
        if addr.get("kind") == "input" and ask_id not in self.asks:
            self.asks[ask_id] = "question"
            self._out("question", question=w.question(ask_id, self.inputs.get(ask_id, ("ask_user", {}))[1]))
        elif addr.get("kind") == "effect" and ask_id not in self.asks:
            self.asks[ask_id] = "effect"
            name, args = self.inputs.get(ask_id.rpartition(":")[2], ("tool", {}))
            options = w.effect_options()
            self.options[ask_id] = options
            label = f"Did {t.label_of(name, args)} take effect?"
            self._out("permission", permission={"id": ask_id, "tool": label, "options": options})

    def _plan_from_todos(self, seq: int, todos: list[JsonObj]) -> None:
        """A todo list written in plan mode is the agent's plan: it opens `plan{id: plan-<seq>}`
        (a newer list supersedes an open one: that one ends `cancelled` by `call`)."""
        if self.mode != "plan" or not todos:
            return
        for ask_id, kind in list(self.asks.items()):
            if kind == "plan":
                self._end_ask(ask_id, "plan", outcome="cancelled", by="call")
        plan_id = f"plan-{seq}"
        self.asks[plan_id] = "plan"
        self._out("plan", plan=w.plan(plan_id, self.turn_text, todos))

    def _plan_accepted(self) -> None:
        """Leaving plan mode (an operator's `mode_changed`) accepts the open plan."""
        for ask_id, kind in list(self.asks.items()):
            if kind == "plan":
                self._end_ask(ask_id, "plan", outcome="answered", by="client", accepted=True)

    def _end_question(self, call_id: str, answer: str) -> None:
        chosen = w.chosen_options(self.inputs.get(call_id, ("ask_user", {}))[1], answer)
        self._end_ask(call_id, "question", outcome="answered", by="client", answers={"q1": chosen})

    def _end_ask(
        self,
        ask_id: str,
        kind: str,
        *,
        outcome: str,
        by: str,
        option: str | None = None,
        answers: Any = None,
        accepted: bool = False,
    ) -> None:
        self.asks.pop(ask_id, None)
        options = self.options.get(ask_id, [])
        ask = w.ask(ask_id, kind, outcome=outcome, by=by, option=option, answers=answers, options=options)
        if accepted:
            ask["accepted"] = True
        self._out("ask", ask=ask)
