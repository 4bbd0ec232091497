"""Context editing driven through `threads-aws dev` over real HTTP, as a user would: the bundled
`demo-tidy` agent clears the first `time` result before the second turn's last request
(`context_edited{threshold}`), then `POST …/redactions` forgets a piece of the kept result
(`context_edited{manual}`); the next run's request renders both edits, and the log exports,
verifies (every request re-rendered) and re-imports."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers.dev_process import DevProcess, dev_process, export_verifies


def run(dev: DevProcess, text: str, thread_id: str | None = None) -> dict[str, Any]:
    extra = {"thread_id": thread_id} if thread_id else {}
    started = dev.start_run(text, agent="demo-tidy", **extra)
    _, _, outcome = dev.stream(started["thread_id"], started["run_id"])
    assert outcome["status"] == "completed", outcome
    return started


def test_clear_and_redact_through_dev(tmp_path: Path) -> None:
    with dev_process(tmp_path) as dev:
        first = run(dev, "time")
        tid = first["thread_id"]
        run(dev, "time", tid)
        events = dev.timeline(tid)
        calls = [e["data"]["call_id"] for e in events if e["type"] == "tool_call"]
        (cleared,) = [e for e in events if e["type"] == "context_edited"]
        assert cleared["data"] == {"edits": [{"action": "clear", "call_id": calls[0]}], "reason": "threshold"}
        kept = next(e for e in events if e["type"] == "tool_result" and e["data"]["call_id"] == calls[1])
        piece = kept["data"]["preview"][:4]
        status, body, _ = dev.call(
            "POST", f"/v1/threads/{tid}/redactions", {"call_id": calls[1], "match": piece}
        )
        assert status == 200 and set(body) == {"event_id"}, body
        status, err, _ = dev.call(
            "POST", f"/v1/threads/{tid}/redactions", {"call_id": "call_x", "match": "a"}
        )
        assert (status, err["error"]["code"]) == (400, "invalid_request")
        run(dev, "hi", tid)
        events = dev.timeline(tid)
        edits = [e["data"]["reason"] for e in events if e["type"] == "context_edited"]
        assert edits == ["threshold", "manual"]
        assert events[-1]["type"] == "turn_completed"
        # `log verify` re-renders every request from the events before it (the placeholder, the
        # [redacted] spans) and compares it with the bytes that were sent: byte-equal or it fails
        export_verifies(dev, first["branch_id"], tmp_path)
