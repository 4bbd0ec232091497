"""`sam build`'s output, built once per test session: what `sam deploy` zips and uploads.

`sam build --build-dir DIR` runs as `.ci/run` runs it (only a `python3.13` symlink put on PATH,
in a folder of its own: a symlink inside the 3.11 venv makes 3.13 adopt that venv, without pip),
cached: the layer is rebuilt only when layers/threads_aws changed (SAM hashes the folder, its
__pycache__ included), else copied from the cache. SAM keeps the hashes it compares in a
build.toml beside DIR, so DIR is .aws-sam/test/build (the next session finds them there), not a
fresh temp folder, and never .aws-sam/build (what `sam deploy` would upload)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".aws-sam" / "cache"
ROOT = REPO / ".aws-sam" / "test" / "build"


def load(path: Path) -> dict[str, Any]:
    """A SAM/CloudFormation template, its short-form tags (!Ref, !Sub, ...) as their long forms."""
    from samtranslator.yaml_helper import yaml_parse

    doc: dict[str, Any] = yaml_parse(path.read_text())
    return doc


def python313() -> str:
    """python3.13 (PATH or pyenv), as layers/threads_aws/find-python.sh finds it; a skip without
    one (a failure under CI)."""
    out = subprocess.run(
        [str(REPO / "layers" / "threads_aws" / "find-python.sh"), "3.13"],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        reason = "no python3.13 on PATH or under pyenv (the functions' runtime)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return out.stdout.strip()


@dataclass(frozen=True)
class Build:
    root: Path  # --build-dir
    template: dict[str, Any]  # root/template.yaml: CodeUri/ContentUri point into root
    seconds: float
    cached: bool  # the layer came from the cache

    def resources(self, kind: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.template["Resources"].items() if v["Type"] == kind}

    @property
    def functions(self) -> dict[str, dict[str, Any]]:
        """Each function's effective properties (Globals.Function under its own)."""
        base = self.template.get("Globals", {}).get("Function", {})
        out = {}
        for lid, res in self.resources("AWS::Serverless::Function").items():
            props = {**base, **res["Properties"]}
            # SAM appends a function's Layers to the global ones (it doesn't replace them).
            props["Layers"] = list(base.get("Layers", [])) + list(res["Properties"].get("Layers", []))
            out[lid] = props
        return out

    def code(self, lid: str) -> Path:
        props = self.template["Resources"][lid]["Properties"]
        return self.root / (props.get("CodeUri") or props["ContentUri"])


_built: dict[str, Build] = {}


def sam_build(tmp_path_factory: pytest.TempPathFactory) -> Build:
    """The session's build (made on first use)."""
    if "build" in _built:
        return _built["build"]
    python = python313()
    sam = shutil.which("sam", path=str(Path(sys.executable).parent)) or shutil.which("sam")
    if sam is None:
        pytest.fail("sam (aws-sam-cli, a dev dependency) is not installed")
    base = tmp_path_factory.mktemp("sam-build")
    (base / "bin").mkdir()
    (base / "bin" / "python3.13").symlink_to(python)
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(base / "bin"), str(Path(sys.executable).parent), os.environ["PATH"]]),
        "SAM_CLI_TELEMETRY": "0",
    }
    root = ROOT
    cmd = [
        sam,
        "build",
        "--template-file",
        str(REPO / "template.yaml"),
        "--build-dir",
        str(root),
        "--cached",
        "--cache-dir",
        str(CACHE),
        "--parallel",
    ]
    start = time.monotonic()
    out = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, check=False, timeout=900)
    seconds = time.monotonic() - start
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    cached = "Valid cache found" in out.stdout + out.stderr
    _built["build"] = Build(root, load(root / "template.yaml"), seconds, cached)
    return _built["build"]
