"""A park escalation across `kill -9`, through `threads-aws dev` over real HTTP with a state
dir: the `demo-ttl` agent's approvals expire after 20 s, and the park arms its wake-up on the
run-step timer when it is appended. The process is killed with the wake-up pending and stays
down past `expires_at`; the restarted host (same state dir) delivers the delayed wake-up and
escalates. It is killed again the moment `park_escalated` shows in the timeline (the timer
message's delete may or may not have landed, so the wake-up may come again). After the last
restart the log holds the escalation exactly once, nothing was auto-resolved, a grant is
`approval_expired` (recorded as a denial), the run then completes, and the log exports and
verifies."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from helpers.dev_process import DevProcess, dev_process, export_verifies, wait_until

TTL_MS = 20_000  # the demo-ttl agent's approval_ttl_ms


def kill_9(dev: DevProcess) -> None:
    dev.proc.send_signal(signal.SIGKILL)
    assert dev.proc.wait(timeout=30) == -signal.SIGKILL


def test_a_park_escalation_across_kill_9_is_recorded_once(tmp_path: Path) -> None:
    with dev_process(tmp_path) as dev:
        run = dev.start_run("note: call dad", agent="demo-ttl")
        thread_id = run["thread_id"]
        parked = dev.wait_for(thread_id, "parked", timeout=180)
        (req,) = [e for e in parked if e["type"] == "approval_requested"]
        expires_ms = req["data"]["expires_at"]
        assert abs(expires_ms - (req["time"] + TTL_MS)) < 5000  # the TTL from the park's clock
        status, approvals, _ = dev.call("GET", f"/v1/threads/{thread_id}/approvals")
        assert status == 200 and [a["challenge_id"] for a in approvals] == [req["data"]["challenge_id"]]
        kill_9(dev)  # parked, its wake-up armed on the timer queue, not yet due
    # Down when the TTL passes: the escalation is due while no host runs.
    time.sleep(max(0.0, expires_ms / 1000 - time.time()) + 0.5)
    with dev_process(tmp_path) as dev:
        dev.wait_for(thread_id, "park_escalated", timeout=180)
        kill_9(dev)  # the moment it is recorded: the wake-up's delete may be lost
    with dev_process(tmp_path) as dev:
        time.sleep(3)  # a redelivered wake-up, if any, runs its step meanwhile
        events = dev.timeline(thread_id)
        seen = [e["type"] for e in events]
        assert seen.count("park_escalated") == 1 and seen.count("parked") == 1, seen
        assert seen[-1] == "park_escalated"  # nothing auto-resolved
        (esc,) = [e for e in events if e["type"] == "park_escalated"]
        cid = req["data"]["challenge_id"]
        assert esc["data"] == {"address": {"id": cid, "kind": "approval"}}
        assert esc["actor"] == {"kind": "host"} and esc["time"] >= expires_ms
        status, body, _ = dev.call("POST", f"/v1/threads/{thread_id}/approvals/{cid}", {"decision": "grant"})
        assert status == 409 and body["error"]["code"] == "approval_expired", (status, body)
        done = wait_until(
            lambda: (evs := dev.timeline(thread_id))[-1]["type"] == "turn_completed" and evs,
            180,
            "the denied run to finish",
        )
        seen = [e["type"] for e in done]
        assert seen.count("park_escalated") == 1 and seen.count("approval_denied") == 1
        assert "approval_granted" not in seen and "effect_commit" not in seen
        (result,) = [e for e in done if e["type"] == "tool_result"]
        assert result["data"]["origin"] == "denied"
        _, _, outcome = dev.stream(thread_id, run["run_id"])
        assert outcome["status"] == "completed", outcome
        export_verifies(dev, run["branch_id"], tmp_path)
