"""Calls: each tool_call the model made, from its permission decision to its result.

A call without a decision gets one (`permission_decision`, from the pinned policy, the thread's
remembered rules and the mode); `deny` closes it `denied`; `ask` opens an approval challenge and
parks (`approval_requested` + `parked` + its approvals row, one transaction) until an approver
decides; `ask_user` parks on a question (with its questions row) until it is answered. An
allowed read-only call runs and records its result in one append (a lost race may run it
again); an effectful one goes through `effects`.
"""

from __future__ import annotations

from itertools import takewhile
from typing import Any

from ..core.ask_user import ambiguous_options
from ..core.canonical import canonical_hash, new_uuid7
from ..core.fold import Call
from ..sandbox import stubs
from ..store.approvals import ApprovalRow
from ..store.questions import QuestionRow
from ..writer import Draft, View
from .bindings import composition_for, executor_for, pinned_agent
from .deferred import Deferred
from .handoff import Handoff, under_ceiling
from .hooks import before_tool, gate
from .loop import HOST, RECOVERY, TOOL, result
from .parallel import Parallel, candidates_after, group_at
from .parks import arm_escalation, park_ttl_ms
from .permissions import Decision, PermissionEngine, category_of, suggested_rules
from .subagents import Subagents
from .team import TEAM_TOOLS, Team
from .tools import Executor, ToolContext, ToolOutput

MAX_DEDUP_RESENDS = 3  # re-sends inside a dedup window after unknown outcomes; then a human decides


