"""`exec`: the sandbox runner (materialise, run, capture changes, timeout kills the process
group) and the tool through the worker (the demo's `exec:` asks, then the files the command
wrote become the workspace, a snapshot follows). The sandbox runs as a local child process here
(SANDBOX_EXEC_LOCAL=1); deployed it is a function with no permissions and no network."""

from __future__ import annotations

import base64
import time
from typing import Any

import pytest
from helpers.engine import grant, make_ctx, new_thread, of_type, run, say, verify_export
from threads_aws.core.canonical import sha256_hex
from threads_aws.sandbox.exec_runner import run as run_sandbox


def f(path: str, data: bytes, mode: int = 0o644) -> dict[str, Any]:
    return {"data_b64": base64.b64encode(data).decode(), "mode": mode, "path": path}


def test_runner_reports_changed_new_and_deleted_files(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SANDBOX_TMP", str(tmp_path))
    files = [f("keep.txt", b"same"), f("edit.txt", b"old"), f("gone.txt", b"x"), f("d/x.sh", b"echo")]
    cmd = (
        "echo new > edit.txt && mkdir -p out && echo hi > out/new.txt && rm gone.txt"
        " && chmod 755 d/x.sh; echo done"
    )
    answer = run_sandbox({"command": cmd, "files": files, "timeout_ms": 10_000})
    assert answer["exit_code"] == 0 and answer["stdout"] == "done\n" and not answer["timed_out"]
    got = {c["path"]: (c["mode"], base64.b64decode(c["data_b64"])) for c in answer["changed"]}
    assert got == {"d/x.sh": (0o755, b"echo"), "edit.txt": (0o644, b"new\n"), "out/new.txt": (0o644, b"hi\n")}
    assert answer["deleted"] == ["gone.txt"]
    assert list(tmp_path.iterdir()) == []  # the tree is gone with the run


def test_runner_timeout_kills_the_process_group(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SANDBOX_TMP", str(tmp_path))
    started = time.monotonic()
    answer = run_sandbox({"command": "sleep 30 & sleep 30; echo never", "files": [], "timeout_ms": 500})
    assert answer["timed_out"] and answer["stdout"] == "" and time.monotonic() - started < 10


def test_exec_through_the_worker(aws: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    say(ctx, b, "exec: echo hi")
    run(ctx, b)
    grant(ctx, b)
    run(ctx, b)
    r = of_type(ctx, b, "tool_result")[-1]["data"]
    assert r["is_error"] and r["preview"].startswith("exec_unavailable:")  # no sandbox configured

    monkeypatch.setenv("SANDBOX_EXEC_LOCAL", "1")
    say(ctx, b, "write in.txt: 3 4")
    run(ctx, b)
    say(ctx, b, "exec: cat in.txt | tr ' ' '\\n' > out.txt && rm in.txt && echo ok")
    run(ctx, b)
    grant(ctx, b)
    run(ctx, b)
    r = of_type(ctx, b, "tool_result")[-1]["data"]
    assert not r["is_error"], r["preview"]
    assert r["preview"] == "exit 0\n--- stdout\nok\n--- workspace: wrote out.txt, deleted in.txt"
    fold = ctx.writer.load(b).fold
    manifest = ctx.stores.artifacts.get(fold.workspace)
    assert sha256_hex(b"3\n4") in manifest.decode() and b"in.txt" not in manifest
    assert of_type(ctx, b, "snapshot")[-1]["data"]["manifest_hash"] == fold.workspace
    verify_export(ctx, b)
