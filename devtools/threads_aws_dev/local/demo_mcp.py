"""The demo MCP server `threads-aws dev` starts on loopback (dev tooling, not in the layer).

Built with the SDK's server (`mcp.server.mcpserver.MCPServer`, mcp 2's name for FastMCP),
streamable HTTP at `/mcp`, served by uvicorn in a thread. The demo agent `demo-tools` names it
(`mcp_servers.demo`, url from THREADS_DEMO_MCP_URL), so in the demo model's input

    mcp: mcp__demo__lookup_rate {"currency": "USD"}      read-only: runs at once
    mcp: mcp__demo__save_record {"key": "a", "value": "1"}   idempotent: asks for approval
    mcp: mcp__demo__delete_record {"key": "a"}            destructive (unguarded): asks

run real MCP calls. With a token the server answers 401 unless `Authorization: Bearer <token>`
(the agent's header from a secret reference). `delay_ms` makes a call take that long (a lost
response can be staged by killing the server meanwhile: `python -m threads_aws_dev.local.demo_mcp
--port N`).
"""

# No `from __future__ import annotations`: the SDK reads the tools' signatures (the Context
# parameter) at registration, when a string annotation of a local import can't be resolved.
import argparse
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

RATES = {"EUR": "1.00", "USD": "0.92", "GBP": "1.17", "JPY": "0.0061", "CHF": "1.05"}


EFFECT_KEY = "threads-aws/effect_key"  # engine.mcp_tools.META_KEY


def build(
    records: dict[str, str], calls: list[tuple[str, dict[str, Any]]], saved: dict[str, str] | None = None
) -> Any:
    """The demo tools; `saved`: save_record's answers by effect key (its deduplication)."""
    from mcp.server.mcpserver import Context, MCPServer
    from mcp_types import ToolAnnotations

    saved = {} if saved is None else saved

    # The SDK's constructor runs logging.basicConfig at this level on the root logger: at its INFO
    # default every botocore "Found credentials" line of the dev process would reach the terminal.
    server: Any = MCPServer(
        "threads-demo-tools", instructions="Demo tools of threads-aws dev.", log_level="WARNING"
    )

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def lookup_rate(currency: str) -> str:
        """The exchange rate of a currency to EUR (a fixed demo table)."""
        calls.append(("lookup_rate", {"currency": currency}))
        rate = RATES.get(currency.upper())
        if rate is None:
            raise ValueError(f"unknown currency {currency!r} (known: {', '.join(RATES)})")
        return f"1 {currency.upper()} = {rate} EUR"

    @server.tool(annotations=ToolAnnotations(idempotent_hint=True, destructive_hint=False))
    def save_record(key: str, value: str, ctx: Context, delay_ms: int = 0) -> str:
        """Store a record under a key (saving the same key and value again changes nothing)."""
        effect_key = (ctx.request_context.meta or {}).get(EFFECT_KEY)
        if isinstance(effect_key, str) and effect_key in saved:
            return saved[effect_key]  # a re-send of a call already applied: its first answer
        calls.append(("save_record", {"key": key, "value": value}))
        time.sleep(min(max(delay_ms, 0), 60_000) / 1000)
        records[key] = value
        answer = f"saved {key}"
        if isinstance(effect_key, str):
            saved[effect_key] = answer
        return answer

    @server.tool(annotations=ToolAnnotations(destructive_hint=True))
    def delete_record(key: str, delay_ms: int = 0) -> str:
        """Delete a record (irreversible)."""
        calls.append(("delete_record", {"key": key, "delay_ms": delay_ms}))
        time.sleep(min(max(delay_ms, 0), 60_000) / 1000)
        if key not in records:
            raise ValueError(f"no record {key!r}")
        del records[key]
        return f"deleted {key}"

    return server


def _guarded(app: Any, token: str | None) -> Any:
    if not token:
        return app

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            auth = dict(scope.get("headers") or []).get(b"authorization", b"").decode()
            if auth != f"Bearer {token}":
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await app(scope, receive, send)

    return guarded


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@dataclass
class DemoMcp:
    """The demo server in a thread: `start()` → url; `stop()`."""

    host: str = "127.0.0.1"
    port: int = 0
    token: str | None = None
    records: dict[str, str] = field(default_factory=dict)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    saved: dict[str, str] = field(default_factory=dict)  # save_record's answers by effect key
    mcp: Any = None  # the MCPServer (tests add or remove tools at runtime)
    _server: Any = None
    _thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/mcp"

    def app(self) -> Any:
        self.mcp = build(self.records, self.calls, self.saved)
        app = self.mcp.streamable_http_app(host=self.host)
        return _guarded(app, self.token)

    def start(self) -> "DemoMcp":
        import uvicorn

        self.port = self.port or free_port(self.host)
        config = uvicorn.Config(
            self.app(), host=self.host, port=self.port, log_level="warning", lifespan="on"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="demo-mcp", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 15
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the demo MCP server did not start on {self.host}:{self.port}")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="The threads-aws demo MCP server (streamable HTTP).")
    p.add_argument("--port", type=int, default=8788)
    p.add_argument("--token", default=None)
    a = p.parse_args(argv)
    import uvicorn

    demo = DemoMcp(port=a.port, token=a.token)
    print(f"demo MCP server on {demo.url}", flush=True)
    uvicorn.run(demo.app(), host=demo.host, port=demo.port, log_level="warning")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
