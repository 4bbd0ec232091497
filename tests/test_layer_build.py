"""The ThreadsLayer as `sam build` makes it (layers/threads_aws/Makefile), checked from outside.

The target layer (python3.13, arm64) is the session's `sam build` (helpers/artifact): its pins,
bytecode, wheel tags and lazy imports are checked here; its shared objects, sizes and every
handler's import in tests/test_sam_build_artifact.py. It can't load on this x86_64 host, so the
same Makefile also builds it for the host's platform: every module of the layer is imported by
a python3.13 that sees only that layer (`-I -S`: no site-packages, no dev packages), and
requests run through the layer's handlers against a moto server."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from helpers.artifact import sam_build
from packaging.requirements import Requirement
from packaging.tags import Tag, compatible_tags, cpython_tags, parse_tag
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]
LAYER_SRC = REPO / "layers" / "threads_aws"
RUNTIME = (3, 13)  # template.yaml Globals.Function.Runtime
HOST_PLATFORM = "manylinux2014_x86_64"
# Lambda's python3.13 runs on Amazon Linux 2023 (glibc 2.34) on Graviton.
TARGET_PLATFORMS = [f"manylinux_2_{m}_aarch64" for m in range(34, 16, -1)] + ["manylinux2014_aarch64"]


def _python() -> str:
    out = subprocess.run(
        [str(LAYER_SRC / "find-python.sh"), "{}.{}".format(*RUNTIME)],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        reason = "no python{}.{} on PATH or under pyenv (the layer is built for that runtime)".format(
            *RUNTIME
        )
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return out.stdout.strip()


def _build(dest: Path, platform: str, python: str) -> Path:
    out = subprocess.run(
        [
            "make",
            "-s",
            "-C",
            str(LAYER_SRC),
            "layer",
            f"DEST={dest}",
            f"PLATFORM={platform}",
            f"PYTHON={python}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return dest / "python"


@pytest.fixture(scope="module")
def python() -> str:
    return _python()


@pytest.fixture(scope="module")
def host_layer(tmp_path_factory: pytest.TempPathFactory, python: str) -> Path:
    return _build(tmp_path_factory.mktemp("layer-host"), HOST_PLATFORM, python)


@pytest.fixture(scope="module")
def target_layer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The arm64 layer as `sam build` makes it (helpers/artifact: one build per session, shared
    with tests/test_sam_build_artifact.py)."""
    return sam_build(tmp_path_factory).code("ThreadsLayer") / "python"


def _pins() -> dict[str, str]:
    text = (LAYER_SRC / "requirements.txt").read_text()
    return {canonicalize_name(m[1]): m[2] for m in re.finditer(r"^([A-Za-z0-9_.-]+)==(\S+)", text, re.M)}


def _dists(layer: Path) -> dict[str, str]:
    out = {}
    for d in layer.glob("*.dist-info"):
        name, version = d.name[: -len(".dist-info")].rsplit("-", 1)
        out[canonicalize_name(name)] = version
    return out


#: What used to sit in the runtime package and now is the dev tooling's (devtools/threads_aws_dev)
#: or the client's (clients/python): the layer copies threads_aws as it is, so none may come back.
DEV_ONLY = ["local", "conformance", "fakes", "client", "terminal", "codegen", "cli.py", "__main__.py",
            "schema_gen.py", "host/bodies_gen.py", "host/cli_keys.py"]


