"""Issue 17 §6 through `threads-aws dev` (real HTTP, the local gateway, the SQS-driven worker):
`team: demo-team: …` on the `demo-team` agent, a lead whose members claim, report and complete
its tasks in blocker order, every member run by the queue as the dev host runs them. Each log
is exported with the offline CLI, verified (re-rendered), re-imported and reduced; the
`team_tasks` and `children` projections say what the timelines show."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.people_dev import people_dev
from threads_aws.core import projections
from threads_aws.core.importer import import_log
from threads_aws_client import Client

ALICE = "dev:api:local:alice"


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


def test_a_team_works_its_task_list_through_dev(url: str, tmp_path: Path) -> None:
    with Client(url, ALICE) as client:
        stream = client.run("demo-team", "team: demo-team: write the spec; build it")
        t = stream.accepted["thread_id"]
        done = stream.wait()
        assert done["status"] == "completed", done
        assert done["output"].endswith("(2 team messages read)")

        entries = client.timeline(t)["entries"]
        members = [e["data"]["child_thread_id"] for e in of_type(entries, "agent_spawned")]
        assert len(members) == 2
        claims = [e["data"] for e in of_type(entries, "team_task_claimed")]
        assert claims == [{"member": m, "task_id": f"t{i}"} for i, m in enumerate(members, 1)]
        assert [e["data"]["from"] for e in of_type(entries, "team_message")] == members
        delivered = [e for e in of_type(entries, "injected") if e["data"]["source"] == "agent"]
        assert len(delivered) == 2

        lead_fold = exported(entries[0]["event"]["branch_id"], tmp_path)
        state = projections.all_projections(lead_fold.events)
        assert state["team_tasks"] == [
            {"owner": m, "status": "completed", "task_id": f"t{i}"} for i, m in enumerate(members, 1)
        ]
        assert state["children"] == [{"child_thread_id": m, "status": "completed"} for m in members]
        assert client.thread(t)["team_tasks"] == state["team_tasks"]  # the API says the same
        assert "team_tasks" not in client.thread(members[0])  # a member's own board is empty
        assert state["run"]["status"] == "completed"
        for m in members:
            member_entries = client.timeline(m)["entries"]
            assert of_type(member_entries, "user_input")[0]["data"]["source"] == "parent_agent"
            fold = exported(member_entries[0]["event"]["branch_id"], tmp_path)
            assert projections.all_projections(fold.events)["run"]["status"] == "completed"
