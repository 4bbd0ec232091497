"""The permission rule grammar (semantics §4 "Permissions"): `Tool(specifier)`.

The tool part may end in `*` (a prefix of the tool name). A specifier matches the call's subject
(`command`, else `file_path`, `path`, `url`): exactly, or by prefix when it ends in `:*` or `*`.
A rule with a specifier never matches a call without a subject. Parsed here, below the engine,
so the agents file's `permissions` and hook rules are checked without loading the worker.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..core.errors import LogError

MODES = ("plan", "dont_ask", "default", "accept_edits", "bypass")
RULE = re.compile(r"^([a-z][a-z0-9_]{0,127})(\*?)(?:\((.+)\))?$", re.DOTALL)
SUBJECT_KEYS = ("command", "file_path", "path", "url")


@dataclass(frozen=True)
class Rule:
    text: str
    tool: str
    prefix: bool
    specifier: str | None

    @classmethod
    def parse(cls, text: str) -> Rule:
        m = RULE.match(text) if isinstance(text, str) else None
        if m is None:
            raise LogError("permission_rule_invalid", None, f"not a permission rule: {text!r}")
        return cls(text, m.group(1), bool(m.group(2)), m.group(3))

    def matches(self, tool: str, args: dict[str, Any]) -> bool:
        if not (tool.startswith(self.tool) if self.prefix else tool == self.tool):
            return False
        if self.specifier is None:
            return True
        subject = subject_of(args)
        if subject is None:
            return False
        spec = self.specifier
        if spec.endswith(":*"):
            return subject == spec[:-2] or subject.startswith(spec[:-2] + " ")
        if spec.endswith("*"):
            return subject.startswith(spec[:-1])
        return subject == spec


def subject_of(args: dict[str, Any]) -> str | None:
    for k in SUBJECT_KEYS:
        v = args.get(k)
        if isinstance(v, str):
            return v
    return None


