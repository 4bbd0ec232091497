"""Agents as deployed config: name, model, instructions, tools, permissions and approvers.
`thread_started` pins the resolved, secret-free config and its `config_hash`, so a thread keeps
running the agent it started with.

Where the agents come from (read once per container, validated at load):
1. `AGENTS_FILE` — a local path (local runs, tests);
2. `AGENTS_S3_URI` — `s3://bucket/key` of an agents file (a deployment's own agents: the
   template parameter `AgentsObject` sets it and grants s3:GetObject on exactly that object);
3. the bundled `data/agents.json` (`demo` needs no key; one example agent per provider).

Validation names every problem at once (`AgentsFileError`): unknown keys, a missing required
key, an unknown provider or adapter, a provider adapter whose name differs from the provider or
whose version it doesn't implement, model_params no adapter maps (max_tokens is required for
anthropic and bedrock), unknown tools, malformed permissions, fallback models or retry policy
(`retry`: any of policy.retry's keys, over engine.retry.DEFAULTS).
Check a file: `python -m threads_aws.agents path/to/agents.json`."""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from .config.adapters import ADAPTER_VERSIONS, MODEL_PARAMS, PROVIDER_ADAPTERS, known_adapters
from .config.retry_defaults import DEFAULTS as RETRY_DEFAULTS
from .core.canonical import canonical_hash
from .core.manifest import ISOLATIONS

DEFAULT_FILE = Path(__file__).resolve().parent / "data" / "agents.json"


# The built-in tools' specs (what the model sees and what decides effect handling). Their
# implementations live in `engine.tools`.
def _obj(required: list[str], **props: Any) -> dict[str, Any]:
    return {"additionalProperties": False, "properties": props, "required": required, "type": "object"}


