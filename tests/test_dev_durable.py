"""`threads-aws dev` keeps its state across a `kill -9` (issue 6 §5), as a user runs it: a
subprocess with `--state-dir`, the README's demo run parked on an approval, an `ask:` run parked
on its question (with a request artifact large enough to live in blobs/), SIGKILL, a restart on
the same directory: the threads, timelines, approvals, question and artifacts are all there; the
approval granted and the question answered, both runs complete, and a third (clean) start still
has the completed state. Also: the default state dir is ./.threads-aws, and `--ephemeral`
writes nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers.dev_process import DevProcess

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "template.yaml"
TOKEN = "dev:api:acme:alice"
DEADLINE_S = 30


@dataclass
class Dev:
    """A `threads-aws dev` subprocess this test starts, kills and restarts on one state dir."""

    proc: subprocess.Popen[str]
    banner: list[str]
    api: DevProcess  # HTTP calls (tests/dev_process.py)

    @property
    def store_env(self) -> dict[str, str]:
        return self.api.env

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        status, out, _ = self.api.call(method, path, body, token=TOKEN)
        return status, out

    def start_run(self, text: str) -> dict[str, str]:
        status, body, _ = self.api.call(
            "POST", "/v1/runs", {"agent": "demo", "input": text}, token=TOKEN,
            headers={"Idempotency-Key": str(uuid.uuid4())},
        )  # fmt: skip
        assert status == 202, body
        return body  # type: ignore[no-any-return]

    def timeline(self, thread_id: str) -> list[dict[str, Any]]:
        """Every event of the thread's main branch, following the pages' Link headers."""
        events: list[dict[str, Any]] = []
        query = ""
        while True:
            status, body, headers = self.api.call(
                "GET", f"/v1/threads/{thread_id}/timeline{query}", token=TOKEN
            )
            assert status == 200, body
            events += [e["event"] for e in body["entries"]]
            link = next((v for k, v in headers.items() if k.lower() == "link"), None)
            if link is None:
                return events
            query = "?" + link.split("?", 1)[1].split(">", 1)[0]

    def result(self, thread_id: str, run_id: str) -> dict[str, Any]:
        """Follow the run's SSE windows (Last-Event-ID) until its result message."""
        deadline = time.monotonic() + DEADLINE_S
        last: str | None = None
        while time.monotonic() < deadline:
            status, text, _ = self.api.call(
                "GET", f"/v1/threads/{thread_id}/runs/{run_id}/events", token=TOKEN,
                headers={"Last-Event-ID": last} if last else None,
            )  # fmt: skip
            assert status == 200, text
            for block in text.split("\n\n"):
                fields = dict(line.partition(":")[::2] for line in block.splitlines())
                if "data" not in fields:
                    continue
                msg = json.loads(fields["data"])
                if msg["kind"] == "result":
                    return msg["result"]  # type: ignore[no-any-return]
                if "id" not in fields:  # a transient delta or status message
                    continue
                last = fields["id"].strip()
        raise AssertionError(f"run {run_id} did not settle in {DEADLINE_S}s")


def _cmd() -> list[str]:
    exe = Path(sys.executable).with_name("threads-aws")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "threads_aws_dev"]


def start_dev(args: list[str], cwd: Path, log: Path) -> Dev:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(SSE_WAIT_MS="1500", SSE_POLL_MS="50", SSE_RETRY_MS="100")
    with open(log, "a") as err:
        proc = subprocess.Popen(
            [*_cmd(), "dev", "--port", "0", "--dev-tokens", "--template", str(TEMPLATE), *args],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=env,
            cwd=cwd,
        )
    assert proc.stdout is not None
    first = proc.stdout.readline().strip()
    assert first.startswith("ready http://127.0.0.1:"), first + log.read_text()[-3000:]
    banner = [first]
    while not banner[-1].startswith("state: "):
        banner.append(proc.stdout.readline().strip())
    store = next(x for x in banner if x.startswith("store: "))
    store_env = dict(w.split("=", 1) for w in store.split()[1:] if "=" in w)
    return Dev(proc, banner, DevProcess(first.split(" ", 1)[1], store_env, proc, log))


def stop(dev: Dev, sig: int = signal.SIGTERM) -> int:
    if dev.proc.poll() is None:
        dev.proc.send_signal(sig)
    code = dev.proc.wait(timeout=30)
    if dev.proc.stdout:
        dev.proc.stdout.close()
    return code


@pytest.fixture
def devs() -> Iterator[list[Dev]]:
    started: list[Dev] = []
    yield started
    for d in started:
        if d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait()
        if d.proc.stdout:
            d.proc.stdout.close()


