"""Cold start of the run stream function (functions/stream_run: the Lambda Web Adapter runs
run.sh, i.e. uvicorn serving `main:app`; the adapter forwards the first invocation once the app
answers its readiness check, `GET /` every 10 ms).

Measured in fresh interpreters, as cold_import.py measures the zip handlers:
1. `import main` (the app module: threads_aws.host.stream_app and what it imports at load);
2. `import uvicorn` (the server, from the function's own package);
3. process start → the app answers `GET /` (what the adapter waits for), spawning
   `python -m uvicorn --port P main:app` as run.sh does; next to it, a process that only runs
   `import boto3` and exits, as the yardstick of an interpreter start.
The Host (boto3 session and clients, the agents) is built on the first request, as in the zip
handlers; that first-request cost is theirs too and is not counted here.

Usage: python benchmarks/stream_cold_start.py [--runs N]
Last line: `stream cold start: import <ms> ms (<x> x boto3), ready in <ms> ms`.
"""

from __future__ import annotations

import argparse
import http.client
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from cold_import import ENV, ROOT, measure  # noqa: E402

FUNCTION = ROOT / "functions" / "stream_run"
LIBRARY = ROOT / "layers" / "threads_aws"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ready_ms(runs: int) -> tuple[float, float]:
    """(spawn → first answer of the app, spawn → exit of `import boto3`), medians in ms."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(ENV, PYTHONPATH=f"{FUNCTION}:{LIBRARY}")
    ready, baseline = [], []
    for i in range(runs + 1):
        port = free_port()
        started = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "--host", "127.0.0.1", "--port", str(port),
             "--no-access-log", "--log-level", "warning", "--lifespan", "off", "main:app"],
            cwd=FUNCTION, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            while True:
                try:
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
                    conn.request("GET", "/")
                    status = conn.getresponse().status
                    conn.close()
                    break
                except OSError:
                    if proc.poll() is not None:
                        err = proc.stderr.read().decode() if proc.stderr else ""
                        raise SystemExit(f"uvicorn exited: {err}") from None
                    time.sleep(0.01)
            took = (time.perf_counter() - started) * 1000
            assert status == 404  # the adapter counts 100-499 as ready
        finally:
            proc.terminate()
            proc.wait(5)
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import boto3"], env=env, check=True)
        if i:  # the first run writes bytecode
            ready.append(took)
            baseline.append((time.perf_counter() - started) * 1000)
    return statistics.median(ready), statistics.median(baseline)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    boto = measure("boto3", None, args.runs)
    app = measure("main", FUNCTION, args.runs)
    server = measure("uvicorn", None, args.runs)
    ready, interpreter = ready_ms(args.runs)
    print(f"{'import boto3':36} {boto:8.1f} ms")
    print(f"{'import main (the app)':36} {app:8.1f} ms  {app / boto:5.2f} x boto3")
    print(f"{'import uvicorn':36} {server:8.1f} ms")
    print(f"{'process start -> app answers GET /':36} {ready:8.1f} ms")
    print(f"{'process start -> import boto3 -> exit':36} {interpreter:8.1f} ms  (yardstick)")
    print(f"stream cold start: import {app:.0f} ms ({app / boto:.2f} x boto3), ready in {ready:.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
