"""What a handler's cold import loads: each functions/*/app.py imported in a fresh interpreter (as
a cold Lambda would, its directory on sys.path) must not load a named heavy module. The timing
itself is a benchmark (benchmarks/cold_import.py); this is the cheap check that keeps the
handlers' import graphs from growing back: an API route loads the HTTP layer and Powertools at
import, and the Host graph (stores, writer, fold, validators, agents) and boto3 with its first
request (`services.current()`)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FUNCTIONS = ROOT / "functions"
# The environment a deployed function has: the benchmark's, so the check and the timing see one
# (benchmarks/ is scripts, not a package: loaded by path, without putting it on sys.path).
_spec = importlib.util.spec_from_file_location("cold_import", ROOT / "benchmarks" / "cold_import.py")
assert _spec is not None and _spec.loader is not None
_benchmark = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_benchmark)
ENV: dict[str, str] = _benchmark.ENV
# Never at import on any handler path: the AWS SDK (clients are built on first use), pydantic,
# the model/MCP SDKs and what they drag in (email, importlib.metadata), uuid6 (minted lazily).
HEAVY = (
    "boto3",
    "botocore.client",
    "pydantic",
    "anthropic",
    "openai",
    "httpx",
    "mcp",
    "email",
    "importlib.metadata",
    "uuid6",
)
# Not at an API route's import either: the Host and all it runs on.
HOST_GRAPH = (
    "threads_aws.host.service",
    "threads_aws.host.keys",
    "threads_aws.host.routes",
    "threads_aws.writer",
    "threads_aws.core.fold",
    "threads_aws.core._validators",
    "threads_aws.engine",
    "threads_aws.agents",
    "threads_aws.sandbox",
    "threads_aws.store.aws",
    "threads_aws.store.protocol",
    "threads_aws.store.events",
)
# The example tool is the one exception: Powertools Idempotency's DynamoDB layer is built at
# import (the tool's own table), so boto3 loads with it.
EXEMPT = {"tool_example"}


def _handlers() -> list[str]:
    return sorted(p.parent.name for p in FUNCTIONS.glob("*/app.py") if p.parent.name not in EXEMPT)


def _is_api(name: str) -> bool:
    return "threads_aws.host.runtime" in (FUNCTIONS / name / "app.py").read_text()


def loaded_at_import(function_dir: Path, watch: tuple[str, ...]) -> list[str]:
    """The watched modules (or their submodules) `import app` of `function_dir` loads."""
    code = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(function_dir)!r})\n"
        "import app\n"
        f"watch = {watch!r}\n"
        "seen = {w for w in watch for m in sys.modules if m == w or m.startswith(w + '.')}\n"
        "print(json.dumps(sorted(seen)))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_ENDPOINT", "THREADS_"))}
    env.update(ENV)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_the_handlers_are_found():
    names = _handlers()
    assert {"start_run", "authorizer", "method_not_allowed", "run_step", "slack_webhook"} <= set(names)
    assert sum(map(_is_api, names)) >= 18


def _watch(name: str) -> tuple[str, ...]:
    return HEAVY + (HOST_GRAPH if _is_api(name) else ())


@pytest.fixture(scope="module")
def loaded() -> dict[str, list[str]]:
    """Every handler probed once, a few interpreters at a time (each is mostly start-up wait)."""
    names = _handlers()
    with ThreadPoolExecutor(max_workers=4) as pool:
        found = pool.map(lambda n: loaded_at_import(FUNCTIONS / n, _watch(n)), names)
        return dict(zip(names, found, strict=True))


@pytest.mark.parametrize("name", _handlers())
def test_a_handler_imports_no_heavy_module(name, loaded):
    assert loaded[name] == []


def test_the_check_sees_a_heavy_import(tmp_path):
    # the probe itself: a handler that imports the Host at top level is caught
    (tmp_path / "app.py").write_text("from threads_aws.host.service import Host\n")
    seen = set(loaded_at_import(tmp_path, HOST_GRAPH + HEAVY))
    assert {"threads_aws.host.service", "threads_aws.writer", "threads_aws.core.fold"} <= seen
