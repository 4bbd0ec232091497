"""The dev install runs on the versions the layer ships: layers/threads_aws/constraints.txt is
requirements.txt's pins as plain `name==version` lines (the hashes stay the layer build's), kept
fresh by `make -C layers/threads_aws constraints` (`lock` runs it), and this venv has exactly
those versions.

A venv installed without `-c layers/threads_aws/constraints.txt` (or with a tool that pins its own
boto3/click/pydantic, as the SAM CLI does: it gets a venv of its own) fails the second test."""

from __future__ import annotations

import re
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from packaging.utils import canonicalize_name

LAYER = Path(__file__).resolve().parents[1] / "layers" / "threads_aws"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")


def pins(text: str) -> dict[str, str]:
    found = (PIN.match(line) for line in text.splitlines())
    return {canonicalize_name(m[1]): m[2] for m in found if m}


def test_the_constraints_are_the_layers_pins():
    required = pins((LAYER / "requirements.txt").read_text())
    constraints = (LAYER / "constraints.txt").read_text()
    assert len(required) > 10
    assert pins(constraints) == required, "stale: run `make -C layers/threads_aws constraints`"
    assert "--hash" not in constraints


def test_the_installed_versions_are_the_layers_pins():
    wrong = {}
    for name, pinned in pins((LAYER / "constraints.txt").read_text()).items():
        try:
            installed = version(name)
        except PackageNotFoundError:
            installed = None
        if installed != pinned:
            wrong[name] = f"installed {installed}, the layer ships {pinned}"
    assert not wrong, (
        "this venv runs other versions than the layer ships; reinstall with "
        "`.venv/bin/pip install -c layers/threads_aws/constraints.txt -e clients/python -e '.[dev]'`: "
        f"{wrong}"
    )
