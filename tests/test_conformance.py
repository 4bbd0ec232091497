"""The conformance runner over the shared cases (the CI path): any FAIL fails the build."""

from pathlib import Path

import pytest
from threads_aws.conformance import run_case

CASES = Path(__file__).resolve().parents[1].parent / "shared" / "conformance" / "cases"
CASE_DIRS = sorted(p for p in CASES.iterdir() if (p / "case.json").exists()) if CASES.is_dir() else []


@pytest.mark.skipif(not CASE_DIRS, reason="../shared/conformance/cases is not beside the repo")
@pytest.mark.parametrize("case_dir", CASE_DIRS, ids=lambda p: p.name)
def test_case(case_dir: Path) -> None:
    result = run_case(case_dir)
    assert result.verdict != "FAIL", result.line()


def test_cli_output_and_exit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from threads_aws.conformance.runner import main

    case = tmp_path / "bad-kind"
    case.mkdir()
    (case / "case.json").write_text(
        '{"name":"bad-kind","family":"log","kind":"nonsense","description":"x","clock":{"now":0}}'
    )
    (case / "expected.json").write_text('{"outcome":"ok"}')
    assert main([str(tmp_path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("FAIL bad-kind: unknown kind")
    assert out[-1] == "0 passed, 1 failed, 0 skipped"


def test_unknown_fixture_key_fails_the_case(tmp_path: Path) -> None:
    case = tmp_path / "odd-sandbox"
    case.mkdir()
    (case / "case.json").write_text(
        '{"name":"odd-sandbox","family":"log","kind":"fork","description":"x","clock":{"now":0}}'
    )
    (case / "expected.json").write_text('{"outcome":"ok"}')
    snap = '{"restore_sandbox_id":"b","manifest":[],"colour":1}'
    (case / "sandbox.json").write_text('{"snapshots":{"s":' + snap + "}}")
    result = run_case(case)
    assert result.verdict == "FAIL" and "sandbox.snapshots.s.colour" in result.detail
