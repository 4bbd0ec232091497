"""Issue 11 §3's acceptance through `threads-aws dev` (real HTTP, the local gateway, the
SQS-driven worker): a subagent run whose child asks for approval, which the ROOT's approver
grants through the child's approval route, and whose result reaches the parent; a handoff whose
target thread runs the forwarded request. Every log is exported with the offline CLI,
re-imported and reduced; the `children` projection matches what happened."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers.people_dev import people_dev
from threads_aws.core import projections
from threads_aws.core.importer import import_log
from threads_aws_client import Client, ForbiddenError

ALICE = "dev:api:local:alice"
BOB = "dev:api:local:bob"  # same tenant, not the root run's principal


@pytest.fixture(scope="module")
def url() -> str:
    return people_dev().url


def exported(branch_id: str, tmp_path: Path) -> Any:
    """The branch exported by the offline CLI, verified, re-imported: its fold."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("AWS_")}, **people_dev().env}
    out = tmp_path / f"{branch_id}.jsonl"
    cli = [sys.executable, "-m", "threads_aws_dev", "log"]
    subprocess.run([*cli, "export", "--branch", branch_id, "-o", str(out)], env=env, check=True, timeout=120)
    verified = subprocess.run([*cli, "verify", str(out)], capture_output=True, text=True, timeout=120)
    assert verified.returncode == 0 and verified.stdout.startswith("ok "), verified.stderr
    return import_log(out.read_bytes()).fold


def of_type(entries: list[dict[str, Any]], typ: str) -> list[dict[str, Any]]:
    return [e["event"] for e in entries if e["event"]["type"] == typ]


def wait_for(check: Any, what: str, timeout_s: float = 30) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_subagent_child_approval_by_root_approver_reaches_the_parent(url: str, tmp_path: Path) -> None:
    with Client(url, ALICE) as client:
        stream = client.run("demo", "spawn: demo: note: buy milk")
        t, run_id = stream.accepted["thread_id"], stream.accepted["run_id"]
        parked = stream.wait()
        assert parked["status"] == "parked", parked
        (spawned,) = of_type(client.timeline(t)["entries"], "agent_spawned")
        child = spawned["data"]["child_thread_id"]
        assert parked["pending"] == [{"id": child, "kind": "child"}]
        (pending,) = client.approvals(child)
        assert pending["tool"] == "note" and pending["input"] == {"text": "buy milk"}
        with Client(url, BOB) as bob, pytest.raises(ForbiddenError):
            bob.approve(child, pending["challenge_id"])
        client.approve(child, pending["challenge_id"])
        done = client.stream(t, run_id, through_parks=True).wait()
        assert done["status"] == "completed", done
        assert done["output"].startswith("Done: Done: ")  # the child's answer came back as the result

        entries = client.timeline(t)["entries"]
        (finished,) = of_type(entries, "agent_finished")
        assert finished["data"]["status"] == "completed" and finished["data"]["child_thread_id"] == child
        child_entries = client.timeline(child)["entries"]
        assert child_entries[0]["event"]["data"]["parent"]["relation"] == "subagent"
        assert of_type(child_entries, "approval_granted")[0]["actor"]["principal"]["subject"] == "alice"

        parent_fold = exported(entries[0]["event"]["branch_id"], tmp_path)
        child_fold = exported(child_entries[0]["event"]["branch_id"], tmp_path)
        state = projections.all_projections(parent_fold.events)
        assert state["children"] == [{"child_thread_id": child, "status": "completed"}]
        assert client.thread(t)["children"] == state["children"]  # the API says the same
        assert client.thread(child)["parent"]["thread_id"] == t
        assert state["run"]["status"] == "completed"
        assert projections.all_projections(child_fold.events)["run"]["status"] == "completed"


def test_handoff_through_dev(url: str, tmp_path: Path) -> None:
    with Client(url, ALICE) as client:
        outcome = client.run("demo", "handoff: demo").wait()
        assert outcome["status"] == "handed_off", outcome
        target = outcome["to_thread_id"]

        def target_done() -> list[dict[str, Any]] | None:
            entries = client.timeline(target)["entries"]
            return entries if of_type(entries, "turn_completed") else None

        entries = wait_for(target_done, "the handoff target's turn")
        first = [e["event"] for e in entries[:2]]
        assert first[0]["data"]["parent"]["relation"] == "handoff"
        assert first[1]["data"]["source"] == "handoff"
        assert of_type(entries, "turn_completed")[0]["data"] == {"reason": "end_turn"}
        source = client.timeline(outcome["thread_id"])["entries"]
        assert of_type(source, "handoff")[0]["data"]["to_thread_id"] == target

        fold = exported(outcome["branch_id"], tmp_path)
        assert projections.all_projections(fold.events)["run"]["status"] == "handed_off"
        projections.all_projections(exported(entries[0]["event"]["branch_id"], tmp_path).events)
