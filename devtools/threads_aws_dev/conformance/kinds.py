"""Per-kind case execution (conformance README, "What a runner does per kind")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from threads_aws.core.canonical import sha256_hex
from threads_aws.core.errors import LogError
from threads_aws.core.importer import Imported, import_log
from threads_aws.core.reduced_state import reduce
from threads_aws.sandbox.fork import Crash, fork, recover_fork

from .env import CaseEnv
from .fakes import ScriptedSandbox
from .runner import Mismatch, _expect


def _error_outcome(expected: dict[str, Any], exc: LogError) -> None:
    if expected["outcome"] != "error":
        raise Mismatch(f"expected ok got error {exc.code} at seq {exc.seq}: {exc.message}")
    want = expected["error"]
    got = {"code": exc.code, **({"seq": exc.seq} if "seq" in want else {})}
    _expect("error", want, got)


def _check_state(expected: dict[str, Any], served: Imported, now: int) -> None:
    if "state" in expected:
        _expect("state", expected["state"], reduce(served.fold, served.segments[-1].last.hash))
    if "projections" in expected and expected["projections"]:
        from threads_aws.core.projections import all_projections

        got = all_projections(served.fold.known_events(), now)
        for key, want in expected["projections"].items():
            _expect(f"projections.{key}", want, got.get(key))


def _import(
    env: CaseEnv,
    case_dir: Path,
    case: dict[str, Any],
    expected: dict[str, Any],
    *,
    verify_requests: bool = False,
) -> tuple[Imported, Imported] | None:
    """Import the case log into the store; returns (as imported, as the store serves it), or
    None when the expected error was produced. Only the render kind verifies request bytes at
    import (its step 3); reduce and fork stop at line, chain and head checks."""
    path = case_dir / "log.jsonl"
    data = path.read_bytes()
    now = case["clock"]["now"]
    try:
        imported = import_log(data, now=now, verify=env.verifier(case_dir) if verify_requests else None)
    except LogError as exc:
        _error_outcome(expected, exc)
        return None
    env.store_import(imported, now)
    served = import_log(env.export(imported.branch_id), now=now)
    _expect(
        "served bytes", _committed(data, imported), env.export(imported.branch_id)[: imported.committed_bytes]
    )
    _expect("input file unchanged", sha256_hex(data), sha256_hex(path.read_bytes()))
    return imported, served


def _committed(data: bytes, imported: Imported) -> bytes:
    return data[: imported.committed_bytes]


def run_reduce(env: CaseEnv, case_dir: Path, case: dict[str, Any], expected: dict[str, Any]) -> None:
    got = _import(env, case_dir, case, expected)
    if got is None:
        return
    if expected["outcome"] == "error":
        raise Mismatch(f"expected error {expected['error']} got ok")
    imported, served = got
    _check_state(expected, served, case["clock"]["now"])
    if "committed_bytes" in expected:
        _expect("committed_bytes", expected["committed_bytes"], imported.committed_bytes)
    _expect("head_verified", expected.get("head_verified", True), imported.head_verified)


def run_render(env: CaseEnv, case_dir: Path, case: dict[str, Any], expected: dict[str, Any]) -> None:
    from threads_aws.core import render

    got = _import(env, case_dir, case, expected, verify_requests=True)
    if got is None:
        return
    _, served = got
    events = served.fold.known_events()
    get = env.artifacts.get_ref
    try:  # rendering the next request verifies the artifacts its parts reference: an error too
        nxt = render.render_request(events, get)
    except LogError as exc:
        _error_outcome(expected, exc)
        return
    if expected["outcome"] == "error":
        raise Mismatch(f"expected error {expected['error']} got ok")
    _check_state(expected, served, case["clock"]["now"])
    if "render" in expected:
        _expect("render.next_request_sha256", expected["render"]["next_request_sha256"], sha256_hex(nxt))
        _expect(
            "render.declared_prefix", expected["render"]["declared_prefix"], render.declared_prefix(events)
        )
    req = case_dir / "request.bytes"
    if req.exists():
        _expect("request.bytes", sha256_hex(req.read_bytes()), sha256_hex(nxt))
    violation = render.history_prefix_violation(events, get)
    if violation is not None:
        raise Mismatch(f"history prefix: {violation}")


def _match(matcher: dict[str, Any], ev: dict[str, Any]) -> bool:
    for key in ("type", "seq", "epoch", "branch_id", "critical"):
        if key in matcher and matcher[key] != ev[key]:
            return False
    if "actor_kind" in matcher and matcher["actor_kind"] != ev["actor"]["kind"]:
        return False
    return "data" not in matcher or _subset(matcher["data"], ev["data"])


def _subset(want: Any, got: Any) -> bool:
    if isinstance(want, dict):
        return isinstance(got, dict) and all(k in got and _subset(v, got[k]) for k, v in want.items())
    return bool(want == got)


def _expect_appended(expected: dict[str, Any], appended: list[dict[str, Any]]) -> None:
    if "appended" not in expected:
        return
    want = expected["appended"]
    if len(want) != len(appended) or not all(_match(m, e) for m, e in zip(want, appended, strict=True)):
        brief = [
            {"type": e["type"], "seq": e["seq"], "epoch": e["epoch"], "data": e["data"]} for e in appended
        ]
        raise Mismatch(f"appended: expected {json.dumps(want)} got {json.dumps(brief)}")


def fork_permits_real(case_dir: Path) -> bool:
    """A fork case runs on the real S3 workspace provider too unless its sandbox script scripts
    a provider failure only a fake can produce (a lost restore answer, a crash after restore)."""
    path = case_dir / "sandbox.json"
    script = json.loads(path.read_text()) if path.exists() else {}
    return all(s.get("restore_response", "ok") == "ok" for s in script.get("snapshots", {}).values())


def _real_sandbox(env: CaseEnv, script: dict[str, Any]) -> Any:
    """The S3 workspace provider over the case's store, its snapshots stored as it stores them:
    each manifest as the artifact of its JCS bytes (so a manifest that doesn't hash to the log's
    `manifest_hash` is simply not found). Cases ship no file bytes and a restore needs none: it
    verifies the manifest, which pins every file by hash and size (`sandbox.provider`)."""
    from threads_aws.core.canonical import canonical_bytes
    from threads_aws.sandbox.provider import S3WorkspaceProvider

    for spec in script.get("snapshots", {}).values():
        env.artifacts.put(canonical_bytes(spec["manifest"]), "application/json")
    return S3WorkspaceProvider(env.artifacts)


def run_fork(
    env: CaseEnv, case_dir: Path, case: dict[str, Any], expected: dict[str, Any], *, provider: str = "fake"
) -> None:
    got = _import(env, case_dir, case, expected)
    if got is None:
        return
    imported, served = got
    now = case["clock"]["now"]
    _check_state(expected, served, now)
    inp = case.get("input", {})
    script = (
        json.loads((case_dir / "sandbox.json").read_text()) if (case_dir / "sandbox.json").exists() else {}
    )
    sandbox = ScriptedSandbox(script) if provider == "fake" else _real_sandbox(env, script)
    crashes = any(s.get("restore_response") == "crash" for s in script.get("snapshots", {}).values())
    parent_id = imported.branch_id
    before = env.export(parent_id)
    child_id = inp["new_branch_id"]

    def failpoint(where: str) -> None:
        if crashes:
            raise Crash(where)

    result = None
    error: LogError | None = None
    try:
        result = fork(
            env.store,
            env.ledger,
            sandbox,
            tenant=env.tenant,
            branch_id=parent_id,
            event_id=inp["fork_at_event_id"],
            new_branch_id=child_id,
            knowledge_policy=inp.get("knowledge_policy", "pinned"),
            now=now,
            failpoint=failpoint,
        )
    except LogError as exc:
        error = exc
    except Crash:
        recover_fork(env.store, env.ledger, sandbox, child_id)  # the restarted host's recovery
    if error is not None:
        _error_outcome(expected, error)
    elif expected["outcome"] == "error":
        raise Mismatch(f"expected error {expected['error']} got ok")
    record = env.store.head(child_id)
    listed = record is not None and record.state == "ready"
    appended: list[dict[str, Any]] = []
    if listed:
        child = import_log(env.export(child_id), now=now)  # the child's export imports cleanly
        appended = [line.event for line in child.segments[-1].lines if line.event is not None]
    if provider != "fake" and result is not None:  # the provider names its sandbox, not the script
        expected = json.loads(json.dumps(expected))
        for want in expected.get("appended", []):
            if want.get("type") == "fork" and "sandbox_id" in want.get("data", {}):
                want["data"]["sandbox_id"] = result.fork_event["data"]["sandbox_id"]
    _expect_appended(expected, appended)
    fk = expected.get("fork", {})
    if "child_created" in fk:
        _expect("fork.child_created", fk["child_created"], listed)
    if "at_seq" in fk:
        _expect("fork.at_seq", fk["at_seq"], result.at_seq if result else None)
    if fk.get("parent_unchanged"):
        _expect("fork.parent_unchanged", sha256_hex(before), sha256_hex(env.export(parent_id)))
    if "knowledge_revision" in fk:
        _expect(
            "fork.knowledge_revision", fk["knowledge_revision"], result.knowledge_revision if result else None
        )
    if "child_state" in fk:
        _expect("fork.child_state", fk["child_state"], record.state if record else None)
    if "resources" in expected:
        rows = [{"kind": r.kind, "state": r.state} for r in env.ledger.rows(child_id)]
        want = expected["resources"]
        if provider == "fake":
            _expect("resources", want, {"creates": sandbox.creates, "rows": rows})
        else:
            _expect("resources.rows", want["rows"], rows)
