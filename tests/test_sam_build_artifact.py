"""`sam build`'s output (.aws-sam/build: what `sam deploy` zips and uploads), checked before it ships.

One build per session (helpers/artifact.py; cached on the layer's sources). Over it: every native
file of the layer and of each function is built for the functions' runtime and architecture
(template.yaml Globals), each function with its layers fits Lambda's unzipped limit, nothing of
the developer tooling ships, and every handler the template names imports in a fresh python3.13
that sees only the function's own folder and the layer. tests/test_layer_build.py checks the same
layer's contents (pins, bytecode, wheel tags, lazy imports) and serves requests through it."""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import re
import shutil
import subprocess
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from helpers.artifact import REPO, Build, load, python313, sam_build
from packaging.requirements import Requirement
from packaging.tags import parse_tag
from packaging.utils import canonicalize_name

SOURCE = load(REPO / "template.yaml")
GLOBALS = SOURCE["Globals"]["Function"]
FUNCTIONS = sorted(k for k, v in SOURCE["Resources"].items() if v["Type"] == "AWS::Serverless::Function")
#: ELF e_machine and the extension-suffix spelling of each Lambda architecture.
MACHINES = {"arm64": (183, "aarch64"), "x86_64": (62, "x86_64")}
#: Lambda: a function's deployment package and all its layers, unzipped (the quota's 250 MB).
LIMIT = 262_144_000
#: A layer from outside the stack (the Lambda Web Adapter: one static binary, a few MB) can't be
#: measured here; this bounds it.
EXTERNAL_LAYER = 16 * 2**20
MIB = 2**20


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Build:
    return sam_build(tmp_path_factory)


def _runtime() -> tuple[str, str]:
    """(cp313, arm64): the one runtime and architecture every function and the layer share."""
    m = re.fullmatch(r"python3\.(\d+)", GLOBALS["Runtime"])
    assert m, GLOBALS["Runtime"]
    (arch,) = GLOBALS["Architectures"]
    return f"cp3{m[1]}", arch


def _layers(build: Build) -> dict[str, Path]:
    return {lid: build.code(lid) for lid in build.resources("AWS::Serverless::LayerVersion")}


def _size(root: Path) -> int:
    return sum(p.lstat().st_size for p in root.rglob("*") if p.is_file() or p.is_symlink())


def test_one_runtime_and_architecture(build: Build):
    """Every function runs the Globals pair, and every layer it loads is built for that pair."""
    abi, arch = _runtime()
    for lid, props in build.functions.items():
        assert (props["Runtime"], props["Architectures"]) == (GLOBALS["Runtime"], [arch]), lid
    for lid, res in build.resources("AWS::Serverless::LayerVersion").items():
        props, meta = res["Properties"], res.get("Metadata", {})
        assert GLOBALS["Runtime"] in props["CompatibleRuntimes"], lid
        assert props["CompatibleArchitectures"] == [arch] and meta.get("BuildArchitecture") == arch, lid


def _elf(path: Path) -> tuple[int, int] | None:
    """(EI_CLASS, e_machine) of an ELF file, None for anything else."""
    with path.open("rb") as fh:
        head = fh.read(20)
    if head[:4] != b"\x7fELF":
        return None
    return head[4], int.from_bytes(head[18:20], "little" if head[5] == 1 else "big")


def test_every_native_file_is_built_for_the_runtime(build: Build):
    """Each ELF file (extension modules and any bundled shared library) of the layer and of every
    function is 64-bit for the architecture, and each extension module is tagged for the runtime
    (cpython-313-aarch64-linux-gnu) or the stable ABI (abi3): anything else fails to import on
    Lambda, and only there."""
    abi, arch = _runtime()
    machine, triplet = MACHINES[arch]
    ext = re.compile(rf"\.(cpython-{abi[2:]}-{triplet}-linux-gnu|abi3)\.so$")
    roots = {**_layers(build), **{lid: build.code(lid) for lid in build.functions}}
    found, bad = [], []
    for lid, root in roots.items():
        for path in root.rglob("*"):
            if not path.is_file() or path.is_symlink() or (elf := _elf(path)) is None:
                continue
            rel = f"{lid}/{path.relative_to(root)}"
            found.append(rel)
            if elf != (2, machine):
                bad.append(f"{rel}: ELF class {elf[0]}, machine {elf[1]} (want 2, {machine})")
            # An extension module (imported by name) outside an auditwheel `<dist>.libs` folder.
            in_libs = any(part.endswith(".libs") for part in path.relative_to(root).parts)
            if path.name.endswith(".so") and not in_libs and not ext.search(path.name):
                bad.append(f"{rel}: not tagged for {abi} on {triplet} (nor abi3)")
    assert bad == []
    # orjson at least is compiled: an empty scan would mean the walk saw nothing.
    assert any("/orjson/" in f for f in found), found