_STR = {"type": "string"}
_INT = {"minimum": 0, "type": "integer"}
_BOOL = {"type": "boolean"}
# Workspace writes: idempotent by construction (`engine.file_tools`: same key, same base, same
# manifest; content-addressed conditional puts), so a crash after effect_begin settles
# safe_to_retry inside the window instead of parking.
WORKSPACE_DEDUP_WINDOW_MS = 7 * 86_400_000
FILE_TOOLS: dict[str, dict[str, Any]] = {
    "read_file": {
        "description": "Read a UTF-8 file of the workspace (paths relative to /workspace); "
        "offset/limit select lines.",
        "effect_class": "read_only",
        "input_schema": _obj(["path"], limit=_INT, offset=_INT, path=_STR),
    },
    "list_files": {
        "description": "List the workspace's files (path and size), optionally under a directory.",
        "effect_class": "read_only",
        "input_schema": _obj([], path=_STR),
    },
    "glob": {
        "description": "Workspace paths matching a glob (* and ? within a segment, ** across).",
        "effect_class": "read_only",
        "input_schema": _obj(["pattern"], pattern=_STR),
    },
    "grep": {
        "description": "Lines matching a regular expression in the workspace's text files.",
        "effect_class": "read_only",
        "input_schema": _obj(["pattern"], glob=_STR, ignore_case=_BOOL, path=_STR, pattern=_STR),
    },
    "write_file": {
        "description": "Create or overwrite a workspace file with UTF-8 text.",
        "effect_class": "idempotent",
        "dedup_window_ms": WORKSPACE_DEDUP_WINDOW_MS,
        "input_schema": _obj(["path", "content"], content=_STR, path=_STR),
    },
    "exec": {
        "description": "Run a shell command in an isolated sandbox (no network) over a copy of the "
        "workspace; the files it writes or deletes become the workspace's.",
        "effect_class": "idempotent",
        "dedup_window_ms": WORKSPACE_DEDUP_WINDOW_MS,
        "input_schema": _obj(["command"], command=_STR, timeout_ms=_INT),
    },
    "edit_file": {
        "description": "Replace an exact string in a workspace file (it must occur once, "
        "unless replace_all).",
        "effect_class": "idempotent",
        "dedup_window_ms": WORKSPACE_DEDUP_WINDOW_MS,
        "input_schema": _obj(
            ["path", "old_string", "new_string"],
            new_string=_STR,
            old_string=_STR,
            path=_STR,
            replace_all=_BOOL,
        ),
    },
}

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
# The memory tools (engine.memory_tools): the turn principal's memory, per tenant.
MEMORY_TOOLS: dict[str, dict[str, Any]] = {
    "remember": {
        "description": "Remember a text under a key for the user you are talking to (replaces "
        "what the key held; an effect).",
        "effect_class": "idempotent",
        "dedup_window_ms": 86_400_000,
        "input_schema": _obj(["key", "text"], key=_STR, text=_STR),
    },
    "recall": {
        "description": "Recall what you remembered for this user: by key, or the best matches "
        "of a text query (words matched in keys and values). Recalled memories are shown as "
        "untrusted references.",
        "effect_class": "read_only",
        "input_schema": _obj([], key=_STR, query=_STR),
    },
    "forget": {
        "description": "Forget what you remembered under a key for this user (an effect).",
        "effect_class": "idempotent",
        "dedup_window_ms": 86_400_000,
        "input_schema": _obj(["key"], key=_STR),
    },
}
BUILTIN_TOOLS.update({name: {"name": name, **spec} for name, spec in FILE_TOOLS.items()})
BUILTIN_TOOLS.update({name: {"name": name, **spec} for name, spec in MEMORY_TOOLS.items()})
# The team tools (`engine.team`): recorded by their own events in the team lead's log (the root
# of the subagent tree), like todo_write's todos_updated, so read_only (no effect events).
_IDS = {"items": _STR, "type": "array"}
TEAM_TOOLS: dict[str, dict[str, Any]] = {
    "team_task_create": {
        "description": "Add a task to the team's task list; blocked_by names tasks that must be "
        "completed before anyone can claim it.",
        "effect_class": "read_only",
        "input_schema": _obj(
            ["task_id", "subject"], blocked_by=_IDS, description=_STR, subject=_STR, task_id=_STR
        ),
    },
    "team_task_claim": {
        "description": "Claim an open, unclaimed team task whose blockers are all completed.",
        "effect_class": "read_only",
        "input_schema": _obj(["task_id"], task_id=_STR),
    },
    "team_task_update": {
        "description": "Close a task you claimed (completed or failed), or release it to the open pool.",
        "effect_class": "read_only",
        "input_schema": _obj(
            ["task_id", "status"], status={"enum": ["completed", "failed", "released"]}, task_id=_STR
        ),
    },
    "team_message": {
        "description": "Send a message to a teammate: a member id, lead, or * for every member.",
        "effect_class": "read_only",
        "input_schema": _obj(["to", "text"], text=_STR, to=_STR),
    },
    "team_tasks": {
        "description": "The team's task list: each task's id, subject, status, owner and blockers.",
        "effect_class": "read_only",
        "input_schema": _obj([]),
    },
}
BUILTIN_TOOLS.update({name: {"name": name, **spec} for name, spec in TEAM_TOOLS.items()})


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
    # cron schedules that start runs of this agent (schedules.agent_schedules); not part of
    # the pinned config: when it runs is not what it is
    schedules: list[dict[str, str]] = field(default_factory=list)
    limits: dict[str, Any] = field(default_factory=dict)  # resolved policy sections (run limits)
    # Where each non-built-in tool runs (`engine.bindings`): tool name -> {"kind": "lambda",
    # "function", "timeout_ms"}; not model-visible, so not in the pinned ToolSpec, but covered
    # by config_hash (a thread keeps calling the function it started with).
    bindings: dict[str, dict[str, Any]] = field(default_factory=dict)
    # MCP servers (`engine.mcp_tools`): name -> {url, headers?, timeout_ms?, dedup_window_ms?,
    # tools?}; their tools are listed by the worker and pinned with `tools_changed`. Header
    # values are secret references, never secrets, so config_hash covers them safely.
    mcp_servers: dict[str, dict[str, Any]] = field(default_factory=dict)
    # `before_tool` hook rules (`engine.hooks`), covered by config_hash like the bindings
    hooks: dict[str, Any] = field(default_factory=dict)
    # How long an approval challenge / an ask_user question stays open (`expires_at`); past it
    # the park is escalated once (`engine.parks`). None: the host default (24 h).
    approval_ttl_ms: int | None = None
    question_ttl_ms: int | None = None

    def policy(self) -> dict[str, Any]:
        """The runtime policy `thread_started` pins: permissions, `retry` (complete: the
        defaults with the agent's own values over them) and `fallback` (the ModelSettings of
        the fallback models, when there are any)."""
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
        out: dict[str, Any] = {**self.limits, "permissions": perms}
        out["retry"] = {**RETRY_DEFAULTS, **self.limits.get("retry", {})}
        fallback = self.fallback_settings()
        if fallback:
            out["fallback"] = fallback
        return out

    def resolved(self) -> dict[str, Any]:
        """The secret-free config `config_hash` covers (composition keys only when set, so an
        agent without them keeps its hash)."""
        extra: dict[str, Any] = {}
        if self.bindings:
            extra["bindings"] = self.bindings
        if self.mcp_servers:
            extra["mcp_servers"] = self.mcp_servers
        if self.hooks:
            extra["hooks"] = self.hooks
        for key in ("approval_ttl_ms", "question_ttl_ms"):
            if getattr(self, key) is not None:
                extra[key] = getattr(self, key)
        return {
            **extra,
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

    def fallback_settings(self) -> list[dict[str, Any]]:
        """`ModelSettings` of each fallback model, in order (for `settings_changed{fallback}`):
        the fallback's own adapter/model_params if given, else the provider's adapter v1 and the
        agent's model_params. Reasoning parts of another provider can't be sent back, so a
        fallback to a different provider omits them (`omit_prior`); the same provider keeps them."""
        out = []
        for fb in self.fallback_models:
            provider = fb["provider"]
            same_adapter = provider == self.model["provider"]
            default_adapter = (
                self.adapter if same_adapter else {"name": provider, "settings": {}, "version": "1"}
            )
            out.append(
                {
                    "adapter": fb.get("adapter", default_adapter),
                    "model": {"name": fb["name"], "provider": provider},
                    "model_params": fb.get("model_params", self.model_params),
                    "reasoning_carryover": "keep" if same_adapter else "omit_prior",
                }
            )
        return out


class AgentsFileError(ValueError):
    """The agents file is unusable; the message lists every problem found."""


AGENT_KEYS = frozenset(
    {
        "description",
        "model",
        "model_params",
        "adapter",
        "instructions",
        "tools",
        "permissions",
        "approvers",
        "fallback_models",
        "schedules",
        "policy",
        "mcp_servers",
        "subagents",
        "handoffs",
        "hooks",
        "approval_ttl_ms",
        "question_ttl_ms",
    }
)
MAX_PARK_TTL_MS = 30 * 86_400_000  # a park's TTL: at most 30 days
SCHEDULE_KEYS = frozenset({"name", "cron", "timezone", "input", "tenant"})
#: Policy sections an agent may set besides permissions (semantics §Budgets, §8; Policy).
POLICY_KEYS = frozenset({"budget", "models", "currency", "on_unknown_usage", "output", "context", "retry"})
#: `policy.context` is complete or absent: an agent's partial section is completed from these.
CONTEXT_DEFAULTS: dict[str, Any] = {
    "cache_ttl_ms": 300_000,
    "clear_results": {"exclude_tools": [], "keep_recent": 3, "trigger": {"permille": 1000}},
    "compact": {"keep_tail": {"permille": 250}, "max_failures": 3, "trigger": {"permille": 900}},
    "defer_threshold": {"permille": 100},
    "defer_tools": "never",
    "max_output_continuations": 0,
    "reserve_tokens": 0,
    "restore": {"file_tokens": 0, "max_files": 0, "skill_tokens": 0, "skills_total_tokens": 0},
    "server_edits": "disabled",
    "spill": {
        "head_bytes": 2048,
        "request_budget_bytes": 1_048_576,
        "tail_bytes": 2048,
        "threshold_bytes": 65_536,
    },
}
#: The sentence a structured-output agent's instructions end with (native mode: the model
#: learns the schema from its system text, whatever the provider).
OUTPUT_INSTRUCTION = "Answer with one JSON value matching this JSON Schema, and nothing else: "
#: Keys of an agent tool spec beyond the pinned ToolSpec: where it runs (not model-visible).
TOOL_BINDING_KEYS = frozenset({"lambda", "timeout_ms", "deferred"})
#: A deferred (non-blocking) call runs off the turn (engine.deferred), where no human can be
#: asked about an unknown outcome mid-run: its tool is read-only, or idempotent (the runner
#: re-sends under the effect key).
DEFERRED_CLASSES = frozenset({"read_only", "idempotent"})
TOOLSPEC_KEYS = frozenset(
    {"name", "description", "input_schema", "effect_class", "dedup_window_ms", "output_schema", "ends_turn"}
)
EFFECT_CLASSES = frozenset({"read_only", "sandbox_local", "idempotent", "reconcilable", "unguarded"})
_LAMBDA = re.compile(
    r"^(arn:aws[a-z-]*:lambda:[a-z0-9-]+:\d{12}:function:[A-Za-z0-9_-]{1,64}(:[A-Za-z0-9$_-]+)?"
    r"|[A-Za-z][A-Za-z0-9]{0,254})$"
)
REQUIRED = ("model", "adapter", "instructions")
PERMISSION_KEYS = frozenset(
    {"mode", "allow", "ask", "deny", "protected_paths", "allow_bypass", "plan_exit_mode"}
)
NEEDS_MAX_TOKENS = frozenset({"anthropic", "bedrock"})
#: policy.retry keys whose values are integers >= 0 (the others: >= 1, and fallback_scope).
RETRY_ZERO_OK = frozenset({"max_retries", "crash_resends"})
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


def _model_errors(where: str, model: Any, adapter: Any, params: Any) -> list[str]:
    errs: list[str] = []
    if not isinstance(model, dict) or not isinstance(model.get("name"), str) or not model.get("name"):
        errs.append(f"{where}: model needs a non-empty name")
    provider = model.get("provider") if isinstance(model, dict) else None
    if not isinstance(provider, str) or provider not in known_adapters():
        errs.append(f"{where}: unknown provider {provider!r} (known: {', '.join(sorted(known_adapters()))})")
    if adapter is not None:
        if not isinstance(adapter, dict) or not {"name", "version"} <= set(adapter):
            errs.append(f"{where}: adapter needs name and version")
        else:
            name = adapter["name"]
            if name not in known_adapters():
                errs.append(f"{where}: unknown adapter {name!r}")
            elif name in PROVIDER_ADAPTERS and name != provider:
                errs.append(f"{where}: adapter {name!r} must match model.provider {provider!r}")
            elif name in ADAPTER_VERSIONS and str(adapter["version"]) not in ADAPTER_VERSIONS[name]:
                errs.append(f"{where}: adapter {name} has no version {adapter['version']!r} (has 1)")
            if not isinstance(adapter.get("settings", {}), dict):
                errs.append(f"{where}: adapter.settings must be an object")
    if not isinstance(params, dict):
        errs.append(f"{where}: model_params must be an object")
    elif provider in PROVIDER_ADAPTERS:
        unknown = sorted(set(params) - MODEL_PARAMS)
        if unknown:
            errs.append(f"{where}: model_params not mapped by any adapter: {', '.join(unknown)}")
        if provider in NEEDS_MAX_TOKENS and not isinstance(params.get("max_tokens"), int):
            errs.append(f"{where}: {provider} needs model_params.max_tokens (an integer)")
    return errs


def _retry_errors(where: str, retry: Any) -> list[str]:
    if not isinstance(retry, dict):
        return [f"{where}: policy.retry must be an object"]
    errs = [f"{where}: unknown policy.retry key {k!r}" for k in sorted(set(retry) - set(RETRY_DEFAULTS))]
    for k, v in sorted(retry.items()):
        if k == "fallback_scope":
            if v not in ("turn", "thread"):
                errs.append(f"{where}: policy.retry.fallback_scope is turn or thread")
        elif k in RETRY_DEFAULTS and (
            not isinstance(v, int) or isinstance(v, bool) or v < (0 if k in RETRY_ZERO_OK else 1)
        ):
            errs.append(f"{where}: policy.retry.{k} must be an integer >= {0 if k in RETRY_ZERO_OK else 1}")
    return errs


def validate(raw: Any, source: str = "agents file") -> list[str]:
    """Every problem of a parsed agents file, as readable lines (empty = valid)."""
    if not isinstance(raw, dict) or not raw:
        return [f"{source}: must be a non-empty object of agent name -> agent"]
    errs: list[str] = []
    for name, spec in raw.items():
        where = f"{source}: agent {name!r}"
        if not isinstance(spec, dict):
            errs.append(f"{where}: must be an object")
            continue
        errs += [f"{where}: unknown key {k!r}" for k in sorted(set(spec) - AGENT_KEYS)]
        missing = [k for k in REQUIRED if k not in spec]
        errs += [f"{where}: missing key {k!r}" for k in missing]
        if missing:
            continue
        if not isinstance(spec["instructions"], str):
            errs.append(f"{where}: instructions must be a string")
        errs += _model_errors(where, spec["model"], spec["adapter"], spec.get("model_params", {}))
        for t in spec.get("tools", []):
            if isinstance(t, str) and t not in BUILTIN_TOOLS:
                errs.append(f"{where}: unknown tool {t!r} (built in: {', '.join(sorted(BUILTIN_TOOLS))})")
            elif isinstance(t, dict):
                errs += _tool_errors(where, t)
            elif not isinstance(t, str | dict):
                errs.append(f"{where}: a tool is a built-in name or a tool spec")
        perms = spec.get("permissions", {})
        if not isinstance(perms, dict):
            errs.append(f"{where}: permissions must be an object")
        else:
            errs += [f"{where}: unknown permissions key {k!r}" for k in sorted(set(perms) - PERMISSION_KEYS)]
        errs += _schedule_errors(where, spec.get("schedules", []))
        errs += _mcp_errors(where, spec.get("mcp_servers", {}))
        if "hooks" in spec:
            from .config.hook_rules import hook_errors

            errs += hook_errors(where, spec["hooks"])
        for i, fb in enumerate(spec.get("fallback_models", [])):
            fw = f"{where}: fallback_models[{i}]"
            if not isinstance(fb, dict) or set(fb) - {"provider", "name", "adapter", "model_params"}:
                errs.append(f"{fw}: is {{provider, name, adapter?, model_params?}}")
                continue
            adapter = fb.get("adapter")
            if adapter is None and fb.get("provider") in PROVIDER_ADAPTERS:
                adapter = {"name": fb["provider"], "version": "1"}
            params = fb.get("model_params", spec.get("model_params", {}))
            errs += _model_errors(fw, fb, adapter, params)
        errs += _policy_errors(where, spec.get("policy", {}))
        for key in ("approval_ttl_ms", "question_ttl_ms"):
            v = spec.get(key)
            if key in spec and (type(v) is not int or not 1_000 <= v <= MAX_PARK_TTL_MS):
                errs.append(f"{where}: {key} must be an integer of ms in 1000..{MAX_PARK_TTL_MS}")
        errs += _thread_budget_errors(where, spec)
        errs += _composition_errors(where, spec, raw)
    return errs


def _composition_errors(where: str, spec: dict[str, Any], raw: dict[str, Any]) -> list[str]:
    """`subagents` / `handoffs`: lists of agent names of this file (the spawn_agent and handoff
    tools' targets)."""
    errs: list[str] = []
    for key in ("subagents", "handoffs"):
        names = spec.get(key, [])
        if not isinstance(names, list) or not all(isinstance(n, str) and n in raw for n in names):
            errs.append(f"{where}: {key} must be a list of agent names of this file")
    return errs


_TEXT = {"minLength": 1, "type": "string"}
#: A child budget (agent_spawned.budget, the child run's budget): the Budget keys, >= 1 of them.
_BUDGET = {
    "additionalProperties": False,
    "minProperties": 1,
    "properties": {
        k: {"maximum": 9007199254740991, "minimum": 1, "type": "integer"}
        for k in (
            "max_cost_nanos",
            "max_input_tokens",
            "max_output_tokens",
            "max_model_requests",
            "max_turns",
            "max_wall_ms",
        )
    },
    "type": "object",
}


def _composition(raw: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]], str]:
    """The spawn_agent / handoff tool specs, their bindings and the system-text sentences for an
    agent's `subagents` and `handoffs` (Render v1: the subagent and handoff list sentences).
    Both tools' outcomes are recorded by their own events (agent_spawned, handoff) and can always
    be looked up in the log: reconcilable, without effect events."""
    tools: list[dict[str, Any]] = []
    bindings: dict[str, dict[str, Any]] = {}
    sentences = []
    subs, hands = sorted(set(raw.get("subagents", []))), sorted(set(raw.get("handoffs", [])))
    if subs:
        tools.append(
            {
                "description": "Start a subagent on a task and wait for its result (background: true "
                "returns at once; its result arrives later). isolation: none (its own empty "
                "workspace, the default), forked_sandbox (a copy of yours; its writes stay there), "
                "worktree (a copy of yours; its changes are merged back when it completes without "
                "a conflict), shared_sandbox (it works in your workspace).",
                "effect_class": "reconcilable",
                "input_schema": _obj(
                    ["agent", "prompt"],
                    agent={"enum": subs},
                    prompt=_TEXT,
                    budget=_BUDGET,
                    background={"type": "boolean"},
                    isolation={"enum": list(ISOLATIONS)},
                ),
                "name": "spawn_agent",
            }
        )
        bindings["spawn_agent"] = {"agents": subs, "kind": "spawn"}
        sentences.append(f"You can delegate a task with spawn_agent to: {', '.join(subs)}.")
    if hands:
        tools.append(
            {
                "description": "Hand this conversation over to another agent; it continues there.",
                "effect_class": "reconcilable",
                "input_schema": _obj(["agent"], agent={"enum": hands}, message=_TEXT),
                "name": "handoff",
            }
        )
        bindings["handoff"] = {"agents": hands, "kind": "handoff"}
        sentences.append(f"You can hand the conversation off with handoff to: {', '.join(hands)}.")
    return tools, bindings, " ".join(sentences)


