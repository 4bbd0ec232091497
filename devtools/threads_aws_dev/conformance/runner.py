"""Runs conformance case folders (layout: shared/conformance/README.md) against the real
stores on moto: every log is imported into a fresh DynamoDB/S3 store, read back byte-exact,
and verified and reduced from what the store serves. Runners use the case clock, never wall
time. Output: one line per case, then `N passed, N failed, N skipped`."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from threads_aws.core.errors import LogError

SERVED = ("reduce", "fork", "render", "host", "intake")
LATER = {
    "recover": "appends to a threads-py/threads-ts branch: writer_mismatch for threads-aws",
    "stub": "appends to a threads-py/threads-ts branch: writer_mismatch for threads-aws",
    "policy": "the permission engine arrives with the run-step worker",
    "team": "Teams (rules 31-45) are out of scope for this host",
    "security": "reserved kind with no runner definition yet",
    "parity": "reserved kind with no runner definition yet",
}
CASE_KEYS = {
    "name",
    "family",
    "kind",
    "description",
    "clock",
    "model_script",
    "sandbox_script",
    "stub_script",
    "input",
    "expect",
}
EXPECTED_KEYS = {
    "outcome",
    "error",
    "state",
    "committed_bytes",
    "appended",
    "sandbox",
    "fork",
    "resources",
    "render",
    "head_verified",
    "stubs",
    "responses",
    "inbox",
    "decisions",
    "projections",
    "threads",
    "api",
    "user_inputs",
}


@dataclass(frozen=True, slots=True)
class CaseResult:
    name: str
    verdict: str  # PASS | FAIL | SKIP
    detail: str = ""

    def line(self) -> str:
        return f"{self.verdict} {self.name}" + (f": {self.detail}" if self.detail else "")


class Mismatch(Exception):
    pass


def _expect(what: str, expected: Any, got: Any) -> None:
    if expected != got:
        raise Mismatch(
            f"{what}: expected {json.dumps(expected, sort_keys=True)} got {json.dumps(got, sort_keys=True)}"
        )


def run_case(case_dir: Path, env_factory: Any = None, *, sandbox: str = "fake") -> CaseResult:
    """Run one case. `sandbox="s3"` runs the fork kind on the real S3 workspace provider (where
    the case's sandbox script permits it; other kinds run as usual)."""
    name = case_dir.name
    try:
        case = json.loads((case_dir / "case.json").read_text())
        expected = (
            json.loads((case_dir / "expected.json").read_text())
            if (case_dir / "expected.json").exists()
            else None
        )
    except (OSError, ValueError) as exc:
        return CaseResult(name, "FAIL", f"unreadable case: {exc}")
    kind = case.get("kind")
    unknown = (
        set(case) - CASE_KEYS or (set(expected or {}) - EXPECTED_KEYS) or _unknown_sandbox_keys(case_dir)
    )
    if unknown:
        return CaseResult(name, "FAIL", f"unknown fixture keys {sorted(unknown)}")
    if kind in LATER:
        return CaseResult(name, "SKIP", LATER[kind])
    if kind not in SERVED:
        return CaseResult(name, "FAIL", f"unknown kind {kind!r}")
    if expected is None:
        return CaseResult(name, "FAIL", "missing expected.json")
    from .env import case_env
    from .host_kind import run_host
    from .intake_kind import run_intake
    from .kinds import fork_permits_real, run_fork, run_reduce, run_render

    if kind == "fork" and sandbox != "fake" and not fork_permits_real(case_dir):
        return CaseResult(
            name, "SKIP", "its sandbox script scripts a failure only the fake provider produces"
        )

    try:
        with case_env(env_factory) as env:
            runners: dict[str, Any] = {"reduce": run_reduce, "render": run_render, "host": run_host}
            runners["fork"] = lambda *a: run_fork(*a, provider=sandbox)
            runners["intake"] = run_intake
            runners[kind](env, case_dir, case, expected)
    except Mismatch as exc:
        return CaseResult(name, "FAIL", str(exc))
    except LogError as exc:  # an unexpected typed failure
        return CaseResult(
            name, "FAIL", f"expected {expected.get('outcome')} got error {exc.code} at seq {exc.seq}"
        )
    return CaseResult(name, "PASS")


SANDBOX_KEYS = {"tools", "snapshots"}
SNAPSHOT_KEYS = {"restore_sandbox_id", "restore_response", "create_lookup", "manifest"}
SANDBOX_TOOL_KEYS = {"output", "is_error", "executed_keys", "lookup", "process"}


def _unknown_sandbox_keys(case_dir: Path) -> set[str]:
    """sandbox.json (`$defs/SandboxScript`): an unknown key fails the case, never silently."""
    path = case_dir / "sandbox.json"
    if not path.exists():
        return set()
    try:
        script = json.loads(path.read_text())
    except ValueError:
        return {"sandbox.json: not JSON"}
    bad = {f"sandbox.{k}" for k in set(script) - SANDBOX_KEYS}
    for sid, snap in (script.get("snapshots") or {}).items():
        bad |= {f"sandbox.snapshots.{sid}.{k}" for k in set(snap) - SNAPSHOT_KEYS}
    for tool, spec in (script.get("tools") or {}).items():
        bad |= {f"sandbox.tools.{tool}.{k}" for k in set(spec) - SANDBOX_TOOL_KEYS}
    return bad


def run_dir(root: Path, *, sandbox: str = "fake") -> list[CaseResult]:
    cases = sorted(p for p in root.iterdir() if (p / "case.json").exists())
    return [run_case(p, sandbox=sandbox) for p in cases]


def main(argv: list[str]) -> int:
    sandbox = "fake"
    if argv[:1] == ["--sandbox"] and len(argv) >= 2:
        sandbox, argv = argv[1], argv[2:]
    if len(argv) != 1 or sandbox not in ("fake", "s3"):
        print("usage: python -m threads_aws_dev.conformance [--sandbox fake|s3] DIR", file=sys.stderr)
        return 2
    root = Path(argv[0])
    if not root.is_dir():
        print(f"not a directory: {root}", file=sys.stderr)
        return 2
    results = []
    for path in sorted(p for p in root.iterdir() if (p / "case.json").exists()):
        r = run_case(path, sandbox=sandbox)
        results.append(r)
        print(r.line(), flush=True)
    counts = {v: sum(r.verdict == v for r in results) for v in ("PASS", "FAIL", "SKIP")}
    print(f"{counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped")
    return 1 if counts["FAIL"] else 0