def test_each_function_with_its_layers_fits_lambdas_limit(build: Build, capsys: pytest.CaptureFixture[str]):
    layers = {lid: _size(root) for lid, root in _layers(build).items()}
    rows = []
    for lid, props in build.functions.items():
        own = _size(build.code(lid))
        local = [ref["Ref"] for ref in props["Layers"] if isinstance(ref, dict) and ref.get("Ref") in layers]
        external = len(props["Layers"]) - len(local)
        total = own + sum(layers[x] for x in local) + external * EXTERNAL_LAYER
        rows.append((total, lid, own, external))
    rows.sort(reverse=True)
    with capsys.disabled():
        how = "layer from the cache" if build.cached else "layer built"
        print(f"\nsam build: {build.seconds:.0f} s ({how}); unzipped MiB (limit {LIMIT / MIB:.0f}):")
        for lid, size in layers.items():
            print(f"  layer {lid}: {size / MIB:.1f}")
        for total, lid, own, external in rows[:3]:
            extra = f" + {external} external layer(s) at {EXTERNAL_LAYER / MIB:.0f}" if external else ""
            print(f"  {lid}: {own / MIB:.2f} own{extra} -> {total / MIB:.1f} with its layers")
    over = [(lid, total) for total, lid, _, _ in rows if total >= LIMIT]
    assert over == []


def _owned(layer: Path) -> dict[str, set[str]]:
    """Each dist's top-level names in `layer` (from its RECORD)."""
    out: dict[str, set[str]] = {}
    for record in layer.glob("*.dist-info/RECORD"):
        name = canonicalize_name(record.parent.name[: -len(".dist-info")].rsplit("-", 1)[0])
        tops = {line.split(",", 1)[0].split("/", 1)[0] for line in record.read_text().splitlines() if line}
        out[name] = {t for t in tops if not t.startswith("..")}
    return out


def _pins() -> dict[str, str]:
    text = (REPO / "layers" / "threads_aws" / "requirements.txt").read_text()
    return {canonicalize_name(m[1]): m[2] for m in re.finditer(r"^([A-Za-z0-9_.-]+)==(\S+)", text, re.M)}


def _dev_only() -> set[str]:
    """Top-level names of what the dev extras bring beyond the layer's pins (moto, pytest, rich,
    PyYAML, httpx, the SAM CLI, ...), as installed in this venv, and the two first-party
    packages that never ship: the dev tooling and the client."""
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = {canonicalize_name(Requirement(r).name) for reqs in extras.values() for r in reqs}
    out = {"threads_aws_dev", "threads_aws_client", "moto", "pytest", "_pytest"}
    for name in names - set(_pins()) - {"threads-aws"}:
        try:
            files = importlib.metadata.distribution(name).files or []
        except importlib.metadata.PackageNotFoundError:
            continue
        tops = {f.parts[0] for f in files}
        out |= {t.removesuffix(".py") for t in tops if not t.endswith((".dist-info", ".."))}
    return out - {"__pycache__", "bin"}


def test_nothing_of_the_dev_tooling_ships(build: Build):
    """The layer holds exactly the pinned dists and the runtime package (every top-level entry
    owned by one of them), and neither it nor any function holds a dev-only module."""
    (layer,) = _layers(build).values()
    site = layer / "python"
    owned = _owned(site)
    assert set(owned) == set(_pins())
    assert not list(site.glob("*.egg-info"))
    tops = {p.name.removesuffix(".py") for p in site.iterdir() if not p.name.endswith(".dist-info")}
    claimed = {t.removesuffix(".py") for names in owned.values() for t in names}
    stray = tops - claimed - {"threads_aws", "__pycache__"}
    assert stray == set(), "in the layer but no pinned dist's"
    dev = _dev_only()
    assert {"moto", "pytest", "yaml", "rich"} <= dev  # installed in the dev venv (sam: a venv of its own)
    shipped = {"layer": tops}
    for lid in build.functions:
        shipped[lid] = {p.name.removesuffix(".py") for p in build.code(lid).iterdir()}
    found = {where: sorted(names & dev) for where, names in shipped.items() if names & dev}
    assert found == {}


# ---------------------------------------------------------------- importing each handler


