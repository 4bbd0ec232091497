"""Shared fixtures: AWS on moto, with the tables/bucket/queues created from template.yaml by
threads_aws_dev.local.infra (so tests can't drift from the template), plus a hash-chained line
builder for store-level tests.

Every test runs under `threads_aws_dev.local.aws_limits`: any request AWS would refuse (a limit
moto doesn't check) raises in this process, and `threads-aws dev` subprocesses inherit
THREADS_AWS_LIMITS=strict and log theirs to THREADS_AWS_LIMITS_LOG; either fails the test
(`_aws_limits`) unless it is inside `aws_limits.expect_refusals()`."""

from __future__ import annotations

import itertools
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from helpers.local_gateway import fixture_template  # noqa: F401 - a fixture, registered by name
from threads_aws.core.canonical import canonical_bytes, new_uuid7
from threads_aws.core.lines import StoredLine, header_line
from threads_aws_dev.local import aws_limits
from threads_aws_dev.local.moto_patch import serialize_dynamodb
from threads_aws_dev.local.moto_patch import speed_up_moto_transactions as _speed_up_moto_transactions

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "template.yaml"
REGION = "us-east-1"

# Before any botocore session exists (sessions made earlier would not run the check).
os.environ[aws_limits.ENV_MODE] = "strict"
_OWN_LIMITS_LOG = aws_limits.ENV_LOG not in os.environ
os.environ.setdefault(
    aws_limits.ENV_LOG, str(Path(tempfile.gettempdir()) / f"threads-aws-limits-{os.getpid()}.jsonl")
)
aws_limits.install()


def pytest_sessionfinish(session: Any, exitstatus: Any) -> None:
    if _OWN_LIMITS_LOG:
        Path(os.environ[aws_limits.ENV_LOG]).unlink(missing_ok=True)


class FakeClock:
    """An injectable ms clock for stores: tests move time explicitly."""

    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> int:
        self.now += ms
        return self.now


_fixture_counter = itertools.count(1)


@dataclass
class AwsEnv:
    prefix: str
    resources: Any
    session: Any
    ddb: Any
    s3: Any
    sqs: Any
    clock: FakeClock = field(default_factory=FakeClock)

    def services(self, **event_store: Any) -> Any:
        """A fresh `Services` on this moto account and clock (`event_store`: EventStore tuning)."""
        from threads_aws.services import Services

        clients = {"dynamodb": self.ddb, "s3": self.s3, "sqs": self.sqs}
        return Services(self.resources, clients=clients, clock=self.clock, event_store=event_store)

    def stores(self, **event_store: Any) -> Any:
        return self.services(**event_store).stores

    def artifacts(self) -> Any:
        return self.stores().artifacts

    def events(self, **kw: Any) -> Any:
        return self.stores(**kw).events

    def index(self) -> Any:
        return self.stores().threads


@pytest.fixture(scope="session")
def contract() -> Any:
    """The contract beside the repo (`helpers.shared`: ../shared/spec and ../shared/conformance);
    without it the test skips, with the one reason `helpers.shared.MISSING`."""
    from helpers import shared

    if not shared.PRESENT:
        pytest.skip(shared.MISSING)
    return shared


def _limit_log_size() -> int:
    try:
        return os.path.getsize(os.environ[aws_limits.ENV_LOG])
    except OSError:
        return 0


def _subprocess_refusals(start: int) -> list[dict[str, str]]:
    try:
        with open(os.environ[aws_limits.ENV_LOG], encoding="utf-8") as f:
            f.seek(start)
            lines = f.read().splitlines()
    except OSError:
        return []
    mine = str(os.getpid())
    return [r for r in map(json.loads, filter(None, lines)) if r.get("pid") != mine]


