"""`threads-aws dev --aws-only`: the emulated AWS of `dev` for `sam local` (which needs Docker).

It runs what `dev` runs but the API Gateway emulation: moto with template.yaml's tables, bucket
and queues on MOTO_BIND:MOTO_PORT, and the SQS pollers feeding the run-step queue to the worker
in this process (`sam local` emulates no SQS event source, so without them no run would
advance). It writes the `--env-vars` file of `sam local start-api` / `sam local invoke`: every
function's declared environment resolved to these resources, and AWS_ENDPOINT_URL set to the
endpoint as a container reaches it (http://host.docker.internal:MOTO_PORT by default). The
handlers then run in SAM's containers, from the built layer, against the same data.
"""

from __future__ import annotations

import json
import shlex
import signal
import sys
import threading
from pathlib import Path
from typing import Any, TextIO

from .dev import REGION, DevError, DevServer
from .gateway import configure_logging, log
from .sam import sam_env_vars

DEFAULT_PORT = 4566
DEFAULT_ENDPOINT_HOST = "host.docker.internal"


def write_env_vars(server: DevServer, path: Path, endpoint: str) -> list[str]:
    """Write the env-vars file for `server`'s resources; return the warnings."""
    assert server.template is not None and server.resources is not None
    env, warnings = sam_env_vars(
        server.template,
        server.resources.physical,
        REGION,
        endpoint=endpoint,
        local_endpoint=server.moto_url,
        stack=server.prefix,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(env, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)
    return warnings


def banner(server: DevServer, env_vars: Path, endpoint: str) -> list[str]:
    token, how = server.token()
    f = shlex.quote(str(env_vars))
    return [
        f"ready {server.moto_url}",
        f"endpoint for containers {endpoint}",
        f"env-vars {env_vars}",
        f"token {token or '<TOKEN>'}  ({how})",
        "the worker polls the run-step queue here (sam local runs no SQS event source)",
        f"try: sam build && sam local start-api --env-vars {f} --region {REGION}",
        f"     sam local invoke StartRunFunction -e events/start_run.json --env-vars {f} --region {REGION}",
        "linux: add --add-host host.docker.internal:host-gateway to sam local, and start this "
        "with --aws-bind 0.0.0.0 (or the docker0 address)",
    ]


def run_aws_only(
    env_vars: str,
    *,
    bind: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    endpoint_host: str = DEFAULT_ENDPOINT_HOST,
    dev_tokens: bool = False,
    template: str | None = None,
    out: TextIO | None = None,
    **server_options: Any,
) -> int:
    """The command: start, write the env-vars file, print the banner, serve until Ctrl-C or
    SIGTERM, stop; exit 0."""
    out = out or sys.stdout
    sys.stdout = sys.stderr  # the banner is the only thing on stdout
    configure_logging(verbose=True)
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    if dev_tokens:  # containers get only declared variables: THREADS_DEV_TOKENS can't reach them
        log.warning("--dev-tokens does not apply to --aws-only: use the API key printed below")
    server = DevServer(
        template_path=Path(template) if template else None,
        moto_host=bind,
        moto_port=port,
        serve_api=False,
        **server_options,
    )
    try:
        try:
            server.start()
        except OSError as exc:
            raise DevError(f"cannot listen on {bind}:{port}: {exc.strerror or exc}") from None
        actual_port = int(server.moto_url.rsplit(":", 1)[1])
        endpoint = f"http://{endpoint_host}:{actual_port}"
        path = Path(env_vars)
        for w in server.warnings + write_env_vars(server, path, endpoint):
            log.warning("%s", w)
        for line in banner(server, path, endpoint):
            print(line, file=out, flush=True)
        while not stop.wait(0.5):
            pass
        log.info("stopping")
        return 0
    finally:
        server.stop()
        for s, h in previous.items():
            signal.signal(s, h)
        sys.stdout = out