class Calls(Deferred, Parallel, Subagents, Handoff, Team):
    def advance_call(self, view: View, call: Call) -> str | None:
        f = view.fold
        spawned = f.spawned.get(call.call_id)
        if spawned is not None:  # its child exists or is being created (engine.subagents)
            return self.await_child(view, call, spawned)
        if f.handoff is not None and f.handoff["data"]["call_id"] == call.call_id:
            return self.finish_handoff(view, call)  # engine.handoff
        entry = f.effects.get(call.effect_key)
        if entry is not None:
            if entry["status"] == "unknown":
                if view.record.stubs_sha256 is not None and stubs.is_external(call):
                    # Stub mode: nothing mediated goes live, so a begun call never left.
                    data = {"by": "adapter", "call_id": call.call_id, "outcome": "not_sent"}
                    self.append(view, [Draft("effect_resolved", data, RECOVERY)])
                elif self.dedup_covers(f, call) and call.attempt < MAX_DEDUP_RESENDS:
                    data = {"by": "provider_dedup", "call_id": call.call_id, "outcome": "safe_to_retry"}
                    self.append(view, [Draft("effect_resolved", data, RECOVERY)])
                elif not self.reconcile_tool(view, call, executor_for(self.ctx, f, call.name, self.step_mcp)):
                    self.append(view, [self.park_effect(call)])
                return None
            settled = self.settled_result(f, call)
            if settled is not None:
                self.append(view, [settled])
                return None
            # resolved as not done / safe to retry: dispatch again under the same key
            return self.dispatch(view, call, attempt=call.attempt + 1)
        if call.decision is None:
            # the concurrent calls after it are decided together, so they can run as one group
            drafts = [d for c in candidates_after(self.ctx, f, call) for d in self.gate_drafts(view, c)]
            self.append(view, drafts)
            return None
        if call.decision == "deny":
            self.append(
                view, [result(call.call_id, f"Permission denied for tool {call.name}.", "denied", True)]
            )
            return None
        if call.decision == "ask":
            return self.after_ask(view, call)
        group = group_at(self.ctx, f, call)
        if view.record.stubs_sha256 is not None:  # stub mode: external calls answered one by one
            group = list(takewhile(lambda c: not stubs.is_external(c), group))
        if len(group) > 1:
            self.run_group(view, group)  # the parallel read-only group (engine.parallel)
            return None
        return self.dispatch(view, call, attempt=1)

    def step_mcp(self) -> Any:
        """This step's MCP connections and listings (`mcp_tools.StepMcp`), made on first use and
        closed by `close_mcp` when the step ends."""
        mcp = self.__dict__.get("_mcp")
        if mcp is None:
            mcp = self.__dict__["_mcp"] = self.ctx.mcp()
        return mcp

    def close_mcp(self) -> None:
        mcp = self.__dict__.pop("_mcp", None)
        if mcp is not None:
            mcp.close()

    def sync_mcp_tools(self, view: View) -> bool:
        """Before a model request: the pinned agent's MCP tool lists, re-listed once per step;
        a change is appended as `tools_changed` first (`mcp_tools.sync_tools`)."""
        agent = pinned_agent(self.ctx, view.fold)
        if agent is None or not agent.mcp_servers:
            return False
        from .mcp_tools import sync_tools

        draft = sync_tools(self.step_mcp(), agent, list(view.fold.tools.values()))
        if draft is None:
            return False
        self.append(view, [draft])
        return True

    def gate_drafts(self, view: View, call: Call | dict[str, Any]) -> list[Draft]:
        """What gates a call before it runs (a Call, or a tool_call's data being recorded): its
        `before_tool` hook decision, if a hook rule matches, then its `permission_decision`."""
        call_id, name, args = (
            (call.call_id, call.name, call.input)
            if isinstance(call, Call)
            else (call["call_id"], call["name"], call["input"])
        )
        decision = self.decision_for(view, name, args)
        rules = before_tool(pinned_agent(self.ctx, view.fold))
        if not rules:
            return [Draft("permission_decision", decision.data(call_id), HOST)]
        return gate(rules, call_id, name, args, decision)  # hook_decision first (engine.hooks)

    def after_ask(self, view: View, call: Call) -> str | None:
        """An `ask` call: challenge it, wait on its challenge, or act on the decision."""
        f = view.fold
        ch_id, ch = next(((k, c) for k, c in f.challenges.items() if c.call_id == call.call_id), (None, None))
        if ch is None or ch_id is None:
            return self.request_approval(view, call)
        if not ch.consumed:  # resumed without a decision: wait on it again
            park = {"address": {"id": ch_id, "kind": "approval"}, "reason": "awaiting_approval"}
            self.append(view, [Draft("parked", park, HOST)])
            return None
        if not call.approved:
            self.append(view, [result(call.call_id, "The approver denied this call.", "denied", True)])
            return None
        return self.dispatch(view, call, attempt=1)

    def decision_for(self, view: View, name: str, args: dict[str, Any]) -> Decision:
        f = view.fold
        spec = f.tools.get(name)
        mode = f.mode
        runnable = (
            executor_for(self.ctx, f, name, self.step_mcp)
            or composition_for(self.ctx, f, name)
            or name in TEAM_TOOLS  # run by the step itself (engine.team)
        )
        if spec is None or (name != "ask_user" and runnable is None):
            return Decision("deny", "default", None, mode)
        schema = spec.get("input_schema")
        from ..core.output_schema import validates  # compiled lazily: keeps the worker's cold start small

        if isinstance(schema, dict) and not validates(schema, args):
            return Decision("deny", "default", None, mode)
        engine = PermissionEngine(f.policy.get("permissions"), f.thread_rules)
        category = category_of(spec["effect_class"])
        own = engine.decide(name, args, category=category, mode=mode)
        return under_ceiling(self.ctx, f, name, args, category, own)  # a handoff target's sources

    def request_approval(self, view: View, call: Call) -> str | None:
        now = self.ctx.clock()
        rec = view.record
        row = ApprovalRow(
            challenge_id=new_uuid7(),
            tenant=rec.tenant,
            thread_id=rec.thread_id,
            branch_id=self.branch_id,
            call_id=call.call_id,
            args_hash=canonical_hash(call.input),
            expires_at=now + park_ttl_ms(self.ctx, view.fold, "approval"),
            tool=call.name,
            input=call.input,
            suggested_rules=suggested_rules(call.name, call.input),
            created_at=now,
        )
        req = {
            "args_hash": row.args_hash,
            "call_id": call.call_id,
            "challenge_id": row.challenge_id,
            "expires_at": row.expires_at,
        }
        park = {
            "address": {"id": row.challenge_id, "kind": "approval"},
            "expires_at": row.expires_at,
            "reason": "awaiting_approval",
        }
        drafts = [Draft("approval_requested", req, HOST), Draft("parked", park, HOST)]
        arm_escalation(self.ctx, self.branch_id, row.expires_at)  # before the park (engine.parks)
        self.append(view, drafts, lambda v, ls: [self.ctx.stores.approvals.open(row)])
        return None

    def ask_user(self, view: View, call: Call) -> str | None:
        dup = ambiguous_options(call.input)
        if dup:  # §ask_user: an answer could match two options; the call is invalid, never parked
            text = (
                f"Invalid ask_user call: the options {dup!r} repeat another option "
                "(ignoring case and surrounding spaces)."
            )
            self.append(view, [result(call.call_id, text, "not_executed", True)])
            return None
        now = self.ctx.clock()
        rec = view.record
        opener = view.fold.turn.opener  # the turn is open: its call is pending
        row = QuestionRow(
            tenant=rec.tenant,
            thread_id=rec.thread_id,
            branch_id=self.branch_id,
            call_id=call.call_id,
            input=call.input,
            expires_at=now + park_ttl_ms(self.ctx, view.fold, "question"),
            asked_by=(opener or {}).get("actor", {}).get("principal"),
            created_at=now,
        )
        park = {
            "address": {"id": call.call_id, "kind": "input"},
            "expires_at": row.expires_at,
            "reason": "awaiting_input",
        }
        arm_escalation(self.ctx, self.branch_id, row.expires_at)  # before the park (engine.parks)
        self.append(view, [Draft("parked", park, HOST)], lambda v, ls: [self.ctx.stores.questions.open(row)])
        return None

    def dispatch(self, view: View, call: Call, *, attempt: int) -> str | None:
        if call.name == "ask_user":
            return self.ask_user(view, call)
        composed = composition_for(self.ctx, view.fold, call.name)
        if composed is not None:  # recorded by its own events, never an effect
            if view.record.stubs_sha256 is not None:  # stub mode: no live child or target thread
                self.stubbed_read(view, call)
                return None
            return self.spawn(view, call) if composed["kind"] == "spawn" else self.hand_off(view, call)
        executor = executor_for(self.ctx, view.fold, call.name, self.step_mcp)
        if executor is None and call.name in TEAM_TOOLS:  # recorded by its own events (engine.team)
            if view.record.stubs_sha256 is not None:  # stub mode: the lead's log is not ours to write
                self.stubbed_read(view, call)
                return None
            return self.team_call(view, call)
        if executor is None:
            self.append(
                view, [result(call.call_id, f"Tool {call.name} is not available.", "not_executed", True)]
            )
            return None
        if self.deferred(view, call) and view.record.stubs_sha256 is None:
            return self.dispatch_deferred(view, call, attempt=attempt)  # off the turn (engine.deferred)
        readonly = call.effect_class == "read_only"
        rec = view.record
        tc = ToolContext(
            tenant=rec.tenant,
            thread_id=rec.thread_id,
            branch_id=self.branch_id,
            call_id=call.call_id,
            effect_key=None if readonly else call.effect_key,
            attempt=attempt,
            clock=self.ctx.clock,
            stores=self.ctx.stores,
            workspace=view.fold.workspace,
            principal=view.fold.turn.principal,
        )
        if not readonly:
            self.dispatch_effect(call, executor, tc, view)
            return None
        if rec.stubs_sha256 is not None and stubs.is_external(call):  # stub mode: never live
            self.stubbed_read(view, call)
            return None
        with self.heartbeat(view):  # the lease outlives a long tool body
            out = _run(executor, call.input, tc)
        drafts = []
        if call.name == "todo_write" and not out.is_error:
            drafts.append(
                Draft("todos_updated", {"call_id": call.call_id, "todos": call.input["todos"]}, TOOL)
            )
        drafts.append(result(call.call_id, out.text, "executed", out.is_error))
        drafts += [Draft("injected", data, actor) for data, actor in out.injected]  # recalled memory
        self.append(view, drafts)  # a lost race re-decides: a read-only call may run again
        return None


def _run(executor: Executor, args: dict[str, Any], tc: ToolContext) -> ToolOutput:
    try:
        return executor(args, tc)
    except Exception as exc:  # noqa: BLE001 - a read-only tool's failure is its result
        return ToolOutput(f"Error: {exc}", is_error=True)