def _thread_budget_errors(where: str, spec: dict[str, Any]) -> list[str]:
    """A thread budget (`policy.budget`) some model of the agent cannot bound per attempt is
    refused at load: budget_unenforceable at setup (semantics §Budgets)."""
    policy = spec.get("policy")
    budget = policy.get("budget") if isinstance(policy, dict) else None
    if not isinstance(budget, dict) or not budget:
        return []
    from .core.budgets import unenforceable

    params = spec.get("model_params", {})
    settings = [{"model": spec["model"], "model_params": params}]
    for fb in spec.get("fallback_models", []):
        if isinstance(fb, dict):
            settings.append({"model": fb, "model_params": fb.get("model_params", params)})
    assert isinstance(policy, dict)
    bad = unenforceable(budget, policy, settings)
    if not bad:
        return []
    return [f"{where}: budget_unenforceable: policy.budget {', '.join(bad)} has no per-attempt bound"]


def _schedule_errors(where: str, schedules: Any) -> list[str]:
    """`schedules`: [{name, cron, timezone?, input, tenant}] (each fires runs of this agent on a
    thread of its own in `tenant`, schedules.agent_schedules)."""
    if not isinstance(schedules, list):
        return [f"{where}: schedules must be a list"]
    from .schedules.cron import CronError, parse, zone

    errs: list[str] = []
    names: set[str] = set()
    for i, sc in enumerate(schedules):
        sw = f"{where}: schedules[{i}]"
        if not isinstance(sc, dict) or set(sc) - SCHEDULE_KEYS:
            errs.append(f"{sw}: is {{name, cron, timezone?, input, tenant}}")
            continue
        for key in ("name", "cron", "input", "tenant"):
            if not isinstance(sc.get(key), str) or not sc[key].strip():
                errs.append(f"{sw}: {key} must be a non-empty string")
        if isinstance(sc.get("name"), str):
            if not _NAME.match(sc["name"]) or sc["name"] in names:
                errs.append(f"{sw}: name must match [a-z][a-z0-9_]* and be unique")
            names.add(sc["name"])
        try:
            if isinstance(sc.get("cron"), str):
                parse(sc["cron"])
            zone(str(sc.get("timezone", "UTC")))
        except CronError as exc:
            errs.append(f"{sw}: {exc}")
    return errs