def artifact_refs(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    refs: list[dict[str, Any]] = []

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            if isinstance(v.get("sha256"), str) and "media_type" in v:  # an ArtifactRef
                refs.append(v)
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk([e["data"] for e in events])
    return refs


def read_artifacts(dev: Dev, refs: list[dict[str, Any]]) -> dict[str, bytes]:
    import boto3

    env = dev.store_env
    s3 = boto3.client(
        "s3",
        endpoint_url=env["AWS_ENDPOINT_URL"],
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name=env["AWS_DEFAULT_REGION"],
    )
    out = {}
    for ref in refs:
        body = s3.get_object(Bucket=env["ARTIFACTS_BUCKET"], Key="sha256/" + ref["sha256"])["Body"].read()
        assert len(body) == ref["bytes"] and hashlib.sha256(body).hexdigest() == ref["sha256"]
        out[ref["sha256"]] = body
    return out


def test_dev_survives_kill_9(tmp_path: Path, devs: list[Dev]) -> None:
    state, log = tmp_path / "state", tmp_path / "dev.log"
    dev = start_dev(["--state-dir", str(state)], tmp_path, log)
    devs.append(dev)
    assert dev.banner[-1].startswith(f"state: {state} (new;")

    note = dev.start_run("note: buy milk")
    question = "ask: which colour? " + "(a long question for a large request artifact) " * 400
    ask = dev.start_run(question)
    assert dev.result(note["thread_id"], note["run_id"])["status"] == "parked"
    assert dev.result(ask["thread_id"], ask["run_id"])["status"] == "parked"
    status, approvals = dev.call("GET", f"/v1/threads/{note['thread_id']}/approvals")
    assert status == 200 and len(approvals) == 1
    before = {t: dev.timeline(t) for t in (note["thread_id"], ask["thread_id"])}
    refs = artifact_refs([e for tl in before.values() for e in tl])
    assert max(r["bytes"] for r in refs) > 16 * 1024  # one lives in blobs/
    artifacts = read_artifacts(dev, refs)

    assert stop(dev, signal.SIGKILL) == -signal.SIGKILL
    assert any((state / "blobs").glob("*/*"))

    dev = start_dev(["--state-dir", str(state)], tmp_path, log)
    devs.append(dev)
    assert "records replayed" in dev.banner[-1], dev.banner[-1]
    assert {t: dev.timeline(t) for t in before} == before
    assert dev.call("GET", f"/v1/threads/{note['thread_id']}/approvals") == (200, approvals)
    status, branches = dev.call("GET", f"/v1/threads/{ask['thread_id']}/branches")
    assert status == 200 and branches, branches
    assert read_artifacts(dev, refs) == artifacts
    call = next(e for e in before[ask["thread_id"]] if e["type"] == "tool_call")
    assert call["data"]["name"] == "ask_user"

    # The parked runs continue: their resume steps are queued and delivered after the restart.
    status, body = dev.call(
        "POST",
        f"/v1/threads/{note['thread_id']}/approvals/{approvals[0]['challenge_id']}",
        {"decision": "grant"},
    )
    assert status == 200, body
    status, body = dev.call(
        "POST",
        f"/v1/threads/{ask['thread_id']}/questions/{call['data']['call_id']}/answer",
        {"answer": "blue"},
    )
    assert status == 200, body
    done = dev.result(note["thread_id"], note["run_id"])
    assert done["status"] == "completed", done
    answered = dev.result(ask["thread_id"], ask["run_id"])
    assert answered["status"] == "completed" and "blue" in json.dumps(answered["output"]), answered
    kinds = [e["type"] for e in dev.timeline(note["thread_id"])]
    assert kinds.count("effect_commit") == 1 and kinds[-1] == "turn_completed", kinds  # exactly once
    after = {t: dev.timeline(t) for t in before}
    assert stop(dev) == 0

    dev = start_dev(["--state-dir", str(state)], tmp_path, log)  # and once more, after a clean stop
    devs.append(dev)
    assert {t: dev.timeline(t) for t in before} == after
    assert dev.call("GET", f"/v1/threads/{note['thread_id']}/approvals") == (200, [])
    assert stop(dev) == 0


def test_default_state_dir_and_ephemeral(tmp_path: Path, devs: list[Dev]) -> None:
    default, ephemeral = tmp_path / "default", tmp_path / "ephemeral"
    default.mkdir()
    ephemeral.mkdir()
    log = tmp_path / "dev.log"
    dev = start_dev([], default, log)
    devs.append(dev)
    assert dev.banner[-1].startswith("state: .threads-aws (new;"), dev.banner[-1]
    dev.start_run("hello")
    # A second server on the same directory is refused (one writer per journal).
    with open(log, "a") as err:
        second = subprocess.run(
            [*_cmd(), "dev", "--port", "0", "--template", str(TEMPLATE)],
            cwd=default,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            timeout=60,
        )
    assert second.returncode != 0 and "in use by pid" in log.read_text()
    assert stop(dev) == 0
    assert (default / ".threads-aws" / "journal-0.log").stat().st_size > 1000

    dev = start_dev(["--ephemeral"], ephemeral, log)
    devs.append(dev)
    assert dev.banner[-1].startswith("state: in memory only")
    run = dev.start_run("hello")
    assert dev.result(run["thread_id"], run["run_id"])["status"] == "completed"
    assert stop(dev) == 0
    assert list(ephemeral.iterdir()) == []  # nothing written
