"""Subagents: a `spawn_agent` call runs a child thread of a named agent and returns its result
(semantics §4 "Tree cancel", "Parking"; §8 "Subagents"; rule 22).

Every step is derived from the parent's log and the child's, so a crash between any two steps
repeats nothing and loses nothing:
1. `agent_spawned{call_id, child_thread_id, agent_name, mode, isolation, budget?}` on the parent
   (`isolation`: the call's, default `none`; what each value means: `engine.isolation`). The
   child's id is minted here and is durable before the child exists.
2. The child: header + `thread_started{…, parent{thread_id, branch_id, event_id: the
   agent_spawned, relation: subagent}}` + `user_input{source: parent_agent, text: the task,
   budget?: the child budget}` in one transaction (an isolation that copies the parent's
   workspace puts the child's first `snapshot` between them; `new_thread.start_thread`: a thread id that
   exists is a child already created), then its run step is enqueued (its own branch, so its own
   FIFO group). A parent step that finds the spawn call pending and no child thread (a crash
   between 1 and 2) creates it; every waiting step re-enqueues the child (deduplicated).
3. While the child runs the parent's step waits (it ends `parked`, appending nothing); it wakes
   the child again only while the child hasn't started (a lost enqueue). Whenever a child's step
   settles (its turn done, or parked) it wakes its parent (`notify_parent`); a lost wake is
   repeated by the redelivered child step. A waiting step wakes nobody, so no two steps wake each
   other in a loop.
4. A child that parks parks its parent: `parked{address:{kind: child, id: child_thread_id},
   reason: the child's}`; once the child is no longer parked: `resumed{address, cause_event_id:
   the agent_spawned}` (`child_resumed`).
5. A child whose run ended (its turn completed, nothing parked): `agent_finished{child_thread_id,
   status, usage, output_ref}` and the call's `tool_result` in one append, with the parent's
   `snapshot` of its workspace when a `shared_sandbox` / `worktree` child's changes come back
   (exactly once: the fold refuses a second agent_finished, rule 22, and the call is no longer
   pending).

Tree cancel (`cancel_spawn`): a pending spawn call is run to the child's end first. The parent's
barrier is copied to the unfinished child as `cancel_requested{scope: tree, reason: "ancestor
cancelled"}` (actor host, principal = the canceller), the child is woken and the parent waits;
the child's end gives agent_finished and the call result, then the parent's `cancelled` and
`turn_completed{cancelled}` (`engine.cancel`). The child cancels its own children the same way.
"""

from __future__ import annotations

from typing import Any

from ..core.budgets import unenforceable
from ..core.canonical import new_uuid7
from ..core.fold import Call, Fold, epoch_settings
from ..store.records import AlreadyExists
from ..writer import Draft, View
from .bindings import composition_for
from .isolation import ISOLATIONS, base_snapshot, write_back
from .loop import HOST, StepBase, result

CHILD_REASON = "ancestor cancelled"
END_STATUS = {"end_turn": "completed", "cancelled": "cancelled", "budget_exhausted": "budget_exhausted"}
NEVER_STARTED = "cancelled: the child was cancelled before it started"
BACKGROUND_PREVIEW = "Started {agent} in the background (thread {child}); its result arrives later."


