"""Tools of remote MCP servers (streamable HTTP): an agent names servers (`mcp_servers` in the
agents file: name, url, headers whose values may come from secrets, timeout_ms,
dedup_window_ms, an optional tools allow-list).

Pinning (rule 17): before a step's first model request the worker lists each server of the
pinned agent once (`sync_tools`); when the complete set (the pinned non-MCP tools, then each
server's tools in the agent's order) differs from the fold's current set it appends
`tools_changed{tools, tools_hash, cause:{kind: mcp_list_changed, server}}` first, so the model is
never asked with a list it wasn't shown and later calls take their effect class from it. A server
that can't be listed keeps the tools last pinned for it. `thread_started` is written by the API,
which never loads the MCP SDK, so a thread's first step pins its servers' tools this way.

Names: `mcp__<server>__<tool>` (the tool's name lower-cased, other characters as `_`), so they
never collide with a built-in or an agent's own tool (those may not contain `__`); a tool whose
name doesn't fit `Name` (64 characters) or collides after that mapping is not offered.

Effect class from the tool's annotations (MCP hints; defaults readOnly false, destructive true,
idempotent false):
- readOnlyHint → `read_only` (no effect events);
- idempotentHint → `idempotent` only where the agent's server entry declares `dedup_window_ms`:
  semantics §4's `idempotent` is "the provider dedups on the effect key", and the MCP hint only
  says a repeat of the same arguments has no further effect (a re-send after another writer's
  change would overwrite it); declaring the window is the operator saying the server dedups on
  the key the call carries in `_meta`. Without it the tool is `unguarded`;
- otherwise `unguarded` - destructiveHint false (additive) would fit `reconcilable`, but MCP has
  no lookup of an earlier call's outcome, so nothing could reconcile it.

A call (`McpTool`) runs after `effect_begin` is durable and the lease re-checked (`effects`),
with the effect key in the request's `_meta` (META_KEY):
the result commits; `isError` is an error result; a JSON-RPC error answer is an error result (the
tool didn't run); a lost answer or timeout is `ToolUncertain` → `effect_unknown`, settled by the
class; no connection, or a listing (of a step that hadn't listed) that failed before the call
was sent, is `ToolNotSent`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..core.canonical import canonical_bytes, canonical_hash
from ..writer import Draft
from .mcp_client import Endpoint, McpConnections, McpLost, McpNotSent, McpRefused
from .tools import ToolContext, ToolNotSent, ToolOutput, ToolUncertain

PREFIX = "mcp__"
DEFAULT_TIMEOUT_MS = 60_000
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_BAD = re.compile(r"[^a-z0-9_]")
HOST = {"kind": "host"}
#: `_meta` of an effectful tools/call: the effect key (the same on every re-send: a server may
#: deduplicate on it, as the demo's save_record does) and the attempt.
META_KEY = "threads-aws/effect_key"
META_ATTEMPT = "threads-aws/attempt"


def namespaced(server: str, tool: str) -> str | None:
    """The model-visible name of a server's tool, or None when it can't be one."""
    name = f"{PREFIX}{server}__{_BAD.sub('_', tool.lower())}"
    return name if _NAME.match(name) else None


def split_name(name: str) -> tuple[str, str] | None:
    """(server, tool part) of a namespaced name."""
    if not name.startswith(PREFIX):
        return None
    server, sep, tool = name[len(PREFIX) :].partition("__")
    return (server, tool) if sep and server and tool else None


def effect_class(
    annotations: dict[str, Any] | None, dedup_window_ms: int | None
) -> dict[str, Any]:
    """The ToolSpec's effect keys for an MCP tool's annotations (and its server's declared
    dedup window: None when the entry declares none)."""
    a = annotations or {}
    if a.get("readOnlyHint") is True:
        return {"effect_class": "read_only"}
    if a.get("idempotentHint") is True and dedup_window_ms is not None:
        return {"dedup_window_ms": dedup_window_ms, "effect_class": "idempotent"}
    return {"effect_class": "unguarded"}  # additive or destructive: no lookup exists to reconcile


def tool_specs(
    server: str, decl: dict[str, Any], listed: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The pinned ToolSpecs of a server's listing (in its order) and namespaced → MCP name."""
    allow = decl.get("tools")
    declared = decl.get("dedup_window_ms")
    window = None if declared is None else int(declared)
    specs: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    clash: set[str] = set()
    for t in listed:
        raw = t.get("name")
        schema = t.get("inputSchema")
        if (
            not isinstance(raw, str)
            or not isinstance(schema, dict)
            or (allow is not None and raw not in allow)
        ):
            continue
        name = namespaced(server, raw)
        if name is None:
            continue
        if name in names:
            clash.add(name)
            continue
        names[name] = raw
        description = (
            t.get("description") or t.get("title") or (t.get("annotations") or {}).get("title") or raw
        )
        spec = {
            "description": str(description),
            "input_schema": schema,
            "name": name,
            **effect_class(t.get("annotations"), window),
        }
        try:
            canonical_bytes(spec)
        except Exception:  # noqa: BLE001 - a schema JCS can't carry (NaN, huge ints): not offered
            continue
        specs.append(spec)
    return [s for s in specs if s["name"] not in clash], {k: v for k, v in names.items() if k not in clash}


