"""A deferred call's completion across `kill -9`, through `threads-aws dev` over real HTTP with
a state dir: the demo's `later <ms>: text` is a deferred tool, so the turn gets its placeholder
(`tool_result{origin: deferred}`) at once and the deferred-call runner (the DeferredCallFunction's
poller, in the same process) sleeps `<ms>` before it records `tool_result_late`. The process is
killed twice: while the runner holds the call (its message in flight, nothing recorded), and
again the moment the late result shows in the timeline (the message's delete and the branch's
wake-up may or may not have landed). Each restart on the same state dir sees the message again
(a receive is a lease, never journaled) and the heartbeat timer still armed; in the end the log
holds one placeholder, one late result and one completed turn, and it exports and verifies."""

from __future__ import annotations

import signal
from pathlib import Path

from helpers.dev_process import DevProcess, dev_process, export_verifies, wait_until

DELAY_MS = 15_000  # long enough to kill the runner mid-call, short enough for a quick test


def kinds(dev: DevProcess, thread_id: str) -> list[str]:
    return [e["type"] for e in dev.timeline(thread_id)]


def deferred_in_flight(dev: DevProcess) -> bool:
    """The runner holds the call: the deferred-call queue's one message is received, not deleted."""
    sqs = dev.client("sqs")
    (url,) = [u for u in sqs.list_queues()["QueueUrls"] if u.endswith("-deferred-call-queue")]
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    return attrs["ApproximateNumberOfMessagesNotVisible"] == "1"


def kill_9(dev: DevProcess) -> None:
    dev.proc.send_signal(signal.SIGKILL)
    assert dev.proc.wait(timeout=30) == -signal.SIGKILL


def test_a_deferred_call_killed_mid_completion_records_its_late_result_once(tmp_path: Path) -> None:
    with dev_process(tmp_path) as dev:
        run = dev.start_run(f"later {DELAY_MS}: hello")
        thread_id = run["thread_id"]
        placed = dev.wait_for(thread_id, "tool_result", timeout=180)
        (placeholder,) = [e for e in placed if e["type"] == "tool_result"]
        assert placeholder["data"]["origin"] == "deferred"
        wait_until(lambda: deferred_in_flight(dev), 90, "the runner to take the call")
        assert "tool_result_late" not in kinds(dev, thread_id)
        kill_9(dev)  # the call is running: nothing of its result is recorded
    with dev_process(tmp_path) as dev:  # the same state dir: the message is visible again
        dev.wait_for(thread_id, "tool_result_late", timeout=180)
        kill_9(dev)  # the moment it is recorded: its message and the wake-up may be lost
    with dev_process(tmp_path) as dev:
        done = wait_until(
            lambda: (evs := dev.timeline(thread_id))[-1]["type"] == "turn_completed" and evs,
            270,
            "the turn to complete after the late result",
        )
        seen = [e["type"] for e in done]
        assert seen.count("tool_result") == 1 and seen.count("tool_result_late") == 1
        assert seen.count("tool_call") == 1 and seen.count("turn_completed") == 1
        (late,) = [e for e in done if e["type"] == "tool_result_late"]
        assert late["data"]["call_id"] == placeholder["data"]["call_id"]
        assert late["data"]["preview"] == "later: hello" and not late["data"]["is_error"]
        after = seen[seen.index("tool_result_late") :]
        assert after[-3:] == ["model_request", "model_response", "turn_completed"]
        # The demo model answers the latest user line: the late result's, or, when the restarts
        # outlasted heartbeat_ms, the heartbeat appended before it (both are in that request).
        final = done[-2]["data"]["content"][0]["text"]
        assert final == "Done: later: hello" or final.startswith('You said: "<heartbeat>'), final
        _, _, outcome = dev.stream(thread_id, run["run_id"])
        assert outcome["status"] == "completed", outcome
        assert not deferred_in_flight(dev)
        export_verifies(dev, run["branch_id"], tmp_path)