def _policy_errors(where: str, policy: Any) -> list[str]:
    """Shape problems of an agent's policy sections (the writer's schema check of
    `thread_started` catches the rest before anything is stored)."""
    if not isinstance(policy, dict):
        return [f"{where}: policy must be an object"]
    errs = [
        f"{where}: unknown policy key {k!r} (known: {', '.join(sorted(POLICY_KEYS))})"
        for k in sorted(set(policy) - POLICY_KEYS)
    ]
    out = policy.get("output")
    if out is not None:
        if not isinstance(out, dict) or not isinstance(out.get("schema"), dict):
            errs.append(f"{where}: policy.output needs a schema object")
        elif out.get("mode", "native") != "native":
            errs.append(f"{where}: policy.output.mode {out.get('mode')!r}: this host implements native only")
    ctx = policy.get("context")
    if ctx is not None and (not isinstance(ctx, dict) or set(ctx) - set(CONTEXT_DEFAULTS)):
        errs.append(f"{where}: policy.context keys are {', '.join(sorted(CONTEXT_DEFAULTS))}")
    errs += _retry_errors(where, policy.get("retry", {}))
    return errs


def _limits(raw: dict[str, Any]) -> dict[str, Any]:
    """An agent's policy sections, resolved (output pinned with its hash, context completed)."""
    out = dict(raw)
    if "output" in out:
        o = out["output"]
        out["output"] = {
            "max_retries": o.get("max_retries", 1),
            "mode": "native",
            "schema": o["schema"],
            "schema_sha256": canonical_hash(o["schema"]),
        }
    if "context" in out:
        ctx = {**CONTEXT_DEFAULTS, **out["context"]}
        for k, v in CONTEXT_DEFAULTS.items():
            if isinstance(v, dict) and isinstance(ctx[k], dict):
                ctx[k] = {**v, **ctx[k]}
        out["context"] = ctx
    return out


