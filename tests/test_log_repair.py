"""The torn-tail import and its recovery, `log_repaired` (semantics.md §1 "Torn tail",
"Corruption at seq k"), through the CLI (`threads-aws log import`, `log repair`) into a second
store: a branch exported by this host, its head line lost and its last line cut (no newline),
imports with the tail dropped and kept as an artifact, `inspection_only`; recovery appends
`log_repaired{truncated_bytes, at_offset, dropped_ref}` once (also when re-run after a crash
before the state change) and the branch is ready; it re-exports, re-imports, reduces and
re-renders. A corrupt middle line is `log_corrupt` at its seq, with nothing stored."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from helpers.engine import make_ctx, new_thread, run, say
from threads_aws.core import render
from threads_aws.core.importer import import_log
from threads_aws.core.reduced_state import reduce
from threads_aws.store.artifacts import ArtifactStore
from threads_aws.store.events import EventStore
from threads_aws_dev.cli import main
from threads_aws_dev.local.infra import create_resources

TEMPLATE = Path(__file__).resolve().parents[1] / "template.yaml"
NOW = "1790000060000"


def engine_export(aws: Any) -> tuple[Any, str, bytes]:
    """A branch this host wrote (a tool call and model requests with their artifacts)."""
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    say(ctx, b, "time")
    assert run(ctx, b).state == "idle"
    return ctx, b, ctx.store.export(b)


def torn(data: bytes) -> tuple[bytes, bytes]:
    """The export without its Head line and without the last event's newline: (file, tail)."""
    lines = data.rstrip(b"\n").split(b"\n")[:-1]  # no Head checkpoint
    return b"\n".join(lines), lines[-1]


