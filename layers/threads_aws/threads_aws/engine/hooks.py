"""`before_tool` hooks: an agent's own rule list (`"hooks": {"before_tool": [...]}` in the agents
file), run on each call the model makes, before its permission decision (semantics.md §4 "Turn
structure": `tool_call`, `hook_decision`, then `permission_decision`).

A rule is `{"match": <permission rule>, "decision": ..., "text"?: str}`; `match` uses the
permission rule grammar (`Tool(specifier)`, `engine.permissions`), and the first matching rule
decides:
- `allow`: no objection; the permission engine decides as without the hook (its deny and ask
  still win: precedence deny > ask > allow);
- `ask`: an approver must grant the call (unless the permission engine denies it);
- `deny`: the call closes `denied`, `text` the reason the model reads;
- `guide`: the contract's "rewrite": the call closes `denied` and `text` tells the model how to
  re-issue it (a recorded `tool_call` input is never changed: it is what the model asked for);
- `annotate`: the call proceeds as without the hook, and `text` is added to the model's context
  as `injected{source: hook, trust: trusted_instruction}` (the agent's operator wrote it).

Ordering: the `hook_decision` is appended in the same transaction as the call's permission
decision (and, for deny/guide, its result), which is the same transaction as the `tool_call`
when the response is recorded: it is durable before the work it gates, and a replay finds the
call decided and never runs the hook again. A call no rule matches records no `hook_decision`
(nothing decided it). A rule list cannot fail, so `failed` is never written here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..config.rules import Rule
from .permissions import Decision

if TYPE_CHECKING:
    from ..writer import Draft

EXTENSION = "agent"  # hook_decision.extension: the agent's own hook list
STRICTNESS = {"allow": 0, "ask": 1, "deny": 2}


@dataclass(frozen=True)
class HookRule:
    index: int
    rule: Rule
    decision: str
    text: str | None


def before_tool(agent: Any) -> list[HookRule]:
    hooks = getattr(agent, "hooks", None) or {}
    return [
        HookRule(i, Rule.parse(r["match"]), r["decision"], r.get("text"))
        for i, r in enumerate(hooks.get("before_tool", []))
    ]


def gate(
    rules: list[HookRule], call_id: str, name: str, args: dict[str, Any], engine: Decision
) -> list[Draft]:
    """A call's hook decision, then its permission decision (and result, when the hook denies)."""
    from ..writer import Draft  # the agents file validates hooks without loading the writer
    from .loop import HOST, result

    hook = next((r for r in rules if r.rule.matches(name, args)), None)
    if hook is None:
        return [Draft("permission_decision", engine.data(call_id), HOST)]
    data: dict[str, Any] = {
        "call_id": call_id,
        "decision": hook.decision,
        "extension": EXTENSION,
        "hook": "before_tool",
    }
    if hook.text:
        data["reason"] = hook.text
    drafts = [Draft("hook_decision", data, HOST)]
    if hook.decision == "annotate":
        injected = {
            "origin": {"id": f"before_tool:{hook.index}", "location": hook.rule.text},
            "source": "hook",
            "text": hook.text,
            "trust": "trusted_instruction",
        }
        drafts.append(Draft("injected", injected, HOST))
    wanted = {"deny": "deny", "guide": "deny", "ask": "ask"}.get(hook.decision, "allow")
    if STRICTNESS[wanted] <= STRICTNESS[engine.decision]:  # the permission engine's is as strict
        return [*drafts, Draft("permission_decision", engine.data(call_id), HOST)]
    decided = {**Decision(wanted, "hook", hook.rule.text, engine.mode).data(call_id)}
    if hook.text:
        decided["reason"] = hook.text
    drafts.append(Draft("permission_decision", decided, HOST))
    if wanted == "deny":
        lead = "Denied by a before_tool hook" if hook.decision == "deny" else "Not run; re-issue the call"
        drafts.append(result(call_id, f"{lead}: {hook.text}", "denied", True))
    return drafts