def _tool_errors(where: str, t: dict[str, Any]) -> list[str]:
    """A tool spec's problems: the ToolSpec keys (idempotent iff dedup_window_ms), and where it
    runs (`lambda`: a function ARN or a logical id of this stack; `timeout_ms`)."""
    errs: list[str] = []
    need = {"name", "description", "input_schema", "effect_class"} - set(t)
    if need or not _NAME.match(str(t.get("name"))) or "__" in str(t.get("name")):
        what = ", ".join(sorted(need)) or "a valid name ([a-z][a-z0-9_]*; '__' is for MCP tools)"
        return [f"{where}: tool spec {t.get('name')!r} needs {what}"]
    tw = f"{where}: tool {t['name']!r}"
    unknown = sorted(set(t) - TOOLSPEC_KEYS - TOOL_BINDING_KEYS)
    errs += [f"{tw}: unknown key {k!r}" for k in unknown]
    if t["effect_class"] not in EFFECT_CLASSES:
        errs.append(f"{tw}: effect_class must be one of {', '.join(sorted(EFFECT_CLASSES))}")
    window = t.get("dedup_window_ms")
    if (t["effect_class"] == "idempotent") != (isinstance(window, int) and window > 0):
        errs.append(f"{tw}: dedup_window_ms (a positive integer) is required iff idempotent")
    if not isinstance(t["input_schema"], dict):
        errs.append(f"{tw}: input_schema must be an object")
    if "lambda" in t and not (isinstance(t["lambda"], str) and _LAMBDA.match(t["lambda"])):
        errs.append(f"{tw}: lambda must be a function ARN or a logical id of this stack")
    if "timeout_ms" in t and not (isinstance(t["timeout_ms"], int) and 1000 <= t["timeout_ms"] <= 900_000):
        errs.append(f"{tw}: timeout_ms must be an integer in 1000..900000")
    if "timeout_ms" in t and "lambda" not in t:
        errs.append(f"{tw}: timeout_ms is for a lambda tool")
    if "deferred" in t and not isinstance(t["deferred"], bool):
        errs.append(f"{tw}: deferred must be a boolean")
    if t.get("deferred") is True and t["effect_class"] not in DEFERRED_CLASSES:
        errs.append(f"{tw}: a deferred tool is read_only or idempotent")
    return errs


