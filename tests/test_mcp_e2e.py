"""Issue 11 acceptance for MCP through `threads-aws dev` over real HTTP: the dev process starts
its demo MCP server (the SDK's MCPServer on loopback) and the `demo-tools` agent names it. A run
lists the server's tools and pins them (`tools_changed`) before its first model request; a
read-only MCP call runs at once; a destructive one asks, is granted through the approvals API,
and commits once. The branch then exports (the offline CLI), re-imports and reduces clean."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from helpers.dev_process import DevProcess, dev_process
from test_tools_e2e import grant, kinds, result
from threads_aws.core.canonical import sha256_hex
from threads_aws.core.importer import import_log
from threads_aws.core.reduced_state import reduce


def start(dev: DevProcess, text: str, thread_id: str | None = None) -> dict[str, str]:
    body: dict[str, Any] = {"agent": "demo-tools", "input": text}
    if thread_id is not None:
        body["thread_id"] = thread_id
    status, out, _ = dev.call("POST", "/v1/runs", body, headers={"Idempotency-Key": str(uuid.uuid4())})
    assert status == 202, out
    return out  # type: ignore[no-any-return]


def exported(dev: DevProcess, branch_id: str, tmp_path: Path) -> bytes:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("AWS_")}, **dev.env}
    out = tmp_path / f"{branch_id}.jsonl"
    cli = [sys.executable, "-m", "threads_aws_dev", "log"]
    subprocess.run([*cli, "export", "--branch", branch_id, "-o", str(out)], env=env, check=True, timeout=120)
    return out.read_bytes()


def test_mcp_tool_calls_through_dev(tmp_path: Path) -> None:
    with dev_process(tmp_path) as dev:
        run = start(dev, 'mcp: mcp__demo__lookup_rate {"currency": "GBP"}')
        tid, bid = run["thread_id"], run["branch_id"]
        assert result(dev, tid, run["run_id"])["status"] == "completed"
        events = dev.timeline(tid)
        t = kinds(events)
        assert t.index("tools_changed") < t.index("model_request")
        changed = next(e for e in events if e["type"] == "tools_changed")
        names = [s["name"] for s in changed["data"]["tools"]]
        assert names == [
            "time",
            "mcp__demo__lookup_rate",
            "mcp__demo__save_record",
            "mcp__demo__delete_record",
        ]
        (res,) = [e for e in events if e["type"] == "tool_result"]
        assert res["data"]["preview"] == "1 GBP = 1.17 EUR" and res["data"]["origin"] == "executed"
        assert "effect_begin" not in t  # read-only

        # An effect: save_record is idempotent, so it asks under the default mode.
        run2 = start(dev, 'mcp: mcp__demo__save_record {"key": "k1", "value": "v1"}', tid)
        grant(dev, tid)
        assert result(dev, tid, run2["run_id"])["status"] == "completed"
        events = dev.timeline(tid)
        t = kinds(events)
        assert t.count("tools_changed") == 1  # the same listing: nothing new pinned
        assert t.count("effect_begin") == 1 and t.count("effect_commit") == 1
        assert t.index("approval_granted") < t.index("effect_begin") < t.index("effect_commit")
        saved = [e for e in events if e["type"] == "tool_result"][-1]
        assert saved["data"]["preview"] == "saved k1" and not saved["data"]["is_error"]

        data = exported(dev, bid, tmp_path)
    imported = import_log(data)
    assert imported.head_verified
    head = imported.head
    state = reduce(imported.fold, sha256_hex(head.raw))
    assert state["status"] == "idle" and state["turns_completed"] == 2
    (effect,) = state["effects"]
    assert effect["status"] == "committed"
    assert [e["type"] for e in imported.events()] == [e["type"] for e in events]
    assert json.loads(data.splitlines()[-1])  # the head checkpoint line
