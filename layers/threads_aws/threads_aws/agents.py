"""Agents as deployed config (`data/agents.json`, or the file named by $AGENTS_FILE): name,
model, instructions, tools, permissions and approvers. `thread_started` pins the resolved,
secret-free config and its `config_hash`, so a thread keeps running the agent it started with."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from .core.canonical import canonical_hash

DEFAULT_FILE = Path(__file__).resolve().parent / "data" / "agents.json"

# The built-in tools' specs (what the model sees and what decides effect handling). Their
# implementations live in `engine.tools`.
BUILTIN_TOOLS: dict[str, dict[str, Any]] = {
    "ask_user": {
        "name": "ask_user",
        "description": "Ask the user a question and wait for the answer.",
        "effect_class": "read_only",
        "input_schema": {
            "additionalProperties": False,
            "properties": {
                "multi_select": {"type": "boolean"},
                "options": {"items": {"type": "string"}, "type": "array"},
                "question": {"type": "string"},
            },
            "required": ["question"],
            "type": "object",
        },
    },
    "todo_write": {
        "name": "todo_write",
        "description": "Replace the agent's todo list.",
        "effect_class": "read_only",
        "input_schema": {
            "additionalProperties": False,
            "properties": {
                "todos": {
                    "items": {
                        "additionalProperties": False,
                        "properties": {
                            "content": {"type": "string"},
                            "id": {"type": "string"},
                            "status": {"enum": ["pending", "in_progress", "completed"]},
                        },
                        "required": ["id", "content", "status"],
                        "type": "object",
                    },
                    "type": "array",
                }
            },
            "required": ["todos"],
            "type": "object",
        },
    },
    "time": {
        "name": "time",
        "description": "The current time (UTC, ISO 8601).",
        "effect_class": "read_only",
        "input_schema": {"additionalProperties": False, "properties": {}, "type": "object"},
    },
    "note": {
        "name": "note",
        "description": "Store a note durably (an effect: needs approval under the default policy).",
        "effect_class": "idempotent",
        "dedup_window_ms": 86_400_000,
        "input_schema": {
            "additionalProperties": False,
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
            "type": "object",
        },
    },
}


@dataclass(frozen=True)
class Agent:
    name: str
    model: dict[str, str]
    model_params: dict[str, Any]
    adapter: dict[str, Any]
    instructions: str
    tools: list[dict[str, Any]]
    permissions: dict[str, Any]
    approvers: list[dict[str, str]] = field(default_factory=list)
    fallback_models: list[dict[str, str]] = field(default_factory=list)

    def policy(self) -> dict[str, Any]:
        perms = {
            "allow": [],
            "allow_bypass": False,
            "ask": [],
            "deny": [],
            "mode": "default",
            "plan_exit_mode": "default",
            "protected_paths": [],
            **self.permissions,
        }
        return {"permissions": perms}

    def resolved(self) -> dict[str, Any]:
        """The secret-free config `config_hash` covers."""
        return {
            "adapter": self.adapter,
            "approvers": self.approvers,
            "fallback_models": self.fallback_models,
            "instructions": self.instructions,
            "model": self.model,
            "model_params": self.model_params,
            "name": self.name,
            "policy": self.policy(),
            "tools": self.tools,
        }

    @property
    def config_hash(self) -> str:
        return canonical_hash(self.resolved())

    def thread_started(self) -> dict[str, Any]:
        return {
            "adapter": self.adapter,
            "agent_name": self.name,
            "config_hash": self.config_hash,
            "instructions": self.instructions,
            "model": self.model,
            "model_params": self.model_params,
            "policy": self.policy(),
            "tools": self.tools,
        }

    def models(self) -> list[dict[str, str]]:
        return [self.model, *self.fallback_models]


def _agent(name: str, raw: dict[str, Any]) -> Agent:
    tools = []
    for t in raw.get("tools", []):
        spec = BUILTIN_TOOLS[t] if isinstance(t, str) else t
        tools.append(spec)
    return Agent(
        name=name,
        model=raw["model"],
        model_params=raw.get("model_params", {}),
        adapter=raw["adapter"],
        instructions=raw["instructions"],
        tools=tools,
        permissions=raw.get("permissions", {}),
        approvers=raw.get("approvers", []),
        fallback_models=raw.get("fallback_models", []),
    )


@lru_cache(maxsize=8)
def _load(path: str) -> dict[str, Agent]:
    raw = json.loads(Path(path).read_text())
    return {name: _agent(name, spec) for name, spec in raw.items()}


def load_agents(path: str | os.PathLike[str] | None = None) -> dict[str, Agent]:
    return _load(str(path or os.environ.get("AGENTS_FILE") or DEFAULT_FILE))