MCP_SERVER_KEYS = frozenset({"url", "headers", "timeout_ms", "dedup_window_ms", "tools"})
#: short enough that mcp__<server>__<tool> leaves a tool name room inside Name's 64 characters
_SERVER = re.compile(r"^[a-z][a-z0-9_]{0,23}$")


def _ref_errors(where: str, v: Any) -> list[str]:
    """A header value or url: a string, or a secret reference {env|secret|value, key?, prefix?}."""
    if isinstance(v, str) and v:
        return []
    from .channels.installations import ChannelsConfigError, _secret_ref

    if isinstance(v, dict) and isinstance(v.get("prefix", ""), str):
        try:
            _secret_ref({k: x for k, x in v.items() if k != "prefix"}, where)
            return []
        except ChannelsConfigError as exc:
            return [str(exc)]
    return [f"{where}: a string or a secret reference {{env|secret|value, key?, prefix?}}"]


def _mcp_errors(where: str, servers: Any) -> list[str]:
    """`mcp_servers`: {name: {url, headers?, timeout_ms?, dedup_window_ms?, tools?}}."""
    if not isinstance(servers, dict):
        return [f"{where}: mcp_servers must be an object of server name -> server"]
    errs: list[str] = []
    for name, decl in servers.items():
        sw = f"{where}: mcp server {name!r}"
        if not isinstance(name, str) or not _SERVER.match(name) or "__" in name:
            errs.append(f"{sw}: the name must match [a-z][a-z0-9_]{{0,23}} without '__'")
        if not isinstance(decl, dict) or "url" not in decl:
            errs.append(f"{sw}: needs a url")
            continue
        errs += [f"{sw}: unknown key {k!r}" for k in sorted(set(decl) - MCP_SERVER_KEYS)]
        url = decl["url"]
        if isinstance(url, str) and not url.startswith(("https://", "http://")):
            errs.append(f"{sw}: url must be http(s)://")
        errs += _ref_errors(f"{sw}.url", url)
        headers = decl.get("headers", {})
        if not isinstance(headers, dict):
            errs.append(f"{sw}: headers must be an object")
        else:
            for h, v in headers.items():
                errs += _ref_errors(f"{sw}.headers.{h}", v)
        t = decl.get("timeout_ms", 60_000)
        if not (isinstance(t, int) and 1000 <= t <= 900_000):
            errs.append(f"{sw}: timeout_ms must be an integer in 1000..900000")
        w = decl.get("dedup_window_ms", 1)
        if not (isinstance(w, int) and w > 0):
            errs.append(f"{sw}: dedup_window_ms must be a positive integer")
        tools = decl.get("tools", [])
        if not isinstance(tools, list) or not all(isinstance(x, str) for x in tools):
            errs.append(f"{sw}: tools must be a list of the server's tool names")
    return errs


