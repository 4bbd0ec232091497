"""Cold import cost of every Lambda handler next to `import boto3`.

Each measurement runs in a fresh interpreter (as a cold Lambda would), with the handler's
function directory on sys.path the way Lambda lays out CodeUri, the library importable as the
layer provides it, and the environment a deployed function has. Bytecode is written first
(one warm-up run per module), as `sam build` output is byte-compiled on first import too.

Usage: python benchmarks/cold_import.py [--runs N] [--layer DIR --python PY]
Prints one line per handler: median ms, ratio to `import boto3`; then the goal check.
Goal: every handler <= 2x `import boto3` and <= 150 ms.

With --layer, each import runs as in Lambda: `PY -I -S` sees only the function's directory and
the built layer (DIR: the `python/` folder of `make -C layers/threads_aws layer DEST=...
PLATFORM=manylinux2014_x86_64`), writes no bytecode (/opt is read-only), and uses what the layer
ships; `import boto3` is then the layer's boto3.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FUNCTIONS = ROOT / "functions"
ENV = {
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "EVENTS_TABLE": "threads-events",
    "STATE_TABLE": "threads-state",
    "ARTIFACTS_BUCKET": "threads-artifacts",
    "RUN_STEP_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/000000000000/threads-run-step.fifo",
    "CHANNEL_INBOX_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/000000000000/threads-inbox",
    "POWERTOOLS_SERVICE_NAME": "threads-aws",
    "POWERTOOLS_TRACE_DISABLED": "1",
    "POWERTOOLS_METRICS_NAMESPACE": "threads",
}
PROBE = (
    "import sys, time; sys.dont_write_bytecode = {ro}; sys.path[:0] = {dirs!r}; t = time.perf_counter(); "
    "import {module}; print((time.perf_counter() - t) * 1000)"
)


def measure(module: str, cwd: Path | None, runs: int, layer: Path | None = None, python: str = "") -> float:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(ENV)
    dirs = [str(cwd or ROOT)] if layer is None else [str(p) for p in (cwd, layer) if p]
    code = PROBE.format(dirs=dirs, module=module, ro=layer is not None)
    cmd = [sys.executable, "-c", code] if layer is None else [python, "-I", "-S", "-c", code]
    samples = []
    for i in range(runs + 1):
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise SystemExit(f"import {module} failed:\n{out.stderr}")
        if i:  # the first run writes bytecode
            samples.append(float(out.stdout.strip().splitlines()[-1]))
    return statistics.median(samples)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--layer", type=Path, help="a built layer's python/ folder: import from it alone")
    ap.add_argument("--python", default="python3.13", help="the runtime's interpreter (with --layer)")
    args = ap.parse_args()
    layer = args.layer.resolve() if args.layer else None
    base = measure("boto3", None, args.runs, layer, args.python)
    print(f"{'module':32} {'ms':>8} {'x boto3':>8}")
    print(f"{'import boto3':32} {base:8.1f} {1.0:8.2f}")
    worst = 0.0
    worst_ratio = 0.0
    handlers = sorted(p.parent for p in FUNCTIONS.glob("*/app.py"))
    for d in handlers:
        ms = measure("app", d, args.runs, layer, args.python)
        worst, worst_ratio = max(worst, ms), max(worst_ratio, ms / base)
        print(f"{d.name + '/app.py':32} {ms:8.1f} {ms / base:8.2f}")
    if not handlers:
        print("no functions/*/app.py yet")
        return 0
    ok = worst_ratio <= 2.0 and worst <= 150.0
    verdict = "met" if ok else "NOT met"
    print(f"worst: {worst:.1f} ms, {worst_ratio:.2f}x boto3 -> goal (<= 2x and <= 150 ms) {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
