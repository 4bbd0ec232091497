"""The conformance runner over the shared cases (the CI path): any FAIL fails the build."""

from pathlib import Path

import pytest
from helpers import shared
from threads_aws_dev.conformance import run_case

CASES = shared.CASES


@pytest.mark.parametrize("case_dir", shared.cases(lambda d: (d / "case.json").exists()))
def test_case(case_dir: Path) -> None:
    result = run_case(case_dir)
    assert result.verdict != "FAIL", result.line()


def _fork_case(d: Path) -> bool:
    import json

    return (d / "case.json").exists() and json.loads((d / "case.json").read_text()).get("kind") == "fork"


@pytest.mark.parametrize("case_dir", shared.cases(_fork_case))
def test_fork_case_on_the_s3_workspace_provider(case_dir: Path) -> None:
    """The fork kind on the real provider where the sandbox script permits it (a scripted lost
    answer or crash is a fake's behaviour: SKIP)."""
    from threads_aws_dev.conformance.kinds import fork_permits_real

    result = run_case(case_dir, sandbox="s3")
    assert result.verdict == ("PASS" if fork_permits_real(case_dir) else "SKIP"), result.line()


def test_cli_output_and_exit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from threads_aws_dev.conformance.runner import main

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


def _render_case(tmp_path: Path, *, drop_artifact: bool) -> Path:
    """A render case built from reduce-simple-run: its requests' bytes become the artifacts."""
    import json
    import shutil

    from threads_aws.core.canonical import sha256_hex
    from threads_aws.core.importer import import_log
    from threads_aws.core.render import declared_prefix, render_request

    src = CASES / "reduce-simple-run"
    case = tmp_path / ("render-missing" if drop_artifact else "render-ok")
    (case / "artifacts").mkdir(parents=True)
    shutil.copyfile(src / "log.jsonl", case / "log.jsonl")
    events = import_log((src / "log.jsonl").read_bytes()).fold.known_events()
    requests = [i for i, e in enumerate(events) if e["type"] == "model_request"]
    for i in requests:
        body = render_request(events[:i], lambda ref: b"")
        assert sha256_hex(body) == events[i]["data"]["request_ref"]["sha256"]
        if not (drop_artifact and i == requests[-1]):
            (case / "artifacts" / sha256_hex(body)).write_bytes(body)
    meta = json.loads((src / "case.json").read_text())
    meta.update(name=case.name, kind="render")
    (case / "case.json").write_text(json.dumps(meta))
    if drop_artifact:
        expected = {
            "outcome": "error",
            "error": {"code": "artifact_missing", "seq": events[requests[-1]]["seq"]},
        }
    else:
        nxt = render_request(events, lambda ref: b"")
        expected = {
            "outcome": "ok",
            "state": json.loads((src / "expected.json").read_text())["state"],
            "render": {"next_request_sha256": sha256_hex(nxt), "declared_prefix": declared_prefix(events)},
        }
    (case / "expected.json").write_text(json.dumps(expected))
    return case


@shared.needs
@pytest.mark.parametrize("drop_artifact", [False, True])
def test_render_kind(tmp_path: Path, drop_artifact: bool) -> None:
    result = run_case(_render_case(tmp_path, drop_artifact=drop_artifact))
    assert result.verdict == "PASS", result.line()