def result_output(res: dict[str, Any]) -> ToolOutput:
    """A `tools/call` result as the call's output: its text parts (other parts named), else its
    structured content as JSON."""
    parts: list[str] = []
    for c in res.get("content") or []:
        kind = c.get("type")
        if kind == "text":
            parts.append(str(c.get("text", "")))
        elif kind == "resource" and isinstance((c.get("resource") or {}).get("text"), str):
            parts.append(c["resource"]["text"])
        else:
            mime = c.get("mimeType") or (c.get("resource") or {}).get("mimeType")
            parts.append(f"[{kind} content{' ' + mime if mime else ''}]")
    if not parts and res.get("structuredContent") is not None:
        parts.append(canonical_bytes(res["structuredContent"]).decode())
    return ToolOutput("\n".join(parts), is_error=res.get("isError") is True)


Resolve = Callable[[Any, str], str]


def endpoint(server: str, decl: dict[str, Any], resolve: Resolve) -> Endpoint:
    """The server's endpoint with its url and header values resolved (a string, or a secret
    reference {env|secret|value, key?, prefix?} read through the channels' SecretResolver)."""

    def value(v: Any, where: str) -> str:
        if isinstance(v, str):
            return v
        return str(v.get("prefix", "")) + resolve({k: x for k, x in v.items() if k != "prefix"}, where)

    headers = {h: value(v, f"mcp server {server} header {h}") for h, v in (decl.get("headers") or {}).items()}
    return Endpoint(
        name=server,
        url=value(decl["url"], f"mcp server {server} url"),
        headers=headers,
        timeout_ms=int(decl.get("timeout_ms", DEFAULT_TIMEOUT_MS)),
    )


def default_resolve(ref: Any, where: str) -> str:
    from ..channels.installations import _secret_ref
    from ..channels.secrets import SecretResolver

    return _resolver(SecretResolver).resolve(_secret_ref(ref, where), where=where)


_RESOLVERS: dict[type, Any] = {}


def _resolver(cls: type) -> Any:
    # one resolver per container: it caches fetched secrets for its max_age
    if cls not in _RESOLVERS:
        _RESOLVERS[cls] = cls()
    return _RESOLVERS[cls]


