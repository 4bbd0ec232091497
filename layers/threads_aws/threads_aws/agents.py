"""Agents as deployed config: name, model, instructions, tools, permissions and approvers.
`thread_started` pins the resolved, secret-free config and its `config_hash`, so a thread keeps
running the agent it started with.

Where the agents come from (read once per container, validated at load):
1. `AGENTS_FILE` — a local path (local runs, tests);
2. `AGENTS_S3_URI` — `s3://bucket/key` of an agents file (a deployment's own agents: the
   template parameter `AgentsObject` sets it and grants s3:GetObject on exactly that object);
3. the bundled `data/agents.json` (`demo` needs no key; one example agent per provider).

Validation (`config.agents_file`) names every problem at once (`AgentsFileError`): unknown
keys, a missing required key, an unknown provider or adapter, a provider adapter whose name
differs from the provider or whose version it doesn't implement, model_params no adapter maps
(max_tokens is required for anthropic and bedrock), unknown tools, malformed permissions,
fallback models or retry policy (`retry`: any of policy.retry's keys, over
engine.retry.DEFAULTS). The built-in tools' specs are `config.builtin_tools`.
Check a file: `python -m threads_aws.agents path/to/agents.json`."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from .config.agents_file import (
    OUTPUT_INSTRUCTION,
    TOOLSPEC_KEYS,
    AgentsFileError,
    _composition,
    _limits,
    validate,
)
from .config.builtin_tools import BUILTIN_TOOLS
from .config.retry_defaults import DEFAULTS as RETRY_DEFAULTS
from .core.canonical import canonical_hash

DEFAULT_FILE = Path(__file__).resolve().parent / "data" / "agents.json"


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
    # days an idle thread of this agent is kept (`store.retention`); None: the deployment's.
    # Not in config_hash: how long data is kept is not how a thread runs.
    retention_days: int | None = None

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

    @cached_property  # pure-Python JCS over the whole config: asked per tool call and per park
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
        retention_days=raw.get("retention_days"),
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
