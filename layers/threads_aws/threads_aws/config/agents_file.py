"""The agents file's check (`validate`: every problem at once, `AgentsFileError`) and the
parts of an agent resolved from its file besides the agent itself: its policy sections
(`_limits`) and the composition tools (`_composition`: spawn_agent, handoff). The loader and the
`Agent` it builds are `threads_aws.agents`."""

from __future__ import annotations

import re
from typing import Any

from ..core.canonical import canonical_hash
from ..core.manifest import ISOLATIONS
from .adapters import ADAPTER_VERSIONS, MODEL_PARAMS, PROVIDER_ADAPTERS, known_adapters
from .builtin_tools import BUILTIN_TOOLS, _obj
from .retry_defaults import DEFAULTS as RETRY_DEFAULTS


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
        "retention_days",
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
            from .hook_rules import hook_errors

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
        days = spec.get("retention_days")
        if "retention_days" in spec and (type(days) is not int or days < 1):
            errs.append(f"{where}: retention_days must be an integer of days >= 1")
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
    from ..core.budgets import unenforceable

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
    from ..schedules.cron import CronError, parse, zone

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
    from ..channels.installations import ChannelsConfigError, _secret_ref

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