@pytest.fixture(autouse=True)
def _aws_limits():
    """Fails the test if it (or a dev subprocess it ran) sent a request AWS would refuse."""
    seen, logged = len(aws_limits.violations), _limit_log_size()
    yield
    refused = aws_limits.violations[seen:] + _subprocess_refusals(logged)
    if refused:
        lines = "\n".join(f"  {r['service']}.{r['operation']}: {r['message']} ({r['code']})" for r in refused)
        pytest.fail(f"requests AWS would refuse (moto accepted them):\n{lines}", pytrace=False)


@pytest.fixture(autouse=True)
def _fresh_services():
    """No test sees another's per-container Services (built from an environment it set)."""
    yield
    from threads_aws import services

    services.reset()


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch):
    """moto-backed AWS with template.yaml's data plane created; yields an AwsEnv."""
    boto3 = pytest.importorskip("boto3")
    moto = pytest.importorskip("moto")
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    _speed_up_moto_transactions(monkeypatch)
    # moto checks a condition and writes without a lock; DynamoDB makes each conditional write
    # and transaction atomic, which the parallel tests (racing writers, 20 identical POSTs) rely on.
    serialize_dynamodb(monkeypatch)
    with moto.mock_aws():
        from threads_aws_dev.local.infra import create_resources

        session = boto3.Session(region_name=REGION)
        # A unique prefix per test: if some other code left a global moto mock running, this
        # `with` nests inside it and moto doesn't reset state between tests.
        prefix = f"threads-t{next(_fixture_counter)}"
        resources = create_resources(TEMPLATE, session, prefix=prefix)
        yield AwsEnv(
            prefix=prefix,
            resources=resources,
            session=session,
            ddb=session.client("dynamodb"),
            s3=session.client("s3"),
            sqs=session.client("sqs"),
        )


class Chain:
    """Canonical event lines of one segment with a real hash chain (store-level tests: the
    envelope is right, `data` needn't satisfy validate_next)."""

    def __init__(
        self,
        thread_id: str | None = None,
        branch_id: str | None = None,
        *,
        created_at: int = 1_700_000_000_000,
        next_seq: int = 1,
    ) -> None:
        self.thread_id = thread_id or new_uuid7()
        self.branch_id = branch_id or new_uuid7()
        self.header = StoredLine.of_header(header_line(self.thread_id, self.branch_id, created_at))
        self.prev = self.header.hash
        self.next_seq = next_seq
        self.lines: list[StoredLine] = []

    def event(
        self,
        type: str = "heartbeat",
        data: dict[str, Any] | None = None,
        *,
        epoch: int = 1,
        critical: bool = True,
    ) -> StoredLine:
        ev = {
            "seq": self.next_seq,
            "event_id": new_uuid7(),
            "thread_id": self.thread_id,
            "branch_id": self.branch_id,
            "epoch": epoch,
            "type": type,
            "type_version": 1,
            "time": 1_700_000_000_000 + self.next_seq,
            "actor": {"kind": "host"},
            "prev_hash": self.prev,
            "critical": critical,
            "data": {"running_call_ids": []} if data is None else data,
        }
        line = StoredLine.of_event(canonical_bytes(ev), ev)
        self.prev = line.hash
        self.next_seq += 1
        self.lines.append(line)
        return line

    def events(self, n: int, **kw: Any) -> list[StoredLine]:
        return [self.event(**kw) for _ in range(n)]

    def at(self, seq: int) -> StoredLine:
        """This segment's line at `seq` (its header if seq is before its first event)."""
        first = self.next_seq - len(self.lines)
        return self.header if seq < first else self.lines[seq - first]

    def fork(self, at_seq: int, *, parent_line_hash: str | None = None, epoch: int = 1) -> Chain:
        """A child segment of this one at `at_seq`: its header, then its `fork` event."""
        child = Chain(self.thread_id, next_seq=at_seq + 1)
        child.event(
            "fork",
            {
                "at_hash": parent_line_hash or self.at(at_seq).hash,
                "parent_branch_id": self.branch_id,
                "reason": "repair",
            },
            epoch=epoch,
        )
        return child


@pytest.fixture
def chain():
    """The Chain class (a fixture so test modules needn't import conftest)."""
    return Chain