class Subagents(StepBase):
    # ------------------------------------------------------------------ spawn
    def spawn(self, view: View, call: Call) -> str | None:
        """An allowed spawn_agent call: `agent_spawned` (the child is created by the next
        decision, `await_child`), or an error result when the child cannot be started."""
        f = view.fold
        binding = composition_for(self.ctx, f, call.name) or {}
        name = str(call.input.get("agent", ""))
        agent = (self.ctx.agents or {}).get(name)
        problem = None
        if name not in binding.get("agents", ()) or agent is None:
            problem = f"Agent {name!r} is not one this agent may spawn here."
        budget = call.input.get("budget")
        if problem is None and budget and agent is not None:
            started = agent.thread_started()
            settings = epoch_settings({"type": "thread_started", "data": started}) or {}
            bad = unenforceable(budget, started["policy"], [settings, *agent.fallback_settings()])
            if bad:
                problem = f"budget_unenforceable: {', '.join(bad)} has no per-attempt bound under {name}."
        isolation = call.input.get("isolation", "none")
        if problem is None and isolation not in ISOLATIONS:
            problem = f"invalid_argument: isolation is one of {', '.join(ISOLATIONS)}."
        if problem is not None:
            self.append(view, [result(call.call_id, problem, "not_executed", True)])
            return None
        background = call.input.get("background") is True
        data: dict[str, Any] = {
            "agent_name": name,
            "call_id": call.call_id,
            "child_thread_id": new_uuid7(),
            "isolation": isolation,
            "mode": "background" if background else "foreground",
        }
        if budget:
            data["budget"] = budget
        drafts = [Draft("agent_spawned", data, HOST)]
        if background:  # the turn goes on; the child's end is the late result (engine.deferred)
            text = BACKGROUND_PREVIEW.format(agent=name, child=data["child_thread_id"])
            drafts.append(result(call.call_id, text, "deferred", False))
        self.append(view, drafts)
        return None

    def child_view(self, tenant: str, child_thread_id: str) -> View | None:
        thread = self.ctx.stores.threads.get_thread(tenant, child_thread_id)
        return None if thread is None else self.ctx.writer.load(thread.main_branch_id)

    def create_child(self, view: View, spawned: dict[str, Any], prompt: str) -> View:
        """Step 2: the child thread with its task, then its first run step."""
        d = spawned["data"]
        agent = (self.ctx.agents or {})[d["agent_name"]]
        from ..new_thread import start_thread, started_by

        started = started_by(agent, spawned, "subagent")
        task: dict[str, Any] = {"source": "parent_agent", "text": prompt}
        if "budget" in d:
            task["budget"] = d["budget"]

        branch_id = new_uuid7()
        drafts = [Draft("user_input", task, on_behalf(view.fold))]
        copy = base_snapshot(self.ctx.sandbox, view.fold, spawned, branch_id, self.ctx.clock())
        try:
            start_thread(
                self.ctx.stores,
                self.ctx.writer,
                agent,
                tenant=view.record.tenant,
                thread_id=d["child_thread_id"],
                branch_id=branch_id,
                now_ms=self.ctx.clock(),
                started=started,
                drafts=drafts if copy is None else [copy, *drafts],
            )
        except AlreadyExists:  # created by a step that died before it could say so
            child = self.child_view(view.record.tenant, d["child_thread_id"])
            assert child is not None
            return child
        return self.ctx.writer.load(branch_id)

    # ------------------------------------------------------------------ waiting
    def await_child(self, view: View, call: Call, spawned: dict[str, Any]) -> str | None:
        """A spawn call whose agent_spawned is durable: create the child if missing, then finish
        the call once the child ended, park on it while it is parked, else wait."""
        f = view.fold
        child_id = spawned["data"]["child_thread_id"]
        child = self.child_view(view.record.tenant, child_id)
        if child is None and spawned["data"]["agent_name"] not in (self.ctx.agents or {}):
            # undeployed between agent_spawned and the child's creation: it never starts
            data = {
                "child_thread_id": child_id,
                "status": "failed",
                "usage": {"input_tokens": 0, "output_tokens": 0},
            }
            text = f"failed: agent {spawned['data']['agent_name']} is not deployed here"
            self.append(
                view, [Draft("agent_finished", data, HOST), result(call.call_id, text, "executed", True)]
            )
            return None
        if child is None:
            child = self.create_child(view, spawned, str(call.input.get("prompt", "")))
        if self.finish_if_ended(view, call, child):
            return None
        cf = child.fold
        if cf.parked and ("child", child_id) not in f.parked:
            reasons = [child_park_reason(cf, kind, ident) for kind, ident in cf.parked]
            park = {"address": {"id": child_id, "kind": "child"}, "reason": reasons[0]}
            self.append(view, [Draft("parked", park, HOST)])
            return None
        if cf.turn_open and cf.turn.last_model is None:  # not started: (re-)wake it (a lost enqueue)
            self.wake(child.branch_id, "spawned")
        return "parked"

    def finish_if_ended(self, view: View, call: Call, child: View) -> bool:
        """Step 5 when the child's run ended: agent_finished + the call's result (one append;
        a background child's is its `tool_result_late`, the placeholder stays)."""
        cf = child.fold
        if cf.turn_open or cf.parked or not cf.turns_completed:
            return False
        status, text = child_outcome(cf)
        isolation = str(view.fold.spawned[call.call_id]["data"].get("isolation", "none"))
        back, note = write_back(self.ctx.sandbox, view, child, isolation, status, self.ctx.clock())
        text += note
        ref = self.ctx.artifacts.put(text.encode("utf-8"), "text/plain")
        data = {
            "child_thread_id": child.thread_id,
            "output_ref": ref,
            "status": status,
            "usage": usage_of(cf),
        }
        preview = text if status == "completed" else f"{status}: {text}"
        closing = result(call.call_id, preview, "executed", status != "completed")
        if call.call_id in view.fold.running:
            closing = Draft(
                "tool_result_late", {k: v for k, v in closing.data.items() if k != "origin"}, HOST
            )
        self.append(view, [Draft("agent_finished", data, HOST), closing, *([back] if back else [])])
        return True

    def child_resumed(self, view: View, child_id: str) -> str | None:
        """The cause of a parent's `resumed` for its child park (the agent_spawned), once the
        child is no longer parked; None while it is."""
        f = view.fold
        spawned = next((ev for ev in f.spawned.values() if ev["data"]["child_thread_id"] == child_id), None)
        if spawned is None:
            return None
        child = self.child_view(view.record.tenant, child_id)
        if child is not None and child.fold.parked:
            return None
        return str(spawned["event_id"])

    def notify_parent(self, f: Fold) -> None:
        """A child's step settled (`f`: its last view): wake the parent that waits on it. Only a
        settled child (its turn done, or parked) wakes anyone: a child that is itself waiting on
        its own child stays quiet, so no two waiting steps wake each other. Best effort: a lost
        wake is repeated by this step's redelivery."""
        if f.turn_open and not f.parked:
            return
        parent = (f.started or {}).get("parent")
        if isinstance(parent, dict) and parent.get("relation") == "subagent":
            self.wake(str(parent["branch_id"]), "child_settled")

    def wake(self, branch_id: str, reason: str) -> None:
        if self.ctx.steps is None:
            return
        try:
            self.ctx.steps.enqueue(branch_id, reason=reason)
        except Exception:  # noqa: BLE001 - the log holds the state; a later step wakes it again
            pass

    # ------------------------------------------------------------------ tree cancel
    def cancel_spawn(self, view: View, call: Call, cancel: dict[str, Any]) -> str | None:
        """A pending spawned call under a cancel barrier: run it to the child's end first."""
        spawned = view.fold.spawned[call.call_id]
        child = self.child_view(view.record.tenant, spawned["data"]["child_thread_id"])
        if child is None:  # agent_spawned, but the child never started: nothing ran
            data = {
                "child_thread_id": spawned["data"]["child_thread_id"],
                "status": "cancelled",
                "usage": {"input_tokens": 0, "output_tokens": 0},
            }
            closing = result(call.call_id, NEVER_STARTED, "executed", True)
            if call.call_id in view.fold.running:  # a background child: its late result
                closing = Draft(
                    "tool_result_late", {k: v for k, v in closing.data.items() if k != "origin"}, HOST
                )
            self.append(view, [Draft("agent_finished", data, HOST), closing])
            return None
        if self.finish_if_ended(view, call, child):
            return None
        if not child.fold.last_cancel_seq:
            principal = cancel["actor"].get("principal")
            actor: dict[str, Any] = {"kind": "host", **({"principal": principal} if principal else {})}
            barrier = Draft("cancel_requested", {"reason": CHILD_REASON, "scope": "tree"}, actor)
            self.ctx.writer.append(child.branch_id, [barrier])  # a control: the writer epoch
        self.wake(child.branch_id, "cancel")
        return "parked"


