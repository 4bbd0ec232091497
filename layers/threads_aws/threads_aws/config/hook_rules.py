"""The agents file's `hooks` (`{"before_tool": [rules]}`), checked at load; `engine.hooks` runs them."""

from __future__ import annotations

from typing import Any

from ..core.errors import LogError
from .rules import Rule

DECISIONS = ("allow", "ask", "deny", "guide", "annotate")
NEEDS_TEXT = ("deny", "guide", "annotate")


def hook_errors(where: str, hooks: Any) -> list[str]:
    """The problems of an agent's `hooks` (validated with the agents file)."""
    if not isinstance(hooks, dict) or set(hooks) - {"before_tool"}:
        return [f"{where}: hooks is {{before_tool: [rules]}}"]
    rules = hooks.get("before_tool", [])
    if not isinstance(rules, list):
        return [f"{where}: hooks.before_tool must be a list"]
    errs = []
    for i, r in enumerate(rules):
        w = f"{where}: hooks.before_tool[{i}]"
        if not isinstance(r, dict) or set(r) - {"match", "decision", "text"} or "match" not in r:
            errs.append(f"{w}: is {{match, decision, text?}}")
            continue
        try:
            Rule.parse(r["match"])
        except LogError:
            errs.append(f"{w}: match is not a permission rule: {r['match']!r}")
        if r.get("decision") not in DECISIONS:
            errs.append(f"{w}: decision must be one of {', '.join(DECISIONS)}")
        text = r.get("text")
        if r.get("decision") in NEEDS_TEXT and not (isinstance(text, str) and text.strip()):
            errs.append(f"{w}: a {r.get('decision')} rule needs its text")
    return errs
