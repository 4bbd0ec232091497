"""The permission engine (semantics §4 "Permissions").

`decide(...)` answers `Decision(decision, source, rule_id, mode)`, which the worker records as
`permission_decision{call_id, decision, source, mode, rule_id?}`. Evaluation order (the first
that applies wins; precedence among rules is deny > ask > allow):

1. a policy `deny` rule → deny (source `policy`);
2. a thread `deny` rule (`permission_rule_added`) → deny (`thread_rule`);
3. mode `plan`: a tool that isn't read_only → deny (`mode`);
4. mode `bypass` → allow (`mode`);
5. a thread `allow` rule → allow (`thread_rule`): an approver's "allow for this thread" answers
   the policy's own ask, but never opens a deny rule (it is checked after them);
6. a policy `ask` rule → ask (`policy`), or deny (`mode`) under `dont_ask`;
7. a policy `allow` rule → allow (`policy`);
8. no rule: read_only → allow (`default`); an edit under `accept_edits` → allow (`mode`);
   otherwise ask (`default`), or deny (`mode`) under `dont_ask`.

Rules follow `Tool(specifier)`: the tool part may end in `*` (a prefix of the tool name). A
specifier matches the call's subject (`command`, else `file_path`, `path`, `url`): exactly, or
by prefix when it ends in `:*` or `*`. A rule with a specifier never matches a call without a
subject. `rule_id` is the matched rule string.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..config.rules import MODES, Rule
from ..core.errors import LogError


@dataclass(frozen=True)
class Decision:
    decision: str  # allow | ask | deny
    source: str
    rule_id: str | None = None
    mode: str | None = None

    def data(self, call_id: str) -> dict[str, Any]:
        out: dict[str, Any] = {"call_id": call_id, "decision": self.decision, "source": self.source}
        if self.mode is not None:
            out["mode"] = self.mode
        if self.rule_id is not None:
            out["rule_id"] = self.rule_id
        return out


def category_of(effect_class: str) -> str:
    """The engine's call category: read_only, edit (no file tools yet) or other."""
    return "read_only" if effect_class == "read_only" else "other"


def _first(rules: Sequence[Rule], tool: str, args: dict[str, Any]) -> Rule | None:
    for r in rules:
        if r.matches(tool, args):
            return r
    return None


class PermissionEngine:
    def __init__(
        self,
        permissions: dict[str, Any] | None,
        thread_rules: Iterable[tuple[str, str]] = (),
    ) -> None:
        p = permissions or {}
        self.default_mode = p.get("mode", "default")
        self.allow = [Rule.parse(r) for r in p.get("allow", ())]
        self.ask = [Rule.parse(r) for r in p.get("ask", ())]
        self.deny = [Rule.parse(r) for r in p.get("deny", ())]
        self.thread_allow: list[Rule] = []
        self.thread_deny: list[Rule] = []
        for text, decision in thread_rules:
            self.add_thread_rule(text, decision)

    def add_thread_rule(self, text: str, decision: str) -> None:
        (self.thread_deny if decision == "deny" else self.thread_allow).append(Rule.parse(text))

    @classmethod
    def from_events(cls, events: Iterable[dict[str, Any]]) -> PermissionEngine:
        """The engine of a branch: the latest pinned policy plus its thread rules."""
        engine = cls(None)
        for ev in events:
            t = ev.get("type")
            if t == "thread_started":
                engine = cls((ev["data"].get("policy") or {}).get("permissions"))
            elif t == "permission_rule_added":
                engine.add_thread_rule(ev["data"]["rule"], ev["data"]["decision"])
        return engine

    def decide(self, tool: str, args: dict[str, Any], *, category: str, mode: str | None = None) -> Decision:
        mode = mode or self.default_mode
        if mode not in MODES:
            raise LogError("invalid_transition", None, f"unknown permission mode {mode!r}")
        if r := _first(self.deny, tool, args):
            return Decision("deny", "policy", r.text, mode)
        if r := _first(self.thread_deny, tool, args):
            return Decision("deny", "thread_rule", r.text, mode)
        if mode == "plan" and category != "read_only":
            return Decision("deny", "mode", None, mode)
        if mode == "bypass":
            return Decision("allow", "mode", None, mode)
        if r := _first(self.thread_allow, tool, args):
            return Decision("allow", "thread_rule", r.text, mode)
        if r := _first(self.ask, tool, args):
            if mode == "dont_ask":
                return Decision("deny", "mode", r.text, mode)
            return Decision("ask", "policy", r.text, mode)
        if r := _first(self.allow, tool, args):
            return Decision("allow", "policy", r.text, mode)
        if category == "read_only":
            return Decision("allow", "default", None, mode)
        if category == "edit" and mode == "accept_edits":
            return Decision("allow", "mode", None, mode)
        if mode == "dont_ask":
            return Decision("deny", "mode", None, mode)
        return Decision("ask", "default", None, mode)


def suggested_rules(tool: str, args: dict[str, Any]) -> list[str]:
    """Rules an approver may keep for the thread (semantics §4 "remember_rule"): for a non-blank
    bash command `bash(<cmd>)` then `bash(<w1> <w2>:*)`; any other tool just its name."""
    if tool == "bash":
        cmd = args.get("command")
        if isinstance(cmd, str) and cmd.strip():
            out = [f"bash({cmd})"]
            try:
                words = shlex.split(cmd)
            except ValueError:
                return out
            if words:
                prefix = " ".join(words[:2])
                rule = f"bash({prefix}:*)"
                if rule not in out:
                    out.append(rule)
            return out
    return [tool]