def _host_view(site: Path, dest: Path, python: str) -> Path:
    """`site` with its compiled dists swapped for the same pinned versions built for this host
    (hard links, so no copy): an aarch64 extension can't load on x86_64, everything else is the
    artifact's own bytes."""
    compiled = []
    for wheel in site.glob("*.dist-info/WHEEL"):
        tags = {
            t
            for line in wheel.read_text().splitlines()
            if line.startswith("Tag:")
            for t in parse_tag(line.split(":", 1)[1].strip())
        }
        if not any(t.platform == "any" for t in tags):
            compiled.append(canonicalize_name(wheel.parent.name.removesuffix(".dist-info").rsplit("-", 1)[0]))
    owned = _owned(site)
    gone = {top for d in compiled for top in owned[d]}
    shared = {top for d, tops in owned.items() if d not in compiled for top in tops} & gone
    assert not shared, shared
    shutil.copytree(
        site,
        dest,
        copy_function=os.link,
        ignore=lambda d, names: [n for n in names if Path(d) == site and n in gone],
    )
    text = (REPO / "layers" / "threads_aws" / "requirements.txt").read_text()
    blocks = [
        b
        for b in re.split(r"\n(?=[A-Za-z0-9_.-]+==)", text)
        if canonicalize_name(b.split("==", 1)[0]) in compiled
    ]
    reqs = dest.parent / "host-natives.txt"
    reqs.write_text("\n".join(blocks) + "\n")
    natives = dest.parent / "host-natives"
    out = subprocess.run(
        [
            python,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--require-hashes",
            "--only-binary=:all:",
            "--implementation",
            "cp",
            "--python-version",
            "3.13",
            "--platform",
            f"manylinux2014_{platform.machine()}",
            "--target",
            str(natives),
            "-r",
            str(reqs),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    shutil.copytree(
        natives,
        dest,
        dirs_exist_ok=True,
        copy_function=os.link,
        ignore=lambda d, names: ["bin"] if Path(d) == natives else [],
    )
    return dest


@pytest.fixture(scope="module")
def importable_layer(build: Build, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The layer as this host's python3.13 can import it (itself on an arm64 host)."""
    (layer,) = _layers(build).values()
    _, arch = _runtime()
    if platform.machine() == MACHINES[arch][1]:
        return layer / "python"
    return _host_view(layer / "python", tmp_path_factory.mktemp("layer-view") / "python", python313())


PROBE = r"""
import importlib, json, os, sys, sysconfig
fn, layer, module, attr = sys.argv[1:5]
sys.path[:0] = [fn, layer]  # LAMBDA_TASK_ROOT, then /opt/python
sys.dont_write_bytecode = True  # /var/task and /opt are read-only on Lambda
mod = importlib.import_module(module)
target = getattr(mod, attr)
std = [os.path.realpath(sysconfig.get_paths()[k]) for k in ("stdlib", "platstdlib")]
roots = [os.path.realpath(p) for p in (fn, layer)]
foreign = sorted(
    name for name, m in list(sys.modules.items())
    if m is not sys.modules["__main__"] and getattr(m, "__file__", None)
    and not any(os.path.realpath(m.__file__).startswith(r + os.sep) for r in roots + std)
)
print(json.dumps({"callable": callable(target), "file": os.path.realpath(mod.__file__),
                  "foreign": foreign, "version": list(sys.version_info[:2])}))
"""


def _entry_point(build: Build, lid: str) -> tuple[str, str]:
    """(module, attribute) Lambda calls: the Handler, or for a function behind the Lambda Web
    Adapter (Handler: a script the wrapper runs) the ASGI app its script serves."""
    props = build.functions[lid]
    handler = props["Handler"]
    if "AWS_LAMBDA_EXEC_WRAPPER" in props.get("Environment", {}).get("Variables", {}):
        script = (build.code(lid) / handler).read_text().replace("\\\n", " ")  # joined continuations
        m = re.search(r"uvicorn\b.*\s(\w+):(\w+)\s*$", script, re.M)
        assert m, f"{lid}: no module:app in {handler}"
        return m[1], m[2]
    module, _, attr = handler.rpartition(".")
    return module, attr


def test_every_handler_imports_from_its_folder_and_the_layer_alone(
    build: Build, importable_layer: Path, tmp_path: Path
):
    """A fresh python3.13 (-I -S: no site-packages, no PYTHONPATH, nothing of the dev venv) per
    function, run in parallel; each loaded module comes from the function's folder, the layer or
    the standard library."""
    python = python313()
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    env = {"PATH": os.environ.get("PATH", ""), "AWS_DEFAULT_REGION": "us-east-1", "LANG": "C.UTF-8"}
    assert sorted(build.functions) == FUNCTIONS

    def probe(lid: str) -> tuple[str, Any]:
        fn = build.code(lid)
        module, attr = _entry_point(build, lid)
        out = subprocess.run(
            [python, "-I", "-S", str(script), str(fn), str(importable_layer), module, attr],
            capture_output=True,
            text=True,
            env=env,
            check=False,
            timeout=300,
        )
        if out.returncode != 0:
            return lid, out.stderr[-2000:]
        got = json.loads(out.stdout.strip().splitlines()[-1])
        if not got["file"].startswith(os.path.realpath(fn) + os.sep):
            return lid, f"{module} came from {got['file']}"
        return lid, {k: got[k] for k in ("callable", "foreign", "version")}

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = dict(pool.map(probe, FUNCTIONS))
    want = {"callable": True, "foreign": [], "version": [3, int(_runtime()[0][3:])]}
    assert {lid: got for lid, got in results.items() if got != want} == {}
