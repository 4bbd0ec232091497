"""A `threads-aws dev` subprocess as the end-to-end tests drive it: `Dev` calls the local gateway
over real HTTP, follows a run's SSE windows like an EventSource, and reads timelines."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


TEMPLATE = Path(os.environ.get("THREADS_E2E_TEMPLATE") or REPO / "template.yaml")


ALICE = "dev:api:local:alice"


MALLORY = "dev:api:other:mallory"  # another tenant


DEADLINE_S = 20


@dataclass
class Dev:
    url: str
    env: dict[str, str]
    hook_dir: Path
    proc: subprocess.Popen[str]
    seen: dict[str, Any] = field(default_factory=dict)

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        token: str | None = ALICE,
        headers: dict[str, str] | None = None,
        timeout: float = 30,
    ) -> tuple[int, Any, dict[str, str]]:
        hs = dict(headers or {})
        if token is not None:
            hs["Authorization"] = f"Bearer {token}"
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            hs.setdefault("Content-Type", "application/json")
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=hs)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                status, raw, rh = r.status, r.read(), dict(r.headers)
        except urllib.error.HTTPError as exc:
            status, raw, rh = exc.code, exc.read(), dict(exc.headers)
        ctype = rh.get("Content-Type", "")
        return status, (json.loads(raw) if raw and "json" in ctype else raw.decode()), rh

    def start(self, text: str, **extra: Any) -> dict[str, str]:
        status, body, _ = self.call(
            "POST",
            "/v1/runs",
            {"agent": "demo", "input": text, **extra},
            headers={"Idempotency-Key": str(uuid.uuid4())},
        )
        assert status == 202, body
        return body  # type: ignore[no-any-return]

    def stream(
        self, thread_id: str, run_id: str, last_id: int | None = None
    ) -> tuple[list[dict[str, Any]], int | None, dict[str, Any]]:
        """Follow the run until its result message, reconnecting after each window with
        Last-Event-ID like an EventSource; returns (event messages, last id, RunOutcome)."""
        events: list[dict[str, Any]] = []
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            headers = {} if last_id is None else {"Last-Event-ID": str(last_id)}
            status, text, rh = self.call(
                "GET", f"/v1/threads/{thread_id}/runs/{run_id}/events", headers=headers
            )
            assert status == 200, text
            assert rh.get("Content-Type", "").startswith("text/event-stream")
            for block in text.split("\n\n"):
                fields: dict[str, str] = {}
                for line in block.splitlines():
                    name, _, value = line.partition(":")
                    fields[name] = value.removeprefix(" ")
                if "data" not in fields:
                    continue
                msg = json.loads(fields["data"])
                if msg["kind"] == "result":
                    assert "id" not in fields and msg["run_id"] == run_id
                    return events, last_id, msg["result"]
                if msg["kind"] in ("delta", "status"):  # transient: no id, never replayed
                    assert "id" not in fields
                    continue
                seq = int(fields["id"])
                assert last_id is None or seq > last_id, "a duplicate or out-of-order event"
                assert msg["event"]["seq"] == seq
                last_id = seq
                events.append(msg["event"])
        raise AssertionError(f"run {run_id} did not settle within {DEADLINE_S}s")

    def timeline(self, thread_id: str, token: str = ALICE) -> list[dict[str, Any]]:
        status, body, _ = self.call("GET", f"/v1/threads/{thread_id}/timeline", token=token)
        assert status == 200, body
        return [e["event"] for e in body["entries"]]


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]
