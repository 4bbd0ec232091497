"""Cold import cost of every Lambda handler next to `import boto3`.

Each measurement runs in a fresh interpreter (as a cold Lambda would), with the handler's
function directory on sys.path the way Lambda lays out CodeUri, the library importable as the
layer provides it, and the environment a deployed function has. Bytecode is written first
(one warm-up run per module), as `sam build` output is byte-compiled on first import too.

Usage: python benchmarks/cold_import.py [--runs N] [--layer DIR --python PY]
Prints one line per handler: modules loaded, ms (min of the runs by default: on a shared machine
the least disturbed run; `--stat median`), ratio to `import boto3`; then the goal check. Each round
measures `import boto3` next to every handler, so load bursts hit both sides of the ratio.
Goal: every API handler (the routes and the authorizer) <= 2x `import boto3` and <= 150 ms.

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
    "import {module}; print((time.perf_counter() - t) * 1000, len(sys.modules))"
)


class Probe:
    """One module's import in a fresh interpreter; keeps every sample (ms) and the module count."""

    def __init__(self, module: str, cwd: Path | None, layer: Path | None, python: str) -> None:
        self.module = module
        self.env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        self.env.update(ENV)
        dirs = [str(cwd or ROOT)] if layer is None else [str(p) for p in (cwd, layer) if p]
        code = PROBE.format(dirs=dirs, module=module, ro=layer is not None)
        self.cmd = [sys.executable, "-c", code] if layer is None else [python, "-I", "-S", "-c", code]
        self.samples: list[float] = []
        self.modules = 0

    def run(self, keep: bool = True) -> None:
        out = subprocess.run(self.cmd, env=self.env, capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise SystemExit(f"import {self.module} failed:\n{out.stderr}")
        ms, count = out.stdout.strip().splitlines()[-1].split()
        if keep:
            self.samples.append(float(ms))
            self.modules = int(count)

    def figure(self, stat: str) -> float:
        return min(self.samples) if stat == "min" else statistics.median(self.samples)


def is_api(function_dir: Path) -> bool:
    """An API Gateway route or its authorizer (the goal's scope): its handler calls the host's
    HTTP layer. Workers, channel webhooks and the example tool are listed beside them."""
    return "threads_aws.host." in (function_dir / "app.py").read_text()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--stat", choices=("min", "median"), default="min",
                    help="figure per module over the runs (min: the least disturbed run on a shared machine)")
    ap.add_argument("--layer", type=Path, help="a built layer's python/ folder: import from it alone")
    ap.add_argument("--python", default="python3.13", help="the runtime's interpreter (with --layer)")
    ap.add_argument("--only", nargs="*", default=(), help="handler names to measure (default: all)")
    args = ap.parse_args()
    layer = args.layer.resolve() if args.layer else None
    only = set(args.only)
    handlers = sorted(p.parent for p in FUNCTIONS.glob("*/app.py") if not only or p.parent.name in only)
    if not handlers:
        print("no functions/*/app.py yet")
        return 0
    base = Probe("boto3", None, layer, args.python)
    probes = [Probe("app", d, layer, args.python) for d in handlers]
    for p in [base, *probes]:
        p.run(keep=False)  # the first run writes bytecode
    # rounds interleave boto3 with the handlers, so a burst of load on the machine hits both
    for _ in range(args.runs):
        for p in probes:
            base.run()
            p.run()
    b = base.figure(args.stat)
    print(f"{args.stat} of {args.runs} runs")
    print(f"{'module':32} {'modules':>8} {'ms':>8} {'x boto3':>8}")
    print(f"{'import boto3':32} {base.modules:8d} {b:8.1f} {1.0:8.2f}")
    worst: dict[bool, tuple[float, float]] = {True: (0.0, 0.0), False: (0.0, 0.0)}
    for d, p in zip(handlers, probes, strict=True):
        ms, api = p.figure(args.stat), is_api(d)
        w = worst[api]
        worst[api] = (max(w[0], ms), max(w[1], ms / b))
        note = "" if api else "  (not an API route)"
        print(f"{d.name + '/app.py':32} {p.modules:8d} {ms:8.1f} {ms / b:8.2f}{note}")
    (ms, ratio), (other_ms, other_ratio) = worst[True], worst[False]
    verdict = "met" if ratio <= 2.0 and ms <= 150.0 else "NOT met"
    print(f"API handlers worst: {ms:.1f} ms, {ratio:.2f}x boto3 -> goal (<= 2x and <= 150 ms) {verdict}")
    print(f"other functions worst: {other_ms:.1f} ms, {other_ratio:.2f}x boto3")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
