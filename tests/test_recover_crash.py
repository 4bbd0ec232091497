"""A worker killed (`kill -9`) while an OpenAI answer is in flight, through `threads-aws dev` over
real HTTP and the local OpenAI fake: the agent's adapter is set to `recover: true`, so the
Responses request went out `store: true, background: true` with the client id in its metadata,
and the id OpenAI assigned was recorded when the stream began. The fake then holds the stream
silent (`hang`) and the dev process is killed. The restarted host (same state dir) redelivers
the run step; once the dead worker's lease lapses, recovery fetches the stored response with
`GET /v1/responses/{id}` and appends `model_response_recovered`: the turn completes with the
answer, no request is sent (or billed) a second time, and the log exports, verifies and
re-imports."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

from helpers.dev_process import DevProcess, dev_process, export_verifies, wait_until
from threads_aws import agents
from threads_aws_dev.fakes.models import FakeServer

LEASE_MS = 5000
DROP = ("AWS_", "ANTHROPIC_", "OPENAI_", "AGENTS_FILE")


def wait(pred: Any, timeout: float, what: str) -> Any:
    return wait_until(pred, timeout, what, every=0.2)


def agents_file(tmp: Path) -> Path:
    bundled = json.loads(agents.DEFAULT_FILE.read_text())
    base = bundled["openai"]
    adapter = {**base["adapter"], "settings": {**base["adapter"]["settings"], "recover": True}}
    recovering = {**base, "adapter": adapter, "fallback_models": []}
    path = tmp / "agents.json"
    path.write_text(json.dumps({**bundled, "openai-recover": recovering}))
    return path


def provider_row(dev: DevProcess, branch_id: str, request_event_id: str) -> Any:
    key = {"pk": {"S": f"PROVREQ#{branch_id}"}, "sk": {"S": request_event_id}}
    item = dev.client("dynamodb").get_item(TableName=dev.env["STATE_TABLE"], Key=key).get("Item")
    return item and item["provider_request_id"]["S"]


def test_an_answer_in_flight_at_a_kill_9_is_recovered_not_resent(tmp_path: Path):
    fake = FakeServer().start()
    fake.state.hang_s = 120.0  # the answer never reaches the first worker
    fake.fail("openai", "hang")
    env = {
        "AGENTS_FILE": str(agents_file(tmp_path)),
        "OPENAI_API_KEY": "sk-fake",
        "OPENAI_BASE_URL": fake.url + "/v1",
        "RUN_STEP_LEASE_TTL_MS": str(LEASE_MS),  # the dead worker's lease lapses in seconds
    }
    billed = lambda: [r for r in fake.state.requests if r["path"] == "/v1/responses"]  # noqa: E731
    try:
        with dev_process(tmp_path, env, drop_env=DROP) as dev:
            run = dev.start_run("hello there", agent="openai-recover")
            thread_id = run["thread_id"]
            wait(billed, 60, "the request to reach OpenAI")
            sent = billed()[0]["body"]
            assert (sent["store"], sent["background"]) == (True, True)
            branch_id, rid = sent["metadata"]["client_request_id"].split(":")
            assert wait(lambda: provider_row(dev, branch_id, rid), 30, "the provider's id recorded")
            assert dev.timeline(thread_id)[-1]["type"] == "model_request"
            dev.proc.send_signal(signal.SIGKILL)  # the worker dies with the answer in flight
            assert dev.proc.wait(timeout=30) == -signal.SIGKILL
        with dev_process(tmp_path, env, drop_env=DROP) as dev:  # the same state dir
            done = wait(
                lambda: (evs := dev.timeline(thread_id))[-1]["type"] == "turn_completed" and evs,
                150,
                "the recovered turn",
            )
            kinds = [e["type"] for e in done]
            assert kinds[-3:] == ["model_request", "model_response_recovered", "turn_completed"]
            assert kinds.count("model_request") == 1 and "model_attempt_abandoned" not in kinds
            recovered = done[-2]
            assert recovered["data"]["request_event_id"] == rid
            assert recovered["data"]["provider_request_id"] == provider_row(dev, branch_id, rid)
            assert recovered["data"]["content"] == [{"text": 'You said: "hello there"', "type": "text"}]
            assert recovered["actor"]["kind"] == "recovery"
            assert done[-1]["data"]["reason"] == "end_turn"
            assert len(billed()) == 1  # recovered, never sent (nor billed) again
            assert fake.state.retrievals == [recovered["data"]["provider_request_id"]]
            _, _, outcome = dev.stream(thread_id, run["run_id"])
            assert outcome["status"] == "completed", outcome
            export_verifies(dev, branch_id, tmp_path)
    finally:
        fake.stop()
