"""Issue 12's acceptance through `threads-aws dev` (real HTTP, the local gateway, the SQS-driven
worker): a run writes notes.txt and its turn ends with a snapshot; fork-points lists it; POST
…/forks answers 201 with a runnable child; the child reads notes.txt and overwrites it; the
parent still reads the original; both branches export and verify with the offline CLI; escapes
and unknown snapshots get typed errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers.people_dev import people_dev
from threads_aws_client import Client, NoSnapshotBoundaryError

ALICE = "dev:api:local:alice"


@pytest.fixture(scope="module")
def url() -> str:
    return people_dev().url


def done(client: Client, text: str, **kw: Any) -> dict[str, Any]:
    outcome = client.run("demo", text, **kw).wait()
    assert outcome["status"] == "completed", outcome
    return dict(outcome)


def said(outcome: dict[str, Any]) -> str:
    return json.dumps(outcome["output"])


def export_verified(branch_id: str, tmp_path: Path) -> None:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("AWS_")}, **people_dev().env}
    out = tmp_path / f"{branch_id}.jsonl"
    cli = [sys.executable, "-m", "threads_aws_dev", "log"]
    subprocess.run([*cli, "export", "--branch", branch_id, "-o", str(out)], env=env, check=True, timeout=120)
    verified = subprocess.run([*cli, "verify", str(out)], capture_output=True, text=True, timeout=120)
    assert verified.returncode == 0 and verified.stdout.startswith("ok "), verified.stderr


def test_write_snapshot_fork_and_both_branches_go_on(url: str, tmp_path: Path) -> None:
    with Client(url, ALICE) as client:
        first = done(client, "write notes.txt: the original")
        t, parent = first["thread_id"], first["branch_id"]
        entries = client.timeline(t)["entries"]
        assert entries[-1]["event"]["type"] == "snapshot" and entries[-1]["fork_point"] is True
        assert entries[-2]["event"]["type"] == "turn_completed"
        (point,) = client.fork_points(t)
        assert point["snapshot"]["provider"] == "s3_workspace"

        resp = httpx.post(
            f"{url}/v1/threads/{t}/forks",
            json={"event_id": point["event_id"]},
            headers={"Authorization": f"Bearer {ALICE}"},
            timeout=60,
        )
        assert resp.status_code == 201, resp.text
        child = resp.json()["branch_id"]
        assert {"branch_id": child, "mode": "live", "runnable": True}.items() <= next(
            b for b in client.branches(t) if b["branch_id"] == child
        ).items()

        assert "the original" in said(done(client, "read notes.txt", thread_id=t, branch_id=child))
        done(client, "write notes.txt: rewritten in the child", thread_id=t, branch_id=child)
        assert "rewritten in the child" in said(done(client, "read notes.txt", thread_id=t, branch_id=child))
        assert "the original" in said(done(client, "read notes.txt", thread_id=t, branch_id=parent))
        assert len(client.fork_points(t, child)) == 2  # the inherited point and the child's own

        escaped = done(client, "write ../../etc/passwd: x", thread_id=t, branch_id=parent)
        assert "path_outside_workspace" in said(escaped)
        with pytest.raises(NoSnapshotBoundaryError):
            client.fork(t, "0192e000-0000-7000-8000-0000000000ff")
    export_verified(parent, tmp_path)
    export_verified(child, tmp_path)


def approved(client: Client, text: str, **kw: Any) -> dict[str, Any]:
    """Run `text`, which parks on an approval; grant it and follow the run to its outcome."""
    handle = client.run("demo", text, **kw)
    parked = handle.wait()
    assert parked["status"] == "parked" and parked["reason"] == "awaiting_approval", parked
    (pending,) = client.approvals(parked["thread_id"], parked["branch_id"])
    client.approve(parked["thread_id"], pending["challenge_id"])
    rest = client.stream(parked["thread_id"], handle.run_id, after_seq=handle.cursor)
    list(rest)
    assert rest.result is not None
    return dict(rest.result)


def test_exec_runs_in_the_template_sandbox_function(url: str, tmp_path: Path) -> None:
    """dev invokes SandboxExecFunction through its Lambda Invoke API (the worker's boto3 client,
    the template's FunctionName, handler and Timeout): /tmp, the workspace's files, the changes."""
    with Client(url, ALICE) as client:
        first = done(client, "write in.txt: 3 4")
        t, b = first["thread_id"], first["branch_id"]
        out = approved(client, "exec: pwd; tr ' ' '\\n' < in.txt > out.txt", thread_id=t, branch_id=b)
        assert out["status"] == "completed", out
        assert "/tmp/ws-" in said(out) and "wrote out.txt" in said(out)
        assert "3\\n4" in said(done(client, "read out.txt", thread_id=t, branch_id=b))
        big = approved(client, "exec: head -c 1048577 /dev/zero > big.bin", thread_id=t, branch_id=b)
        assert "file_too_large" in said(big)  # typed, and nothing of the run became the workspace
        assert "big.bin" not in said(done(client, "ls", thread_id=t, branch_id=b))
    export_verified(b, tmp_path)


def test_stub_fork_over_http_fails_closed(url: str, tmp_path: Path) -> None:
    """POST …/forks {mode: stub}: 201, BranchInfo mode stub, the workspace readable, and an
    external operation the parent never made ends the run `unmatched_external_op`."""
    with Client(url, ALICE) as client:
        first = done(client, "write notes.txt: for the stub")
        t, parent = first["thread_id"], first["branch_id"]
        (point,) = client.fork_points(t)
        resp = httpx.post(
            f"{url}/v1/threads/{t}/forks",
            json={"event_id": point["event_id"], "mode": "stub"},
            headers={"Authorization": f"Bearer {ALICE}"},
            timeout=60,
        )
        assert resp.status_code == 201, resp.text
        child = resp.json()["branch_id"]
        info = next(x for x in client.branches(t) if x["branch_id"] == child)
        assert info["mode"] == "stub" and info["runnable"] is True
        assert "for the stub" in said(done(client, "read notes.txt", thread_id=t, branch_id=child))
        failed = approved(client, "note: never recorded", thread_id=t, branch_id=child)
        assert failed["status"] == "failed" and failed["error"]["code"] == "unmatched_external_op", failed
    export_verified(parent, tmp_path)
    export_verified(child, tmp_path)
    export_verified(child, tmp_path)