def _binding(t: dict[str, Any]) -> dict[str, Any] | None:
    """Where a tool runs: a Lambda function, and/or off the turn (`deferred`: engine.deferred;
    a deferred built-in keeps kind `builtin`, its executor is the worker's own)."""
    deferred = {"deferred": True} if t.get("deferred") is True else {}
    if "lambda" in t:
        return {
            "function": t["lambda"],
            "kind": "lambda",
            "timeout_ms": t.get("timeout_ms", 60_000),
            **deferred,
        }
    return {"kind": "builtin", **deferred} if deferred else None


def _agent(name: str, raw: dict[str, Any]) -> Agent:
    tools = []
    bindings: dict[str, dict[str, Any]] = {}
    for t in raw.get("tools", []):
        if isinstance(t, str):
            tools.append(BUILTIN_TOOLS[t])
            continue
        tools.append({k: v for k, v in t.items() if k in TOOLSPEC_KEYS})
        binding = _binding(t)
        if binding is not None:
            bindings[t["name"]] = binding
    composed, composed_bindings, sentences = _composition(raw)
    tools += composed
    bindings.update(composed_bindings)
    adapter = {"settings": {}, **raw["adapter"]}
    limits = _limits(raw.get("policy", {}))
    instructions = raw["instructions"] + (f"\n\n{sentences}" if sentences else "")
    if "output" in limits:
        from .core.canonical import canonical_bytes

        schema = canonical_bytes(limits["output"]["schema"]).decode()
        instructions = f"{instructions}\n\n{OUTPUT_INSTRUCTION}{schema}"
    return Agent(
        name=name,
        model=raw["model"],
        model_params=raw.get("model_params", {}),
        adapter=adapter,
        instructions=instructions,
        tools=tools,
        permissions=raw.get("permissions", {}),
        approvers=raw.get("approvers", []),
        fallback_models=raw.get("fallback_models", []),
        schedules=raw.get("schedules", []),
        limits=limits,
        bindings=bindings,
        mcp_servers=raw.get("mcp_servers", {}),
        hooks=raw.get("hooks", {}),
        approval_ttl_ms=raw.get("approval_ttl_ms"),
        question_ttl_ms=raw.get("question_ttl_ms"),
    )


