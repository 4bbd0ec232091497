"""`threads-aws dev` as a subprocess for tests that need the whole local host over real HTTP
(its clients and caches never mix with other tests' moto mocks): start it, call it, stop it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
ALICE = "dev:api:local:alice"


@dataclass
class DevProcess:
    url: str
    env: dict[str, str]  # the store environment the banner prints
    proc: subprocess.Popen[str]
    log: Path

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        token: str | None = ALICE,
        headers: dict[str, str] | None = None,
        timeout: float = 60,
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

    def start_run(self, text: str, **extra: Any) -> dict[str, str]:
        status, body, _ = self.call(
            "POST",
            "/v1/runs",
            {"agent": "demo", "input": text, **extra},
            headers={"Idempotency-Key": str(uuid.uuid4())},
        )
        assert status == 202, body
        return body  # type: ignore[no-any-return]

    def timeline(self, thread_id: str) -> list[dict[str, Any]]:
        """Every event of the thread's main branch, following the pages' Link headers."""
        events: list[dict[str, Any]] = []
        query = ""
        while True:
            status, body, headers = self.call("GET", f"/v1/threads/{thread_id}/timeline{query}")
            assert status == 200, body
            events += [e["event"] for e in body["entries"]]
            link = next((v for k, v in headers.items() if k.lower() == "link"), None)
            if link is None:
                return events
            query = "?" + link.split("?", 1)[1].split(">", 1)[0]

    def wait_for(
        self, thread_id: str, event_type: str, *, count: int = 1, timeout: float = 60
    ) -> list[dict[str, Any]]:
        """Poll the timeline until `count` events of `event_type` are in it."""
        deadline = time.monotonic() + timeout
        while True:
            events = self.timeline(thread_id)
            if sum(e["type"] == event_type for e in events) >= count:
                return events
            assert time.monotonic() < deadline, f"no {event_type} in {[e['type'] for e in events]}"
            time.sleep(0.1)


@contextmanager
def dev_process(
    tmp: Path, env: dict[str, str] | None = None, args: list[str] | None = None
) -> Iterator[DevProcess]:
    exe = Path(sys.executable).with_name("threads-aws")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "threads_aws"]
    full = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    full.update(env or {})
    log_path = tmp / "dev.log"
    log = open(log_path, "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        # A state dir of its own: never ./.threads-aws of the repo (the command's default).
        [*cmd, "dev", "--port", "0", "--dev-tokens", "--state-dir", str(tmp / "state"), *(args or [])],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        env=full,
        cwd=REPO,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline().strip()
        assert first.startswith("ready http://127.0.0.1:"), first + log_path.read_text()[-3000:]
        lines = [proc.stdout.readline().strip() for _ in range(4)]
        store = next(line for line in lines if line.startswith("store: "))
        store_env = dict(w.split("=", 1) for w in store.split()[1:] if "=" in w)
        yield DevProcess(first.split(" ", 1)[1], store_env, proc, log_path)
        if proc.poll() is None:  # a crash test may have killed it (kill -9) on purpose
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
        if proc.stdout:
            proc.stdout.close()
