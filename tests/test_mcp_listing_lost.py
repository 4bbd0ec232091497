"""An MCP call whose tool name must first be listed (a step that dispatches without having
listed: an approved call resumed in a new step): the `tools/list` answer is lost, so the
`tools/call` was never sent. That is `ToolNotSent` (the effect settles `not_sent`, semantics §4
"Effects": `effect_unknown` is only for a timeout or transport error *after dispatch*), never an
unknown outcome that would park an unguarded call for a human. Against the demo MCP server (the
SDK's server on loopback), with its `tools/list` answers held back."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from threads_aws.engine.mcp_tools import McpTool, StepMcp
from threads_aws.engine.tools import ToolContext, ToolNotSent
from threads_aws_dev.local.demo_mcp import DemoMcp


class SlowListing(DemoMcp):
    """The demo server; while `hold` is set its `tools/list` answers wait for `release`."""

    hold = threading.Event()
    release = threading.Event()

    def app(self) -> Any:
        inner = super().app()
        hold, release = self.hold, self.release

        async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] != "http" or scope.get("method") != "POST" or not hold.is_set():
                await inner(scope, receive, send)
                return
            msgs, body, more = [], b"", True
            while more:
                m = await receive()
                msgs.append(m)
                body += m.get("body", b"")
                more = m.get("more_body", False)
            if b'"tools/list"' in body:
                for _ in range(600):  # at most 30 s, until the test releases it
                    if release.is_set():
                        break
                    await asyncio.sleep(0.05)

            async def replay() -> Any:
                return msgs.pop(0) if msgs else await receive()

            await inner(scope, replay, send)

        return app


@pytest.fixture
def slow() -> Any:
    server = SlowListing()
    server.hold, server.release = threading.Event(), threading.Event()
    server.start()
    yield server
    server.release.set()
    server.stop()


def test_a_lost_listing_before_a_call_is_not_sent(slow: Any) -> None:
    decl = {"url": slow.url, "timeout_ms": 200}
    step = StepMcp()
    tool = McpTool(step, "demo", decl, "mcp__demo__delete_record")
    tc = ToolContext(
        tenant="acme",
        thread_id="t",
        branch_id="b",
        call_id="call_1",
        effect_key="b:call_1",
        attempt=1,
        clock=lambda: 0,
        stores=None,  # type: ignore[arg-type]
    )
    slow.hold.set()
    try:
        with pytest.raises(ToolNotSent):
            tool({"key": "a"}, tc)
    finally:
        slow.release.set()
        step.close()
    assert slow.calls == []  # the tools/call never reached the server
