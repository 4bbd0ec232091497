"""AG-UI interrupts, the park/resume half of the AG-UI mapper (`agui`), as a mixin of
`AgUiMapper`: an open park is an Interrupt (`id` = challenge id, ask_user call id or effect key;
its `responseSchema` = the body our route takes to answer it); the event group that leaves a
park open ends the AG-UI run (the mapper's `_on_event`); what resolves it is collected as the
`input.resume` answers of the continuation run that `_active` opens (`runId` =
`<run_id>:<seq>`), a cancel answering every open one `cancelled`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import agui_wire as w
from . import tools as t
from .event_data import engine_rules, obj
from .frames import JsonObj, rfc3339


class Interrupts:
    # The mapper's state these methods share (set in AgUiMapper.__init__ / Mapper).
    thread_id: str
    run_id: str | None
    ag_run: JsonObj | None
    suspended: bool
    parks: dict[tuple[str, str], JsonObj]
    resume: list[JsonObj]
    cancelling: bool
    calls: dict[str, tuple[str, dict[str, Any]]]
    challenges: dict[str, JsonObj]
    _rules: Any
    _seq: int | None

    def _start(self, run_id: str, input: JsonObj) -> None:
        raise NotImplementedError  # AgUiMapper's

    def _active(self) -> bool:
        """Make sure an AG-UI run is open (a continuation after an interrupt); False when the
        run has ended or not begun, and nothing may be sent."""
        if self.ag_run is not None:
            return True
        if not self.suspended or self.run_id is None or self._seq is None:
            return False
        resume = list(self.resume)
        if self.cancelling:
            done = {r["interruptId"] for r in resume}
            resume += [
                {"interruptId": i["id"], "status": "cancelled"}
                for i in self.parks.values()
                if i["id"] not in done
            ]
        run_id = f"{self.run_id}:{self._seq}"
        self._start(
            run_id, {"threadId": self.thread_id, "runId": run_id, "messages": [], "resume": resume or None}
        )
        self.suspended = False
        self.resume = []
        return True

    def _ev_parked(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        addr = obj(d.get("address"))
        kind, pid = str(addr.get("kind")), str(addr.get("id"))
        if not self._active():
            return
        self.parks[(kind, pid)] = self._interrupt(kind, pid, d)

    def _ev_resumed(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        addr = obj(d.get("address"))
        self.parks.pop((str(addr.get("kind")), str(addr.get("id"))), None)
        if not self.parks:
            self._active()

    def _interrupt(self, kind: str, pid: str, d: Mapping[str, Any]) -> JsonObj:
        expires = rfc3339(d.get("expires_at"))
        if kind == "approval":
            ch = self.challenges.get(pid, {})
            call_id = str(ch.get("call_id", ""))
            name, args = self.calls.get(call_id, ("tool", {}))
            rules = self._rules(name, args) if self._rules else engine_rules(name, args)
            return w.interrupt(
                pid,
                kind,
                message=f"Allow {t.label_of(name, args)}?",
                tool_call_id=call_id or None,
                schema=w.approval_schema(rules),
                expires=expires or rfc3339(ch.get("expires_at")),
            )
        if kind == "input":
            args = self.calls.get(pid, ("ask_user", {}))[1]
            message = str(args.get("question", "")) or None
            return w.interrupt(
                pid, kind, message=message, tool_call_id=pid, schema=w.answer_schema(args), expires=expires
            )
        if kind == "effect":
            call_id = pid.rpartition(":")[2]
            name, args = self.calls.get(call_id, ("tool", {}))
            return w.interrupt(
                pid,
                "effect_unknown",
                message=f"Did {t.label_of(name, args)} take effect?",
                tool_call_id=call_id,
                schema=w.resolution_schema(),
                expires=expires,
            )
        return w.interrupt(pid, kind, expires=expires)

    def _answered(self, interrupt_id: str, payload: JsonObj) -> None:
        """An interrupt's answer: it joins the continuation's `input.resume` and closes its park
        at once. The `resumed` that pops the park comes after the answer (for a question, after
        its tool_result, which already opens the continuation run): a park left open until then
        would end that run with an interrupt for the very park its resume answers."""
        self.parks = {k: i for k, i in self.parks.items() if i["id"] != interrupt_id}
        self.resume = [r for r in self.resume if r["interruptId"] != interrupt_id]
        self.resume.append({"interruptId": interrupt_id, "status": "resolved", "payload": payload})

    def _ev_approval_requested(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        self.challenges[str(d.get("challenge_id"))] = dict(d)

    def _ev_approval_granted(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        self._answered(str(d.get("challenge_id")), {"decision": "grant"})

    def _ev_approval_denied(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        payload: JsonObj = {"decision": "deny"}
        if d.get("reason"):
            payload["reason"] = d["reason"]
        self._answered(str(d.get("challenge_id")), payload)

    def _ev_permission_rule_added(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        for r in self.resume:
            if r["interruptId"] == d.get("challenge_id"):
                r["payload"] = {**r["payload"], "remember_rule": d.get("rule")}

    def _ev_effect_resolved(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        key = next(
            (p for (k, p) in self.parks if k == "effect" and p.endswith(":" + str(d.get("call_id")))), None
        )
        if key is not None:
            self._answered(key, {"resolution": d.get("outcome")})

    def _ev_cancel_requested(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        self.cancelling = True
