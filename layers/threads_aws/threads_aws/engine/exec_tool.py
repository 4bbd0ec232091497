"""`exec`: run a command over the branch's workspace in the sandbox function, and commit what it
changed as a new manifest (an effect, class `idempotent`).

The worker reads the base manifest's files (it has the S3 access; the sandbox has none), sends
their bytes inline in the invocation payload (so the sandbox needs no network and no AWS
permission: `sandbox.exec_runner`), and writes the changed files back content-addressed, then
the new manifest; the `effect_commit`'s receipt names it, like a `write_file`'s. Re-dispatch
after a crash is safe (`safe_to_retry`): an uncommitted run left nothing visible (its /tmp tree
is gone with it, it reached nothing outside), and the new run starts from the same base.
Inline bytes bound the workspace an exec can take to what a synchronous invocation carries
(`MAX_EXEC_BYTES`); a larger one is an `exec_workspace_too_large` error result.

Where the sandbox runs: `SANDBOX_EXEC_LOCAL=1` (a child process on this machine: local dev,
NOT network-isolated) or `SANDBOX_EXEC_FUNCTION` (the template's `SandboxExecFunction`:
deployed); neither → `exec_unavailable`. A sandbox that doesn't answer is `exec_failed`: nothing
of the run is visible, so the call did not happen.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from typing import Any

from ..core.manifest import WorkspaceError, normalize_path
from .file_tools import FILE_EXECUTORS, _store, workspace_of
from .tools import Executor, ToolContext, ToolOutput

MAX_EXEC_BYTES = 4 << 20  # 6 MB sync payload, base64
DEFAULT_TIMEOUT_MS = 30_000
INVOKE_MARGIN_S = 30  # materialise + capture around the command (the function's Timeout: +30 s)


def invoke(payload: dict[str, Any]) -> dict[str, Any]:
    """The sandbox's answer: a local child process when SANDBOX_EXEC_LOCAL=1 (checked first,
    so `threads-aws dev`, which resolves the template's function name, can run exec), else the
    SANDBOX_EXEC_FUNCTION Lambda."""
    if os.environ.get("SANDBOX_EXEC_LOCAL") == "1":
        timeout = int(payload.get("timeout_ms", DEFAULT_TIMEOUT_MS)) / 1000 + 30
        out = subprocess.run(
            [sys.executable, "-m", "threads_aws.sandbox.exec_runner"],
            input=json.dumps(payload).encode(),
            capture_output=True,
            timeout=timeout,
            check=True,
        )
        return dict(json.loads(out.stdout))
    function = os.environ.get("SANDBOX_EXEC_FUNCTION", "")
    if function:
        import boto3  # only the worker's exec path pays for the Lambda client
        from botocore.config import Config

        # The answer comes when the command ends: botocore's 60 s read timeout would give up on
        # a longer run (and its retries would run the command again), so wait for the function's
        # own limit and never re-send: a lost answer is `exec_failed`, nothing of it is visible.
        wait_s = int(payload.get("timeout_ms", DEFAULT_TIMEOUT_MS)) / 1000 + INVOKE_MARGIN_S
        config = Config(read_timeout=wait_s, connect_timeout=10, retries={"total_max_attempts": 1})
        client = boto3.client("lambda", config=config)
        resp = client.invoke(FunctionName=function, Payload=json.dumps(payload).encode())
        body = json.loads(resp["Payload"].read())
        if resp.get("FunctionError"):
            raise RuntimeError(f"sandbox function failed: {body}")
        return dict(body)
    raise WorkspaceError("exec_unavailable", "no sandbox function is configured on this host")


def _summary(answer: dict[str, Any], changed: list[str], deleted: list[str]) -> str:
    head = "timed out" if answer.get("timed_out") else f"exit {answer.get('exit_code')}"
    parts = [head]
    if answer.get("stdout"):
        parts.append("--- stdout\n" + str(answer["stdout"]).rstrip("\n"))
    if answer.get("stderr"):
        parts.append("--- stderr\n" + str(answer["stderr"]).rstrip("\n"))
    if changed or deleted:
        parts.append(
            "--- workspace: " + ", ".join([f"wrote {p}" for p in changed] + [f"deleted {p}" for p in deleted])
        )
    return "\n".join(parts)


def run_exec(args: dict[str, Any], tc: ToolContext) -> ToolOutput:
    def build() -> tuple[str, Any]:
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            raise WorkspaceError("invalid_argument", "command is a non-empty string")
        timeout = args.get("timeout_ms", DEFAULT_TIMEOUT_MS)
        if not isinstance(timeout, int) or isinstance(timeout, bool) or not 0 < timeout <= 300_000:
            raise WorkspaceError("invalid_argument", "timeout_ms is 1..300000")
        ws = workspace_of(tc)
        base = ws.manifest(tc.workspace)
        if base.total_bytes > MAX_EXEC_BYTES:
            raise WorkspaceError("exec_workspace_too_large", f"{base.total_bytes} bytes > {MAX_EXEC_BYTES}")
        files = [
            {"data_b64": base64.b64encode(ws.read(base, e.path)).decode(), "mode": e.mode, "path": e.path}
            for e in base.entries()
        ]
        try:
            answer = invoke({"command": command, "files": files, "timeout_ms": timeout})
        except WorkspaceError:
            raise
        except Exception as exc:  # noqa: BLE001 - nothing of a failed run is visible: not done
            raise WorkspaceError("exec_failed", f"the sandbox did not answer: {exc}") from None
        if "error" in answer:
            code, _, message = str(answer["error"]).partition(": ")
            raise WorkspaceError(code, message)
        new = base
        deleted = [normalize_path(p) for p in answer.get("deleted", [])]
        for path in deleted:  # deletes first: a file may have become a directory
            new = new.without(path)
        changed = []
        for c in answer.get("changed", []):
            path = normalize_path(c["path"])
            new = ws.write(new, path, base64.b64decode(c["data_b64"]), int(c["mode"]) & 0o777)
            changed.append(path)
        new = ws.commit(new)
        return _summary(answer, changed, deleted), new

    return _store(tc, build)


# The workspace tools' executors (the file tools and exec), by tool name.
WORKSPACE_EXECUTORS: dict[str, Executor] = {**FILE_EXECUTORS, "exec": run_exec}
