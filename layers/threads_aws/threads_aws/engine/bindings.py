"""Which executor runs a call: a built-in tool (`ctx.tools`), or a tool the pinned agent binds
(`Agent.bindings`: a Lambda function; an MCP server's tool; `spawn_agent` / `handoff`).

The binding comes from the deployed agent whose `config_hash` equals the thread's pinned one
(`thread_started`), so a thread never calls a function its agent didn't name when it started; a
redeployed agent with another hash leaves its old threads' bound tools unavailable (their calls
close `not_executed`) rather than calling something else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..core.fold import Fold
from .context import EngineContext
from .tools import Executor


def pinned_agent(ctx: EngineContext, fold: Fold) -> Any:
    started = fold.started or {}
    agent = (ctx.agents or {}).get(started.get("agent_name", ""))
    if agent is None or agent.config_hash != started.get("config_hash"):
        return None
    return agent


def executor_for(
    ctx: EngineContext, fold: Fold, name: str, mcp: Callable[[], Any] | None = None
) -> Executor | None:
    """`mcp`: the step's MCP side (`mcp_tools.StepMcp`, made on first use)."""
    builtin = ctx.tools.get(name)
    if builtin is not None:
        return builtin
    agent = pinned_agent(ctx, fold)
    if mcp is not None and agent is not None and agent.mcp_servers and name.startswith("mcp__"):
        from .mcp_tools import executor

        return executor(mcp(), agent, name)
    binding = (agent.bindings if agent is not None else {}).get(name)
    if binding is None:
        return None
    if binding["kind"] == "lambda" and ctx.functions is not None:
        from .lambda_tools import LambdaTool

        return LambdaTool(ctx.functions, name, binding["function"], int(binding["timeout_ms"]))
    return None


COMPOSITION = frozenset({"spawn", "handoff"})


def composition_for(ctx: EngineContext, fold: Fold, name: str) -> dict[str, Any] | None:
    """The pinned agent's `spawn_agent` / `handoff` binding (its allowed target agents): run by
    the step itself (`engine.subagents`, `engine.handoff`), not by an executor."""
    if name in ctx.tools:
        return None
    agent = pinned_agent(ctx, fold)
    binding = (agent.bindings if agent is not None else {}).get(name)
    return binding if binding is not None and binding.get("kind") in COMPOSITION else None


def is_deferred(ctx: EngineContext, fold: Fold, name: str) -> bool:
    """The pinned agent declares the tool `deferred`: its calls run off the turn (engine.deferred)."""
    agent = pinned_agent(ctx, fold)
    binding = (agent.bindings if agent is not None else {}).get(name)
    return bool(binding and binding.get("deferred"))