def test_the_runtime_never_imports_the_dev_tooling_or_the_client():
    """The layout says what ships: threads_aws imports neither threads_aws_dev nor threads_aws_client
    (an import, absolute or relative, anywhere in its sources, lazy ones included)."""
    import ast

    bad = []
    for src in (LAYER_SRC / "threads_aws").rglob("*.py"):
        for node in ast.walk(ast.parse(src.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            tops = ("threads_aws_dev", "threads_aws_client")
            bad += [f"{src}:{node.lineno} {n}" for n in names if n.split(".")[0] in tops]
    assert not bad, bad
    assert not [p for p in DEV_ONLY if (LAYER_SRC / "threads_aws" / p).exists()]


def test_config_sits_below_the_engine():
    """agents and config import no engine module (the engine imports them): no import circle."""
    import ast

    pkg = LAYER_SRC / "threads_aws"
    for src in [pkg / "agents.py", *(pkg / "config").glob("*.py")]:
        for node in ast.walk(ast.parse(src.read_text())):
            if isinstance(node, ast.ImportFrom):
                mod = ("." * node.level) + (node.module or "")
                assert "engine" not in mod.split("."), f"{src}:{node.lineno} imports {mod}"


# ---------------------------------------------------------------- what the layer holds


def test_requirements_pin_exactly_the_runtime_dependencies():
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = _pins()
    text = (LAYER_SRC / "requirements.txt").read_text()
    for dep in map(Requirement, deps):
        name = canonicalize_name(dep.name)
        assert name in pins, f"{dep.name} is not pinned: make -C layers/threads_aws lock"
        assert dep.specifier.contains(pins[name], prereleases=True), (dep, pins[name])
    # Every pin carries hashes (pip --require-hashes refuses the file otherwise; checked here
    # so the failure names the line).
    for block in re.split(r"\n(?=[A-Za-z0-9_.-]+==)", text.split("\n", 2)[2]):
        if "==" in block.split("\n", 1)[0]:
            assert "--hash=sha256:" in block, block
    # Pydantic is no dependency of ours (nothing of threads_aws imports it); the provider SDKs
    # bring it along as theirs.
    assert "pydantic" not in {canonicalize_name(Requirement(d).name) for d in deps}


def test_layer_ships_the_runtime_only(target_layer: Path):
    assert _dists(target_layer) == _pins()
    pkg = target_layer / "threads_aws"
    assert not [p for p in DEV_ONLY if (pkg / p).exists()]
    assert not list(target_layer.glob("*.egg-info")) and not (target_layer / "bin").exists()
    # Package data the host serves.
    assert (pkg / "host" / "openapi.json").is_file() and (pkg / "data" / "agents.json").is_file()
    # Every source module has its bytecode beside it, for this runtime, checked by hash only.
    tag = "cpython-{}{}".format(*RUNTIME)
    for src in pkg.rglob("*.py"):
        pyc = src.parent / "__pycache__" / f"{src.stem}.{tag}.pyc"
        assert pyc.is_file(), pyc
        flags = int.from_bytes(pyc.read_bytes()[4:8], "little")
        assert flags == 0b01, f"{pyc}: not an unchecked-hash pyc"  # hash-based, check_source off


def test_target_layer_matches_runtime_and_architecture(target_layer: Path):
    supported: set[Tag] = set(
        cpython_tags(RUNTIME, abis=["cp313", "abi3", "none"], platforms=TARGET_PLATFORMS)
    )
    supported |= set(compatible_tags(RUNTIME, "cp313", platforms=TARGET_PLATFORMS))
    wheels = list(target_layer.glob("*.dist-info/WHEEL"))
    assert len(wheels) == len(_pins())
    compiled = []
    for wheel in wheels:
        tags = {
            t
            for line in wheel.read_text().splitlines()
            if line.startswith("Tag:")
            for t in parse_tag(line.split(":", 1)[1].strip())
        }
        assert tags & supported, f"{wheel.parent.name}: {sorted(map(str, tags))}"
        if not any(t.platform == "any" for t in tags):
            compiled.append(wheel.parent.name)
    assert any(name.startswith("orjson-") for name in compiled)
    # Each shared object's machine and tag: tests/test_sam_build_artifact.py (layer and functions).


# ---------------------------------------------------------------- importing from the layer alone

PROBE = r"""
import importlib, json, os, pkgutil, sys, sysconfig
layer = sys.argv[1]
sys.path[:0] = [layer]
sys.dont_write_bytecode = True  # /opt is read-only on Lambda
import threads_aws
for m in pkgutil.walk_packages(threads_aws.__path__, "threads_aws."):
    importlib.import_module(m.name)
std = [os.path.realpath(sysconfig.get_paths()[k]) for k in ("stdlib", "platstdlib")]
roots = [os.path.realpath(layer)]
foreign = sorted(
    name for name, mod in list(sys.modules.items())
    if mod is not sys.modules["__main__"] and getattr(mod, "__file__", None)  # also its __mp_main__ alias
    and not any(os.path.realpath(mod.__file__).startswith(r + os.sep) for r in roots + std)
)
print(json.dumps({"foreign": foreign, "modules": len(sys.modules), "version": list(sys.version_info[:2])}))
"""


def _probe(python: str, layer: Path, tmp_path: Path) -> dict[str, Any]:
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    env = {"PATH": os.environ.get("PATH", ""), "AWS_DEFAULT_REGION": "us-east-1", "LANG": "C.UTF-8"}
    out = subprocess.run(
        [python, "-I", "-S", str(script), str(layer)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_every_layer_module_imports_from_the_layer_alone(python: str, host_layer: Path, tmp_path: Path):
    got = _probe(python, host_layer, tmp_path)
    assert got["foreign"] == [] and got["modules"] > 100


# ---------------------------------------------------------------- serving from the layer

DRIVER = r"""
import importlib.util, json, sys, types
layer, functions, events = sys.argv[1:4]
sys.path.insert(0, layer)
sys.dont_write_bytecode = True

def handler(name):
    spec = importlib.util.spec_from_file_location("fn_" + name, f"{functions}/{name}/app.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.handler

def sample(name):
    with open(f"{events}/{name}.json") as fh:
        return json.load(fh)

ctx = types.SimpleNamespace(
    function_name="layer-test", function_version="$LATEST", memory_limit_in_mb=512,
    invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:layer-test",
    aws_request_id="00000000-0000-4000-8000-000000000001",
    get_remaining_time_in_millis=lambda: 25_000,
)
started = handler("start_run")(sample("start_run"), ctx)
assert started["statusCode"] == 202, started
ids = json.loads(started["body"])
step = sample("run_step")
step["Records"][0]["body"] = json.dumps({"branch_id": ids["branch_id"], "reason": "user_input"})
step["Records"][0]["attributes"]["MessageGroupId"] = ids["branch_id"]
batch = handler("run_step")(step, ctx)
timeline = sample("get_timeline")
timeline["pathParameters"] = {"thread_id": ids["thread_id"]}
got = handler("get_timeline")(timeline, ctx)
served = handler("openapi")(sample("openapi"), ctx)
print(json.dumps({"batch": batch, "timeline": got, "openapi": served["statusCode"]}))
"""


def test_handlers_serve_requests_from_the_layer(python: str, host_layer: Path, tmp_path: Path):
    """start_run → run_step → get_timeline through the layer's code on python3.13, against a moto
    server (the only thing outside the layer: it stands for DynamoDB, S3 and SQS)."""
    boto3 = pytest.importorskip("boto3")
    moto_server = pytest.importorskip("moto.server")
    from threads_aws_dev.local.infra import create_resources

    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        aws = {
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
        session = boto3.Session(
            region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
        )
        clients = {s: session.client(s, endpoint_url=endpoint) for s in ("dynamodb", "s3", "sqs")}
        resources = create_resources(REPO / "template.yaml", clients, prefix="layer-test", region="us-east-1")
        script = tmp_path / "driver.py"
        script.write_text(DRIVER)
        env = {
            "PATH": os.environ.get("PATH", ""),
            "LANG": "C.UTF-8",
            **aws,
            **resources.env(),
            "POWERTOOLS_SERVICE_NAME": "threads-aws",
            "POWERTOOLS_TRACE_DISABLED": "1",
            "SSE_WAIT_MS": "0",
        }
        out = subprocess.run(
            [python, "-I", "-S", str(script), str(host_layer), str(REPO / "functions"), str(REPO / "events")],
            capture_output=True,
            text=True,
            env=env,
            check=False,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        got = json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        server.stop()
    assert got["batch"] == {"batchItemFailures": []}
    assert got["openapi"] == 200
    assert got["timeline"]["statusCode"] == 200, got["timeline"]
    types = [e["event"]["type"] for e in json.loads(got["timeline"]["body"])["entries"]]
    # The demo agent answered "time" with its read-only tool, then a reply: the turn completed.
    assert types[:2] == ["thread_started", "user_input"] and types[-1] == "turn_completed", types
    assert "tool_result" in types and types.count("model_response") == 2, types


def _imports(path: Path) -> set[str]:
    """Top-level modules `path` imports anywhere (module level or inside functions), except
    those under a `try` that handles ImportError (optional)."""
    import ast

    tree = ast.parse(path.read_text(), str(path))
    optional: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
            isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError")
            for h in node.handlers
        ):
            optional.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    out = set()
    for node in ast.walk(tree):
        if id(node) in optional:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out


def test_the_layer_ships_every_module_its_code_imports(target_layer: Path):
    """Lazy imports too (a provider SDK imported on a step's first use): each must be in the
    standard library or in the layer."""
    shipped = {p.name.split(".")[0] for p in target_layer.iterdir() if not p.name.endswith(".dist-info")}
    missing: dict[str, list[str]] = {}
    for src in sorted((target_layer / "threads_aws").rglob("*.py")):
        for mod in _imports(src) - set(sys.stdlib_module_names) - shipped - {"__future__"}:
            missing.setdefault(mod, []).append(str(src.relative_to(target_layer)))
    assert missing == {}, f"imported but not in the layer (pyproject dependencies + make lock): {missing}"
