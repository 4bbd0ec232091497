"""`threads-aws dev` as a subprocess for tests that need the whole local host over real HTTP
(its clients and caches never mix with other tests' moto mocks): start it, call it, follow a
run's SSE windows like an EventSource, read timelines, stop it. The one dev-process helper:
`helpers.e2e.Dev` is this with the end-to-end tests' names."""

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parents[2]
ALICE = "dev:api:local:alice"
STREAM_DEADLINE_S = 20


def wait_until(pred: Any, timeout: float = 30.0, what: str = "condition", *, every: float = 0.1) -> Any:
    """Poll `pred` until it returns something truthy (returned), failing after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(every)


@dataclass
class DevProcess:
    url: str
    env: dict[str, str]  # the store environment the banner prints
    proc: subprocess.Popen[str]
    log: Path
    call_timeout: float = 60
    seen: dict[str, Any] = field(default_factory=dict)  # what a test keeps across its steps

    @property
    def dir(self) -> Path:
        """The test's directory the process runs in (its log, state dir, hook files)."""
        return self.log.parent

    def client(self, service: str) -> Any:
        """A boto3 client of the dev host's in-process AWS (the banner's endpoint and region)."""
        import boto3

        e = self.env
        return boto3.client(
            service,
            endpoint_url=e["AWS_ENDPOINT_URL"],
            region_name=e["AWS_DEFAULT_REGION"],
            aws_access_key_id=e.get("AWS_ACCESS_KEY_ID", "testing"),
            aws_secret_access_key=e.get("AWS_SECRET_ACCESS_KEY", "testing"),
        )

    def inbox_rows(self) -> list[Any]:
        """Every channel inbox row of the dev host's state table."""
        from threads_aws.store.inbox import Inbox

        return Inbox(self.client("dynamodb"), self.env["STATE_TABLE"]).all_rows()

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        token: str | None = ALICE,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> tuple[int, Any, dict[str, str]]:
        timeout = self.call_timeout if timeout is None else timeout
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

    def stream(
        self, thread_id: str, run_id: str, last_id: int | None = None
    ) -> tuple[list[dict[str, Any]], int | None, dict[str, Any]]:
        """Follow the run until its result message, reconnecting after each window with
        Last-Event-ID like an EventSource; returns (event messages, last id, RunOutcome)."""
        events: list[dict[str, Any]] = []
        deadline = time.monotonic() + STREAM_DEADLINE_S
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
        raise AssertionError(f"run {run_id} did not settle within {STREAM_DEADLINE_S}s")

    def timeline(self, thread_id: str, token: str = ALICE) -> list[dict[str, Any]]:
        """Every event of the thread's main branch, following the pages' Link headers."""
        events: list[dict[str, Any]] = []
        query = ""
        while True:
            status, body, headers = self.call("GET", f"/v1/threads/{thread_id}/timeline{query}", token=token)
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


def export_verifies(dev: DevProcess, branch_id: str, tmp: Path) -> None:
    """The stored branch exports (`threads-aws log export`), verifies offline (rules and every
    request re-rendered) and re-imports."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("AWS_")}, **dev.env}
    out = tmp / f"{branch_id}.jsonl"
    cli = [sys.executable, "-m", "threads_aws_dev", "log"]
    subprocess.run([*cli, "export", "--branch", branch_id, "-o", str(out)], env=env, check=True, timeout=60)
    verified = subprocess.run([*cli, "verify", str(out)], capture_output=True, text=True, timeout=60)
    assert verified.returncode == 0 and verified.stdout.startswith("ok "), verified.stderr
    from threads_aws.core.importer import import_log

    assert import_log(out.read_bytes()).fold.head_seq > 0


D = TypeVar("D", bound=DevProcess)


@contextmanager
def dev_process(
    tmp: Path,
    env: dict[str, str] | None = None,
    args: list[str] | None = None,
    *,
    drop_env: tuple[str, ...] = ("AWS_",),
    cls: type[D] = DevProcess,  # type: ignore[assignment]
    allow_denials: bool = False,
) -> Iterator[D]:
    """`threads-aws dev` on a free port with dev tokens and a state dir of its own under `tmp`;
    this process's environment without the variables starting with `drop_env` (never a real
    AWS account's), plus `env`; `args` appended to the command line. Stopped with SIGTERM (it
    must exit 0) unless the test killed it. Each function runs under its template role
    (local.iam): an AccessDenied in the log fails the test unless `allow_denials`."""
    exe = Path(sys.executable).with_name("threads-aws")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "threads_aws_dev"]
    full = {k: v for k, v in os.environ.items() if not k.startswith(drop_env)}
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
        yield cls(first.split(" ", 1)[1], store_env, proc, log_path)
        if proc.poll() is None:  # a crash test may have killed it (kill -9) on purpose
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
        if not allow_denials:  # a permission the template lacks: the same call fails on AWS
            denied = [line for line in log_path.read_text().splitlines() if "IAM: AccessDenied" in line]
            assert not denied, "\n".join(denied[:5])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
        if proc.stdout:
            proc.stdout.close()
