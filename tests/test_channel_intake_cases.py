"""The repo's own `intake` cases (tests/data/intake/, in the shared case format: they add to the
contract's two, never copy them) through the conformance runner: the real webhook route and
inbox on moto with the fake verifying adapter. Batches keyed by index, provider item ids across
delivery ids, conversations and installations and channels kept apart, forged copies refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import shared
from threads_aws.conformance import run_case

CASES = sorted(p for p in (Path(__file__).parent / "data" / "intake").iterdir() if p.is_dir())


def test_there_are_more_intake_cases_than_the_contract_s():
    assert len(CASES) >= 5


@pytest.mark.parametrize("case_dir", CASES, ids=[c.name for c in CASES])
def test_case_is_in_the_shared_format(case_dir: Path):
    jsonschema = pytest.importorskip("jsonschema")
    schema_path = shared.ROOT / "conformance" / "case.schema.json"
    if not schema_path.exists():
        pytest.skip("no ../shared/conformance beside the repo")
    schema = json.loads(schema_path.read_text())
    case = json.loads((case_dir / "case.json").read_text())
    assert case["name"] == case_dir.name and case["kind"] == "intake"
    for name, file in (("Case", "case.json"), ("Expected", "expected.json")):
        doc = json.loads((case_dir / file).read_text())
        jsonschema.validate(doc, {**schema, "$ref": f"#/$defs/{name}"})


@pytest.mark.parametrize("case_dir", CASES, ids=[c.name for c in CASES])
def test_case_passes_through_the_runner(case_dir: Path):
    result = run_case(case_dir)
    assert result.verdict == "PASS", result.line()