class StepMcp:
    """The MCP side of one step: its connections, what it listed, and the endpoints."""

    def __init__(self, resolve: Resolve = default_resolve) -> None:
        self.conns = McpConnections()
        self.resolve = resolve
        self.listed: dict[str, dict[str, str]] = {}  # server -> namespaced -> MCP name
        self.pinned: dict[str, list[dict[str, Any]]] | None = None  # this step's listing (sync_tools)
        self._endpoints: dict[str, Endpoint] = {}

    def endpoint(self, server: str, decl: dict[str, Any]) -> Endpoint:
        if server not in self._endpoints:
            try:
                self._endpoints[server] = endpoint(server, decl, self.resolve)
            except Exception as exc:  # noqa: BLE001 - a missing secret: nothing can be sent
                raise McpNotSent(f"{server}: {exc}") from exc
        return self._endpoints[server]

    def list(self, server: str, decl: dict[str, Any]) -> list[dict[str, Any]]:
        specs, names = tool_specs(server, decl, self.conns.list_tools(self.endpoint(server, decl)))
        self.listed[server] = names
        return specs

    def mcp_name(self, server: str, decl: dict[str, Any], name: str) -> str | None:
        """The server's own name of a namespaced tool, from this step's listing (listed first
        when the step hasn't: the mapping to `Name` is not reversible)."""
        if server not in self.listed:
            self.list(server, decl)
        return self.listed[server].get(name)

    def close(self) -> None:
        self.conns.close()


@dataclass(frozen=True)
class McpTool:
    """The executor of one MCP server's tool, on the step's connection."""

    step: StepMcp
    server: str
    decl: dict[str, Any]
    name: str

    def __call__(self, args: dict[str, Any], tc: ToolContext) -> ToolOutput:
        try:
            mcp_name = self.step.mcp_name(self.server, self.decl, self.name)
        except (McpNotSent, McpLost, McpRefused) as exc:
            # the listing failed, so the tools/call was never sent: not_sent, never unknown
            raise ToolNotSent(f"{self.server}: its tool list could not be read: {exc}") from exc
        try:
            if mcp_name is None:
                return ToolOutput(
                    f"Error: the MCP server {self.server} no longer lists this tool.", is_error=True
                )
            meta = (
                None
                if tc is None or tc.effect_key is None
                else {META_KEY: tc.effect_key, META_ATTEMPT: tc.attempt}
            )
            res = self.step.conns.call_tool(self.step.endpoint(self.server, self.decl), mcp_name, args, meta)
        except McpNotSent as exc:
            raise ToolNotSent(str(exc)) from exc
        except McpLost as exc:
            raise ToolUncertain(exc.reason) from exc
        except McpRefused as exc:
            return ToolOutput(f"Error: {exc}", is_error=True)
        return result_output(res)


def executor(step: StepMcp, agent: Any, name: str) -> McpTool | None:
    split = split_name(name)
    servers = getattr(agent, "mcp_servers", None) or {}
    if split is None or split[0] not in servers:
        return None
    return McpTool(step, split[0], servers[split[0]], name)


def sync_tools(step: StepMcp, agent: Any, current: list[dict[str, Any]]) -> Draft | None:
    """Before a model request: the agent's servers listed (once per step); a set that differs
    from `current` (the fold's tools, in order) → the `tools_changed` to append first. The
    listing is kept, so a lost append race re-derives the same draft on the next decision."""
    servers: dict[str, dict[str, Any]] = getattr(agent, "mcp_servers", None) or {}
    if not servers:
        return None
    if step.pinned is None:
        step.pinned = {}
        for server, decl in servers.items():
            try:
                step.pinned[server] = step.list(server, decl)
            except (McpNotSent, McpLost, McpRefused):
                pass  # unreachable now: it keeps what the model was last shown
    tools = [t for t in current if split_name(t["name"]) is None]
    changed: str | None = None
    for server in servers:
        pinned = [t for t in current if (split_name(t["name"]) or ("",))[0] == server]
        specs = step.pinned.get(server, pinned)
        if specs != pinned and changed is None:
            changed = server
        tools += specs
    if canonical_hash(tools) == canonical_hash(current):
        return None
    data: dict[str, Any] = {"tools": tools, "tools_hash": canonical_hash(tools)}
    if changed is not None:
        data["cause"] = {"kind": "mcp_list_changed", "server": changed}
    return Draft("tools_changed", data, HOST)
