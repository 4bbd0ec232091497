"""The contract beside the clone, `../shared` (read-only, never copied into the repo): its spec
(`spec/openapi.json`, ...) and its conformance cases. Every test that reads it finds it here; a
clone without `../shared` skips exactly those tests, each with the one reason `MISSING`.

Module-level parametrizations use `cases()`; tests use the `shared` fixture (conftest.py) or
the `needs` mark.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOT = REPO.parent / "shared"
SPEC = ROOT / "spec"
CASES = ROOT / "conformance" / "cases"
PRESENT = SPEC.is_dir() and CASES.is_dir()
MISSING = f"the contract is not beside the repo: {ROOT} (spec/, conformance/) is missing"

needs = pytest.mark.skipif(not PRESENT, reason=MISSING)


def cases(where: Callable[[Path], bool] = lambda d: True) -> list[Any]:
    """The case folders `where` keeps, as parametrize values (id = the case name); without the
    contract, one skipped value carrying `MISSING`."""
    if not PRESENT:
        return [pytest.param(None, id="no-contract", marks=pytest.mark.skip(reason=MISSING))]
    return [pytest.param(d, id=d.name) for d in sorted(CASES.iterdir()) if d.is_dir() and where(d)]


def expected(case_dir: Path) -> dict[str, Any]:
    out: dict[str, Any] = json.loads((case_dir / "expected.json").read_text())
    return out


def openapi() -> dict[str, Any]:
    out: dict[str, Any] = json.loads((SPEC / "openapi.json").read_text())
    return out