@pytest.fixture
def target(aws: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[EventStore, ArtifactStore]:
    """A second store on the same moto account, which the CLI is configured for."""
    res = create_resources(TEMPLATE, aws.session, prefix=f"{aws.prefix}-import")
    monkeypatch.setenv("EVENTS_TABLE", res.events_table)
    monkeypatch.setenv("STATE_TABLE", res.state_table)
    monkeypatch.setenv("ARTIFACTS_BUCKET", res.bucket)
    monkeypatch.setenv("THREADS_TENANT", "acme")
    artifacts = ArtifactStore(aws.s3, res.bucket)
    return EventStore(aws.ddb, res.events_table, res.state_table, artifacts), artifacts


def write(tmp_path: Path, data: bytes, name: str = "t.jsonl") -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def repaired_events(store: EventStore, b: str) -> list[dict[str, Any]]:
    return [e for e in import_log(store.export(b)).fold.events if e["type"] == "log_repaired"]


def test_a_torn_export_imports_repairs_and_round_trips(
    aws: Any, target: Any, tmp_path: Path, capsys: Any
) -> None:
    store, artifacts = target
    ctx, b, data = engine_export(aws)
    body, tail = torn(data)
    path = write(tmp_path, body)
    assert main(["log", "import", path, "--repair", "--now", NOW]) == 0
    out = capsys.readouterr().out
    assert f"head unverified (torn tail of {len(tail)} bytes dropped)" in out
    assert f"repaired {b}: log_repaired at seq" in out
    rec = store.head(b)
    assert rec is not None and rec.state == "ready" and rec.head_verified is True
    exported = store.export(b)
    imp = import_log(exported)
    assert imp.head_verified
    last = imp.fold.events[-1]
    assert last["type"] == "log_repaired" and last["critical"] is False
    assert last["actor"] == {"kind": "recovery"}
    d = last["data"]
    assert d["truncated_bytes"] == len(tail)
    assert d["at_offset"] == len(body) - len(tail)  # where the unterminated chunk began
    assert d["dropped_ref"]["sha256"] == hashlib.sha256(tail).hexdigest()
    assert artifacts.get_ref(d["dropped_ref"]) == tail  # the dropped bytes are kept
    # the branch is the kept prefix plus the recovery's line
    assert exported.startswith(body[: -len(tail)])
    assert last["seq"] == import_log(data).fold.head_seq  # the torn line's seq, now log_repaired
    # re-export, re-import, reduce and re-render (the requests' bytes are the source's artifacts)
    assert reduce(imp.fold, imp.head.hash)["head"] == {"seq": last["seq"], "hash": imp.head.hash}
    render.verify_requests(imp.fold.events, ctx.artifacts.get_ref)
    out_path = tmp_path / "again.jsonl"
    assert main(["log", "export", "--branch", b, "-o", str(out_path)]) == 0
    assert out_path.read_bytes() == exported
    assert main(["log", "verify", str(out_path), "--now", NOW]) == 0
    assert "head unverified" not in capsys.readouterr().out
    # importing the torn file again is a no-op and leaves the repaired branch ready
    assert main(["log", "import", path, "--repair", "--now", NOW]) == 0
    assert "no-op" in capsys.readouterr().out
    assert store.head(b).state == "ready" and len(repaired_events(store, b)) == 1


def test_log_repair_recovers_an_inspection_only_branch_once(
    aws: Any, target: Any, tmp_path: Path, capsys: Any
) -> None:
    store, _ = target
    _, b, data = engine_export(aws)
    body, tail = torn(data)
    assert main(["log", "import", write(tmp_path, body), "--now", NOW]) == 0
    rec = store.head(b)
    assert rec.state == "inspection_only" and rec.head_verified is False and rec.dropped_ref
    assert main(["log", "repair", "--branch", b, "--now", NOW]) == 0
    assert "log_repaired at seq" in capsys.readouterr().out
    (ev,) = repaired_events(store, b)
    assert ev["data"]["at_offset"] == len(body) - len(tail) and ev["data"]["truncated_bytes"] == len(tail)
    # A recovery that died after its append, before the state change: the branch is still
    # inspection_only with log_repaired at its head. Run again, it only moves the state.
    store.set_state(b, "inspection_only", head_verified=False)
    assert main(["log", "repair", "--branch", b, "--now", NOW]) == 0
    assert "already log_repaired" in capsys.readouterr().out
    assert len(repaired_events(store, b)) == 1 and store.head(b).state == "ready"
    assert main(["log", "repair", "--branch", b, "--now", NOW]) == 0  # idempotent
    assert len(repaired_events(store, b)) == 1
    # a branch with nothing torn has nothing to repair
    ctx2, b2, data2 = engine_export(aws)
    assert main(["log", "import", write(tmp_path, data2, "full.jsonl"), "--now", NOW]) == 0
    capsys.readouterr()
    assert main(["log", "repair", "--branch", b2, "--now", NOW]) == 1
    assert capsys.readouterr().err.startswith("error invalid_transition")


@pytest.mark.parametrize("how", ["garbage", "edited"])
def test_a_corrupt_middle_line_is_log_corrupt_at_its_seq(
    aws: Any, target: Any, tmp_path: Path, capsys: Any, how: str
) -> None:
    store, _ = target
    _, b, data = engine_export(aws)
    lines = data.split(b"\n")
    k = 3  # lines[k] is the event at seq k (lines[0] is the header)
    if how == "garbage":
        lines[k] = lines[k][: len(lines[k]) // 2]  # a line cut short: not JSON
        at, cause = k, "invalid_line"
    else:
        lines[k] = lines[k].replace(b'"time":', b'"time":1', 1)  # a valid line, other bytes
        at, cause = k + 1, "prev_hash_mismatch"  # the chain names the line after the edit
    assert main(["log", "import", write(tmp_path, b"\n".join(lines)), "--now", NOW]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error log_corrupt at seq {at}: cause {cause}"), err
    assert store.head(b) is None  # nothing stored
    # a reader still gets its own code (the writable open is the import)
    assert main(["log", "verify", write(tmp_path, b"\n".join(lines), "v.jsonl")]) == 1
    assert capsys.readouterr().err.startswith(f"error {cause} at seq {at}")