def parse_agents(text: str | bytes, source: str = "agents file") -> dict[str, Agent]:
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise AgentsFileError(f"{source}: not JSON ({exc})") from None
    errs = validate(raw, source)
    if errs:
        raise AgentsFileError("\n".join(errs))
    return {name: _agent(name, spec) for name, spec in raw.items()}


@lru_cache(maxsize=8)
def _load(path: str) -> dict[str, Agent]:
    return parse_agents(Path(path).read_bytes(), path)


@lru_cache(maxsize=4)
def _load_s3(uri: str) -> dict[str, Agent]:
    import boto3

    from .store.objects import read_object

    return parse_agents(read_object(boto3.session.Session().client("s3"), uri), uri)


def load_agents(path: str | os.PathLike[str] | None = None) -> dict[str, Agent]:
    uri = os.environ.get("AGENTS_S3_URI", "")
    if path is None and not os.environ.get("AGENTS_FILE") and uri:
        return _load_s3(uri if uri.startswith("s3://") else "s3://" + uri)  # the template gives bucket/key
    return _load(str(path or os.environ.get("AGENTS_FILE") or DEFAULT_FILE))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    path = args[0] if args else str(DEFAULT_FILE)
    try:
        agents = parse_agents(Path(path).read_bytes(), path)
    except (OSError, AgentsFileError) as exc:
        print(exc, file=sys.stderr)
        return 1
    for a in agents.values():
        print(f"{a.name}: {a.model['provider']}/{a.model['name']} (config_hash {a.config_hash[:12]})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
