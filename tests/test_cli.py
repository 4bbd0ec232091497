"""`threads-aws log ...` (threads_aws_dev.cli): run through `main([...])` on copies of conformance logs.

The case logs are read from /work/shared/conformance/cases and copied to tmp_path per test; they
are never copied into the repo.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from helpers import shared
from threads_aws_dev.cli import main

CASES = shared.CASES
NOW = "1790000060000"

pytestmark = shared.needs  # the case logs are its inputs


def _copy(tmp_path: Path, case: str, name: str = "log.jsonl") -> Path:
    dst = tmp_path / f"{case}.jsonl"
    shutil.copyfile(CASES / case / name, dst)
    return dst


def _expected(case: str) -> dict:
    return json.loads((CASES / case / "expected.json").read_text())


def _torn(tmp_path: Path, case: str = "reduce-simple-run") -> tuple[Path, bytes]:
    """The case log without its head line and the newline that terminated the last event."""
    data = (CASES / case / "log.jsonl").read_bytes()
    body = data[: data.rstrip(b"\n").rfind(b"\n")]  # ends mid-line: the last event is torn
    last = body[body.rfind(b"\n") + 1 :]
    path = tmp_path / "torn.jsonl"
    path.write_bytes(body)
    return path, last


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().rstrip(b"\n").split(b"\n")


# --------------------------------------------------------------------------------------------
# verify
# --------------------------------------------------------------------------------------------


def test_verify_ok(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _copy(tmp_path, "reduce-simple-run")
    before = log.read_bytes()
    assert main(["log", "verify", str(log), "--now", NOW]) == 0
    out, err = capsys.readouterr()
    head = json.loads(_lines(log)[-1])
    n = len(_lines(log)) - 1  # header + events, not the head checkpoint
    assert out == f"ok {n} lines, head seq {head['seq']} {head['hash']}\n"
    assert err == ""
    assert log.read_bytes() == before  # read-only


def test_verify_default_clock(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _copy(tmp_path, "reduce-simple-run")
    assert main(["log", "verify", str(log)]) == 0
    assert capsys.readouterr().out.startswith("ok ")


@pytest.mark.parametrize(
    "case",
    [
        "seq-gap-rejected",
        "chain-middle-edit-detected",
        "head-checkpoint-suffix-removed",
        "line-noncanonical-key-order",
    ],
)
def test_verify_error_code_and_seq(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    if not (CASES / case).is_dir():
        pytest.skip(f"case {case} not shipped")
    log = _copy(tmp_path, case)
    err_expected = _expected(case)["error"]
    assert main(["log", "verify", str(log), "--now", NOW]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"error {err_expected['code']} at seq {err_expected['seq']}: ")
    assert err.count("\n") == 1 and "Traceback" not in err


def test_verify_seq_gap_exact(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _copy(tmp_path, "seq-gap-rejected")
    assert main(["log", "verify", str(log)]) == 1
    assert capsys.readouterr().err.startswith("error seq_mismatch at seq 4: ")


def test_verify_torn_tail_reports_unverified(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, torn = _torn(tmp_path)
    full = _lines(CASES / "reduce-simple-run" / "log.jsonl")
    last_kept = json.loads(full[-3])  # the event before the torn one
    assert main(["log", "verify", str(path), "--now", NOW]) == 0
    out, _ = capsys.readouterr()
    first, second = out.splitlines()
    expected_hash = hashlib.sha256(full[-3]).hexdigest()
    assert first == f"ok {len(full) - 2} lines, head seq {last_kept['seq']} {expected_hash}"
    assert second == f"head unverified (torn tail of {len(torn)} bytes dropped)"


def test_verify_missing_head_reports_unverified(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = (CASES / "reduce-simple-run" / "log.jsonl").read_bytes()
    path = tmp_path / "nohead.jsonl"
    path.write_bytes(data[: data.rstrip(b"\n").rfind(b"\n") + 1])  # every line terminated, no head
    assert main(["log", "verify", str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "head unverified (no head checkpoint)"


# --------------------------------------------------------------------------------------------
# user input problems: one line, exit 2 (or 1 for a refused log), never a traceback
# --------------------------------------------------------------------------------------------


def test_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["log", "verify", str(tmp_path / "nope.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot read" in err and "Traceback" not in err


def test_directory_as_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["log", "reduce", str(tmp_path)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.parametrize(
    "data",
    [b"", b"\n", b"not json\n", b"\xff\xfe\x00garbage", b'{"a":1}\n', b"[" * 5000 + b"\n", b"{}"],
)
def test_garbage_is_a_log_error(tmp_path: Path, capsys: pytest.CaptureFixture[str], data: bytes) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(data)
    assert main(["log", "verify", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error ") and err.count("\n") == 1


def test_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert main(["log"]) == 2
    assert main(["log", "verify"]) == 2
    assert main(["log", "verify", "x", "--now", "soon"]) == 2
    assert main(["log", "frobnicate", "x"]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_help_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["log", "--help"]) == 0
    out = capsys.readouterr().out
    for cmd in ("verify", "reduce", "export", "import", "render"):
        assert cmd in out


def test_bad_output_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _copy(tmp_path, "reduce-simple-run")
    assert main(["log", "export", str(log), "-o", str(tmp_path / "no" / "such" / "dir.jsonl")]) == 2
    assert "cannot write" in capsys.readouterr().err


def test_artifacts_dir_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _copy(tmp_path, "reduce-simple-run")
    assert main(["log", "verify", str(log), "--artifacts", str(tmp_path / "none")]) == 2
    assert "not a directory" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# reduce
# --------------------------------------------------------------------------------------------


def test_reduce_equals_expected_state(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _copy(tmp_path, "reduce-simple-run")
    assert main(["log", "reduce", str(log), "--now", NOW]) == 0
    out = capsys.readouterr().out
    assert json.loads(out) == _expected("reduce-simple-run")["state"]
    assert out == json.dumps(json.loads(out), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def test_reduce_all_ok_cases_with_state(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    checked = 0
    for case_dir in sorted(CASES.iterdir()):
        exp_path = case_dir / "expected.json"
        if not (case_dir / "log.jsonl").is_file() or not exp_path.is_file():
            continue
        exp = json.loads(exp_path.read_text())
        case = json.loads((case_dir / "case.json").read_text())
        if exp.get("outcome") != "ok" or "state" not in exp or case.get("kind") not in ("reduce", "render"):
            continue
        log = _copy(tmp_path, case_dir.name)
        now = str(case.get("clock", {}).get("now", NOW))
        assert main(["log", "reduce", str(log), "--now", now]) == 0, case_dir.name
        assert json.loads(capsys.readouterr().out) == exp["state"], case_dir.name
        checked += 1
    assert checked >= 1


def test_reduce_projections(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = [
        d
        for d in sorted(CASES.iterdir())
        if (d / "expected.json").is_file()
        and "projections" in json.loads((d / "expected.json").read_text())
        and json.loads((d / "expected.json").read_text()).get("outcome") == "ok"
    ]
    if not cases:
        pytest.skip("no shipped case lists projections")
    for d in cases:
        exp = json.loads((d / "expected.json").read_text())
        now = str(json.loads((d / "case.json").read_text()).get("clock", {}).get("now", NOW))
        log = _copy(tmp_path, d.name)
        assert main(["log", "reduce", str(log), "--projections", "--now", now]) == 0, d.name
        got = json.loads(capsys.readouterr().out)["projections"]
        for key, value in exp["projections"].items():
            assert got[key] == value, (d.name, key)


def test_reduce_torn_notes_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = _torn(tmp_path)
    assert main(["log", "reduce", str(path), "--now", NOW]) == 0
    out, err = capsys.readouterr()
    state = json.loads(out)  # stdout stays pure JSON
    assert state["head"]["seq"] == json.loads(_lines(CASES / "reduce-simple-run" / "log.jsonl")[-3])["seq"]
    assert "head unverified" in err


def test_reduce_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _copy(tmp_path, "chain-middle-edit-detected")
    assert main(["log", "reduce", str(log)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("error prev_hash_mismatch at seq 3: ")


# --------------------------------------------------------------------------------------------
# export
# --------------------------------------------------------------------------------------------


def _ok_logs() -> list[str]:
    names = []
    for d in sorted(CASES.iterdir()):
        if (d / "log.jsonl").is_file() and (d / "expected.json").is_file():
            exp = json.loads((d / "expected.json").read_text())
            if exp.get("outcome") == "ok" and exp.get("head_verified", True):
                names.append(d.name)
    return names


@pytest.mark.parametrize("case", _ok_logs() if CASES.is_dir() else [])
def test_export_byte_identical(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    log = _copy(tmp_path, case)
    out = tmp_path / "out.jsonl"
    assert main(["log", "export", str(log), "-o", str(out), "--now", NOW]) == 0
    assert out.read_bytes() == log.read_bytes()


def test_export_to_stdout(tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    log = _copy(tmp_path, "reduce-simple-run")
    assert main(["log", "export", str(log)]) == 0
    assert capsysbinary.readouterr().out == log.read_bytes()


def test_export_torn_drops_tail_and_writes_head(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, torn = _torn(tmp_path)
    out = tmp_path / "out.jsonl"
    assert main(["log", "export", str(path), "-o", str(out)]) == 0
    assert "head unverified" in capsys.readouterr().err
    data = out.read_bytes()
    kept = path.read_bytes()[: -len(torn)]
    assert data.startswith(kept) and torn not in data
    # and the re-export is itself clean and verified
    assert main(["log", "verify", str(out)]) == 0
    assert capsys.readouterr().out.count("\n") == 1


def test_export_refused_log_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _copy(tmp_path, "seq-gap-rejected")
    out = tmp_path / "out.jsonl"
    assert main(["log", "export", str(log), "-o", str(out)]) == 1
    assert not out.exists()
    assert capsys.readouterr().err.startswith("error seq_mismatch at seq 4")


def test_export_needs_file_or_branch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["log", "export"]) == 2
    log = _copy(tmp_path, "reduce-simple-run")
    assert main(["log", "export", str(log), "--branch", "x"]) == 2
    assert "either FILE or --branch" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# --artifacts: request verification
# --------------------------------------------------------------------------------------------


def _request_artifacts(tmp_path: Path, case: str) -> tuple[Path, list[tuple[int, str]]]:
    """An artifacts dir with the Render v1 bytes of every model_request of `case` (computed
    from the events before it), and the (seq, sha256) of each request."""
    from threads_aws.core.render import render_request

    events = [json.loads(x) for x in _lines(CASES / case / "log.jsonl")]
    events = [e for e in events if "format" not in e]
    adir = tmp_path / "artifacts"
    adir.mkdir()
    reqs = []
    for i, ev in enumerate(events):
        if ev["type"] == "model_request":
            body = render_request(events[:i], lambda ref: b"", purpose=ev["data"].get("purpose", "turn"))
            ref = ev["data"]["request_ref"]
            assert hashlib.sha256(body).hexdigest() == ref["sha256"]
            (adir / ref["sha256"]).write_bytes(body)
            reqs.append((ev["seq"], ref["sha256"]))
    return adir, reqs


def test_verify_requests_with_artifacts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _copy(tmp_path, "reduce-simple-run")
    adir, reqs = _request_artifacts(tmp_path, "reduce-simple-run")
    assert reqs
    assert main(["log", "verify", str(log), "--artifacts", str(adir)]) == 0
    assert capsys.readouterr().out.startswith("ok ")

    seq, sha = reqs[0]
    body = (adir / sha).read_bytes()
    (adir / sha).write_bytes(body[:-1] + b"X")  # same length, other bytes
    assert main(["log", "verify", str(log), "--artifacts", str(adir)]) == 1
    assert capsys.readouterr().err.startswith(f"error artifact_corrupt at seq {seq}: ")

    (adir / sha).write_bytes(body + b"\n")  # other length
    assert main(["log", "verify", str(log), "--artifacts", str(adir)]) == 1
    assert capsys.readouterr().err.startswith(f"error artifact_corrupt at seq {seq}: ")

    (adir / sha).unlink()
    assert main(["log", "verify", str(log), "--artifacts", str(adir)]) == 1
    assert capsys.readouterr().err.startswith(f"error artifact_missing at seq {seq}: ")


def test_no_artifacts_means_no_request_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _copy(tmp_path, "reduce-simple-run")  # the case ships no artifacts
    assert main(["log", "verify", str(log)]) == 0


# --------------------------------------------------------------------------------------------
# render
# --------------------------------------------------------------------------------------------


def test_render_next_request(tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    from threads_aws.core.render import render_request

    log = _copy(tmp_path, "reduce-simple-run")
    events = [json.loads(x) for x in _lines(log)]
    events = [e for e in events if "format" not in e]
    expected = render_request(events, lambda ref: b"")
    assert main(["log", "render", str(log)]) == 0
    assert capsysbinary.readouterr().out == expected
    out = tmp_path / "req.jsonl"
    assert main(["log", "render", str(log), "-o", str(out)]) == 0
    assert out.read_bytes() == expected
    first = json.loads(expected.split(b"\n")[0])
    assert set(first) == {"adapter", "model", "params", "system", "tools"}


def test_render_matches_case_render_expectation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = [d for d in sorted(CASES.iterdir()) if (d / "request.bytes").is_file()]
    if not cases:
        pytest.skip("no shipped render case")
    for d in cases:
        log = _copy(tmp_path, d.name)
        out = tmp_path / "req.bytes"
        args = ["log", "render", str(log), "-o", str(out)]
        if (d / "artifacts").is_dir():
            args += ["--artifacts", str(d / "artifacts")]
        assert main(args) == 0, d.name
        assert out.read_bytes() == (d / "request.bytes").read_bytes(), d.name


# --------------------------------------------------------------------------------------------
# import / export --branch (the DynamoDB/S3 store)
# --------------------------------------------------------------------------------------------


def test_import_without_store_config(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch) -> None:
    for name in ("EVENTS_TABLE", "STATE_TABLE", "ARTIFACTS_BUCKET"):
        monkeypatch.delenv(name, raising=False)
    log = _copy(tmp_path, "reduce-simple-run")
    assert main(["log", "import", str(log), "--tenant", "acme"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and ("not configured" in err or "not available" in err)
    assert main(["log", "export", "--branch", "0192b000-0000-7000-8000-000000000001"]) == 2


def test_import_needs_tenant(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch) -> None:
    monkeypatch.delenv("THREADS_TENANT", raising=False)
    log = _copy(tmp_path, "reduce-simple-run")
    assert main(["log", "import", str(log)]) == 2
    assert "tenant" in capsys.readouterr().err


@pytest.fixture
def aws_store(monkeypatch):
    import boto3
    from moto import mock_aws

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    # Names of this test's own: a moto mock started earlier in the process (the conformance
    # env keeps one running) makes this one nested, and a nested mock starts from its data.
    suffix = uuid.uuid4().hex[:8]
    events, state, bucket = f"events-{suffix}", f"state-{suffix}", f"artifacts-{suffix}"
    monkeypatch.setenv("EVENTS_TABLE", events)
    monkeypatch.setenv("STATE_TABLE", state)
    monkeypatch.setenv("ARTIFACTS_BUCKET", bucket)
    monkeypatch.setenv("THREADS_TENANT", "acme")
    with mock_aws():
        ddb = boto3.client("dynamodb")
        ddb.create_table(
            TableName=events,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[
                {"AttributeName": "branch_id", "AttributeType": "S"},
                {"AttributeName": "seq", "AttributeType": "N"},
            ],
            KeySchema=[
                {"AttributeName": "branch_id", "KeyType": "HASH"},
                {"AttributeName": "seq", "KeyType": "RANGE"},
            ],
        )
        ddb.create_table(
            TableName=state,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[
                {"AttributeName": n, "AttributeType": "S"} for n in ("pk", "sk", "gsi1pk", "gsi1sk")
            ],
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": "gsi1",
                    "KeySchema": [
                        {"AttributeName": "gsi1pk", "KeyType": "HASH"},
                        {"AttributeName": "gsi1sk", "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "ALL"},
                }
            ],
        )
        boto3.client("s3").create_bucket(Bucket=bucket)
        yield ddb


def test_store_import_export_roundtrip(tmp_path: Path, capsys: pytest.CaptureFixture[str], aws_store) -> None:
    log = _copy(tmp_path, "reduce-simple-run")
    branch = json.loads(_lines(log)[0])["branch_id"]
    assert main(["log", "import", str(log), "--now", NOW]) == 0
    assert "created" in capsys.readouterr().out
    out = tmp_path / "out.jsonl"
    assert main(["log", "export", "--branch", branch, "-o", str(out)]) == 0
    assert out.read_bytes() == log.read_bytes()
    # identical bytes again: a no-op
    assert main(["log", "import", str(log), "--now", NOW]) == 0
    assert "no-op" in capsys.readouterr().out
    assert main(["log", "export", "--branch", "0192b000-0000-7000-8000-0000000000ff"]) == 2
    assert "not found" in capsys.readouterr().err


def test_store_import_torn_then_complete(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], aws_store
) -> None:
    path, _ = _torn(tmp_path)
    branch = json.loads(_lines(path)[0])["branch_id"]
    assert main(["log", "import", str(path), "--now", NOW]) == 0
    out = capsys.readouterr().out
    assert "head unverified" in out
    from threads_aws.store.events import EventStore

    rec = EventStore(aws_store, os.environ["EVENTS_TABLE"], os.environ["STATE_TABLE"]).head(branch)
    assert rec.state == "inspection_only" and rec.head_verified is False and rec.dropped_ref
    # the stored prefix of the full export: importing the full file appends the missing line
    full = _copy(tmp_path, "reduce-simple-run")
    assert main(["log", "import", str(full), "--now", NOW]) == 0
    assert "1 line(s) appended" in capsys.readouterr().out


def test_store_import_seq_conflict(tmp_path: Path, capsys: pytest.CaptureFixture[str], aws_store) -> None:
    # The cases share thread/branch ids: another valid log of the same branch differs from the
    # stored one at some seq, which must be seq_conflict there.
    log = _copy(tmp_path, "reduce-simple-run")
    assert main(["log", "import", str(log), "--now", NOW]) == 0
    capsys.readouterr()
    other = None
    branch = json.loads(_lines(log)[0])["branch_id"]
    for d in sorted(CASES.iterdir()):
        p = d / "log.jsonl"
        if d.name == "reduce-simple-run" or not p.is_file():
            continue
        exp = json.loads((d / "expected.json").read_text())
        first = json.loads(p.read_bytes().split(b"\n", 1)[0] or b"{}")
        if (
            exp.get("outcome") == "ok"
            and first.get("branch_id") == branch
            and "threads.log" == first.get("format")
        ):
            if (d / "log.jsonl").read_bytes() != log.read_bytes():
                other = d.name
                break
    if other is None:
        pytest.skip("no second ok case on the same branch id")
    code = main(["log", "import", str(_copy(tmp_path, other)), "--now", NOW])
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("error seq_conflict at seq "), err


# --------------------------------------------------------------------------------------------
# the console script and python -m
# --------------------------------------------------------------------------------------------


def test_python_dash_m(tmp_path: Path) -> None:
    log = _copy(tmp_path, "seq-gap-rejected")
    proc = subprocess.run(
        [sys.executable, "-m", "threads_aws_dev", "log", "verify", str(log)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith("error seq_mismatch at seq 4: ")
    assert "Traceback" not in proc.stderr


# --------------------------------------------------------------------------------------------
# a child export (ancestor segment through the fork point, then the child)
# --------------------------------------------------------------------------------------------

CHILD_BRANCH = "0192b000-0000-7000-8000-0000000000c1"


def _child_export(tmp_path: Path) -> Path:
    """Fork fork-at-snapshot-ok at its case's snapshot and write the child's export."""
    from threads_aws.core.fork_points import child_lines, fork_point
    from threads_aws.core.importer import export_bytes, import_log
    from threads_aws.core.lines import head_line

    case = "fork-at-snapshot-ok"
    spec = json.loads((CASES / case / "case.json").read_text())
    now = spec["clock"]["now"]
    imp = import_log((CASES / case / "log.jsonl").read_bytes(), now=now)
    parent = imp.segments[-1]
    hashes = {line.seq: line.hash for line in parent.lines}
    point = fork_point(imp.fold, hashes, spec["input"]["fork_at_event_id"], now)
    header, fork = child_lines(
        thread_id=parent.thread_id,
        parent_branch_id=parent.branch_id,
        point=point,
        new_branch_id=CHILD_BRANCH,
        epoch=imp.fold.epoch,
        now=now,
        sandbox_id="sbx_cli_test",
    )
    parent.lines = [line for line in parent.lines if line.seq <= point.seq]
    from threads_aws.core.importer import Segment

    child = Segment(CHILD_BRANCH, parent.thread_id, header, {"impl": "threads-aws", "version": "0.1.0"})
    child.lines.append(fork)
    path = tmp_path / "child.jsonl"
    path.write_bytes(export_bytes([parent, child], head_line(CHILD_BRANCH, fork.seq, fork.hash)))
    return path


def test_child_export_verify_and_reexport(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if not (CASES / "fork-at-snapshot-ok").is_dir():
        pytest.skip("fork-at-snapshot-ok not shipped")
    path = _child_export(tmp_path)
    assert main(["log", "verify", str(path), "--now", NOW]) == 0
    out = capsys.readouterr().out
    fork = json.loads(_lines(path)[-2])
    fork_hash = hashlib.sha256(_lines(path)[-2]).hexdigest()
    assert out == f"ok {len(_lines(path)) - 1} lines, head seq {fork['seq']} {fork_hash}\n"
    dst = tmp_path / "again.jsonl"
    assert main(["log", "export", str(path), "-o", str(dst)]) == 0
    assert dst.read_bytes() == path.read_bytes()
    assert main(["log", "reduce", str(path), "--now", NOW]) == 0
    state = json.loads(capsys.readouterr().out)
    assert state["branch_id"] == CHILD_BRANCH and state["head"]["seq"] == fork["seq"]


def test_store_import_child_export(tmp_path: Path, capsys: pytest.CaptureFixture[str], aws_store) -> None:
    if not (CASES / "fork-at-snapshot-ok").is_dir():
        pytest.skip("fork-at-snapshot-ok not shipped")
    parent_log = _copy(tmp_path, "fork-at-snapshot-ok")
    assert main(["log", "import", str(parent_log), "--now", NOW]) == 0  # the full parent first
    path = _child_export(tmp_path)
    assert main(["log", "import", str(path), "--now", NOW]) == 0
    assert "1 branch(es) created" in capsys.readouterr().out
    out = tmp_path / "out.jsonl"
    assert main(["log", "export", "--branch", CHILD_BRANCH, "-o", str(out)]) == 0
    assert out.read_bytes() == path.read_bytes()
    parent_branch = json.loads(_lines(parent_log)[0])["branch_id"]
    assert main(["log", "export", "--branch", parent_branch, "-o", str(out)]) == 0
    assert out.read_bytes() == parent_log.read_bytes()  # the parent is unchanged


def test_a_missing_optional_dependency_is_a_one_line_hint_not_a_traceback():
    """`threads-aws run` in a venv without rich (the `local` extra): one line saying what to
    install, exit 2; a missing module of our own stays an internal error."""
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['rich'] = None\n"  # as if rich were not installed
        "from threads_aws_dev.cli import main\n"
        "sys.exit(main(['run', '--url', 'http://127.0.0.1:9', 'hello']))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert "'rich'" in out.stderr and "pip install" in out.stderr and "'.[local]'" in out.stderr
