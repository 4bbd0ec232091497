"""`threads-aws smoke --dev`: an ephemeral `threads-aws dev` for the smoke to run against.

`dev --port 0 --dev-tokens --ephemeral` as a child process (memory only: nothing written but a
temporary directory for its output and the channels file), with a channels file of one enabled
Slack and one WhatsApp installation whose secrets are random (so the forged-webhook checks meet
a verifying channel, as on a stack with channels configured). Its first stdout line,
`ready http://127.0.0.1:PORT`, is the URL; it is stopped with SIGTERM (then killed) afterwards,
whatever the checks did.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

START_CEILING_S = 120.0
TENANT = "smoke"


@dataclass(frozen=True)
class DevServer:
    url: str
    key: str
    slack_url: str
    whatsapp_url: str


def channels_file(tenant: str = TENANT) -> dict[str, object]:
    """One enabled installation per provider, random inline secrets (nobody can sign for them)."""

    def value() -> dict[str, str]:
        return {"value": secrets.token_hex(16)}

    return {
        "installations": [
            {
                "channel": "slack",
                "installation_id": "TSMOKE",
                "tenant": tenant,
                "agent": "demo",
                "secrets": {"signing_secret": value(), "bot_token": value()},
            },
            {
                "channel": "whatsapp",
                "installation_id": "100000000000000",
                "tenant": tenant,
                "agent": "demo",
                "secrets": {"app_secret": value(), "verify_token": value(), "access_token": value()},
            },
        ]
    }


def _ready_url(out: Path, proc: subprocess.Popen[bytes], err: Path) -> str:
    from .cli import CliError

    deadline = time.monotonic() + START_CEILING_S
    while time.monotonic() < deadline:
        first = out.read_text(errors="replace").splitlines()[:1]
        if first and first[0].startswith("ready "):
            return first[0].split(" ", 1)[1].strip()
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    tail = "\n".join(err.read_text(errors="replace").splitlines()[-15:])
    state = (
        f"exited {proc.returncode}" if proc.poll() is not None else f"not ready in {START_CEILING_S:.0f} s"
    )
    raise CliError(f"smoke --dev: threads-aws dev {state}:\n{tail}")


@contextmanager
def ephemeral_dev() -> Iterator[DevServer]:
    tmp = Path(tempfile.mkdtemp(prefix="threads-aws-smoke-"))
    proc: subprocess.Popen[bytes] | None = None
    try:
        (tmp / "channels.json").write_text(json.dumps(channels_file()))
        env = {**os.environ, "CHANNELS_FILE": str(tmp / "channels.json")}
        cmd = [sys.executable, "-m", "threads_aws_dev", "dev", "--port", "0", "--dev-tokens", "--ephemeral"]
        with open(tmp / "dev.out", "wb") as out, open(tmp / "dev.err", "wb") as err:
            proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env)
        url = _ready_url(tmp / "dev.out", proc, tmp / "dev.err")
        print(f"dev: an ephemeral threads-aws dev at {url} (pid {proc.pid})", flush=True)
        key = f"dev:api:{TENANT}:smoke-{secrets.token_hex(4)}"
        yield DevServer(url, key, f"{url}/channels/slack/events", f"{url}/channels/whatsapp/events")
    finally:
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
