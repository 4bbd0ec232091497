"""Handoff: a `handoff` call moves the conversation to a new thread of another agent (semantics
§8 "handoff"; rule 26).

Ordering (derived from the source's log, so a crash anywhere repeats nothing):
1. On the source: `handoff{call_id, to_agent, to_thread_id, forwarded: summary, forwarded_ref}`
   (the target's id minted here, the forwarded text stored as an artifact before the event names
   it). After it the source takes no `user_input`, `steer` or `model_request` (rule 26, the fold).
2. The target: header + `thread_started{…, parent{thread_id, branch_id, event_id: the handoff,
   relation: handoff}}` + `user_input{source: handoff, text: the forwarded text}` in one
   transaction (`new_thread.start_thread`; an existing thread id = already created), then its
   run step (re-enqueued by any later step of the source: a lost enqueue). A channel
   conversation's route moves to the target in the same transaction (`ChannelThreads.move`, one
   conditional update on the source thread; if the route names another thread by then, the
   target is created without it).
3. On the source, one append: the call's `tool_result`, every later pending call closed
   `not_executed`, `turn_completed{handoff}`: the run ends `handed_off` only once its target
   exists, so a client that reads the outcome can read the target at once.
A source step that finds the handoff with its call pending (a crash after 1 or 2) does 2 and 3.

The target's budgets: its own, plus the source's as ancestors (`budget_plan` follows
`thread_started.parent` whatever the relation); its permission decisions are taken under the
source's as a ceiling (`under_ceiling`: the stricter wins); its approvals answer to the root's
approvers (`host.authority` follows the same link).
"""

from __future__ import annotations

from typing import Any

from ..core.canonical import new_uuid7
from ..core.fold import Call, Fold
from ..store.records import AlreadyExists, Companion, CompanionFailed
from ..writer import Draft, View
from .bindings import composition_for
from .context import EngineContext
from .loop import HOST, StepBase, result
from .permissions import Decision, PermissionEngine
from .subagents import on_behalf

NOT_EXECUTED_PREVIEW = "Not executed: the conversation was handed off."
RANK = {"allow": 0, "ask": 1, "deny": 2}
MAX_CEILINGS = 8  # handoffs followed up (a longer chain is a loop or a bug)


def under_ceiling(
    ctx: EngineContext, fold: Fold, name: str, args: dict[str, Any], category: str, own: Decision
) -> Decision:
    """A handoff target's decision under its sources' ceilings (semantics §Permissions): each
    source up the `thread_started.parent{relation: handoff}` chain decides the call under its own
    policy, remembered rules and mode; the stricter decision wins (deny > ask > allow), the
    target's on a tie."""
    out, f = own, fold
    for _ in range(MAX_CEILINGS):
        parent = (f.started or {}).get("parent")
        if not isinstance(parent, dict) or parent.get("relation") != "handoff":
            break
        f = ctx.writer.load(str(parent["branch_id"])).fold
        ceiling = PermissionEngine(f.policy.get("permissions"), f.thread_rules).decide(
            name, args, category=category, mode=f.mode
        )
        if RANK[ceiling.decision] > RANK[out.decision]:
            out = ceiling
    return out


class Handoff(StepBase):
    def hand_off(self, view: View, call: Call) -> str | None:
        f = view.fold
        binding = composition_for(self.ctx, f, call.name) or {}
        name = str(call.input.get("agent", ""))
        source = (f.started or {}).get("agent_name", "")
        if name not in binding.get("agents", ()) or name not in (self.ctx.agents or {}):
            text = f"Agent {name!r} is not one this agent may hand off to here."
            self.append(view, [result(call.call_id, text, "not_executed", True)])
            return None
        message = call.input.get("message")
        forwarded = str(message) if message else f"Handed off from {source}. The user's request: {_asked(f)}"
        ref = self.ctx.artifacts.put(forwarded.encode("utf-8"), "text/plain")
        to_thread = new_uuid7()
        data = {
            "call_id": call.call_id,
            "forwarded": "summary",
            "forwarded_ref": ref,
            "to_agent": name,
            "to_thread_id": to_thread,
        }
        self.append(view, [Draft("handoff", data, HOST)])
        return None

    def finish_handoff(self, view: View, call: Call) -> str | None:
        """Steps 2 and 3: the target (unless it exists), then the source's turn ends."""
        f = view.fold
        assert f.handoff is not None
        self.ensure_target(view)
        d = f.handoff["data"]
        text = f"Handed off to {d['to_agent']} (thread {d['to_thread_id']})."
        drafts = [result(call.call_id, text, "executed", False)]
        drafts += [
            result(cid, NOT_EXECUTED_PREVIEW, "not_executed", True)
            for cid in f.pending
            if cid != call.call_id
        ]
        drafts.append(Draft("turn_completed", {"reason": "handoff"}, HOST))
        self.append(view, drafts)
        return None

    def ensure_target(self, view: View) -> bool:
        """Step 2 when the source handed off and its target doesn't exist yet; True if created."""
        ev = view.fold.handoff
        if ev is None:
            return False
        d = ev["data"]
        tenant = view.record.tenant
        thread = self.ctx.stores.threads.get_thread(tenant, d["to_thread_id"])
        if thread is not None:  # created; wake it again (a lost enqueue, deduplicated if not)
            self._wake_target(thread.main_branch_id)
            return False
        agent = (self.ctx.agents or {}).get(d["to_agent"])
        if agent is None:
            return False  # undeployed since: the handoff stays recorded, its target unstarted
        from ..new_thread import start_thread, started_by

        started = started_by(agent, ev, "handoff")
        text = self.ctx.artifacts.get_ref(d["forwarded_ref"]).decode("utf-8")

        branch_id = new_uuid7()
        move = self._route_move(view, (d["to_thread_id"], branch_id))
        for companions in ([move] if move is not None else []), []:
            try:
                start_thread(
                    self.ctx.stores,
                    self.ctx.writer,
                    agent,
                    tenant=tenant,
                    thread_id=d["to_thread_id"],
                    branch_id=branch_id,
                    now_ms=self.ctx.clock(),
                    started=started,
                    drafts=[Draft("user_input", {"source": "handoff", "text": text}, on_behalf(view.fold))],
                    companions=companions,
                )
                break
            except CompanionFailed:  # the route names another thread now: the target without it
                continue
            except AlreadyExists:
                return False
        self._wake_target(branch_id)
        return True

    def _route_move(self, view: View, to: tuple[str, str]) -> Companion | None:
        """A channel conversation's route moves with the handoff (its latest delivery names it)."""
        ev = next((e for e in reversed(view.fold.events) if e["type"] == "channel_delivery"), None)
        if ev is None:
            return None
        d = ev["data"]
        return self.ctx.stores.channel_threads.move(
            view.record.tenant, d["channel"], d["installation"], d["conversation"], view.thread_id, to
        )

    def _wake_target(self, branch_id: str) -> None:
        if self.ctx.steps is not None:
            try:
                self.ctx.steps.enqueue(branch_id, reason="handoff")
            except Exception:  # noqa: BLE001 - the target's input is durable; a later wake runs it
                pass


def _asked(f: Fold) -> str:
    """The text of the source run's input (the request being handed over)."""
    d: dict[str, Any] = (f.turn.opener or {}).get("data", {})
    if "text" in d:
        return str(d["text"])
    return " ".join(str(p.get("text", "")) for p in d.get("content", []) if p.get("type") == "text")