def on_behalf(f: Fold) -> dict[str, Any]:
    """The actor of a child's (or handoff target's) input: the host, for the principal whose run
    started the parent's turn."""
    opener = f.turn.opener or {}
    principal = (opener.get("actor") or {}).get("principal")
    return {"kind": "host", **({"principal": principal} if principal else {})}


def child_park_reason(cf: Fold, kind: str, ident: str) -> str:
    for ev in reversed(cf.events):
        if ev["type"] == "parked" and ev["data"]["address"] == {"id": ident, "kind": kind}:
            return str(ev["data"]["reason"])
    return "awaiting_approval"


def child_outcome(cf: Fold) -> tuple[str, str]:
    """(agent_finished.status, its text) of a child whose turn completed: the final answer, or
    what ended it."""
    last = next((ev for ev in reversed(cf.events) if ev["type"] == "turn_completed"), None)
    reason = str((last or {}).get("data", {}).get("reason", "error"))
    status = END_STATUS.get(reason, "failed")
    if cf.status() == "cancelled":
        status = "cancelled"
    if status != "completed":
        return status, reason
    model = cf.turn.last_model or {}
    parts = model.get("data", {}).get("content") or []
    text = "".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")
    return status, text or "(no text)"


def usage_of(cf: Fold) -> dict[str, int | None]:
    """The child's aggregate usage (unknown, null, once any response's usage was unknown)."""
    if cf.usage_unknown:
        return {"input_tokens": None, "output_tokens": None}
    return {"input_tokens": cf.usage_in, "output_tokens": cf.usage_out}
