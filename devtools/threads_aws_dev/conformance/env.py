"""A fresh moto-backed store per case, created from template.yaml (so it cannot drift)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from threads_aws.core.importer import Imported
from threads_aws.store.artifacts import ArtifactStore
from threads_aws.store.events import EventStore
from threads_aws.store.ingest import import_into_store
from threads_aws.store.resources import ResourceLedger

TEMPLATE = Path(__file__).resolve().parents[3] / "template.yaml"
_counter = itertools.count(1)
_mock: Any = None


@dataclass
class CaseEnv:
    ddb: Any
    s3: Any
    store: EventStore
    artifacts: ArtifactStore
    ledger: ResourceLedger
    resources: Any = None
    tenant: str = "conformance"

    def store_import(self, imported: Imported, now: int) -> None:
        import_into_store(self.store, self.artifacts, imported, tenant=self.tenant, now=now)

    def export(self, branch_id: str) -> bytes:
        return self.store.export(branch_id)

    def verifier(self, case_dir: Path) -> Any:
        """Import step 3 for cases that ship artifacts: load them, then verify every request."""
        art_dir = case_dir / "artifacts"
        if not art_dir.is_dir():
            return None
        for f in sorted(art_dir.iterdir()):
            self.artifacts.seed(f.name, f.read_bytes())

        def verify(imported: Imported) -> None:
            from threads_aws.core.render import verify_requests

            verify_requests(imported.fold.known_events(), self.artifacts.get_ref)

        return verify


def _start_moto() -> None:
    global _mock
    if _mock is not None:
        return
    for k, v in (
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
    ):
        os.environ.setdefault(k, v)
    from moto import mock_aws

    _mock = mock_aws()
    _mock.start()


@contextmanager
def case_env(factory: Any = None) -> Iterator[CaseEnv]:
    if factory is not None:
        yield factory()
        return
    _start_moto()
    import boto3

    from ..local.infra import create_resources

    n = next(_counter)
    session = boto3.session.Session(region_name=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
    res = create_resources(TEMPLATE, session, prefix=f"conf{n}")
    ddb, s3 = session.client("dynamodb"), session.client("s3")
    artifacts = ArtifactStore(s3, res.bucket)
    store = EventStore(ddb, res.events_table, res.state_table, artifacts)
    yield CaseEnv(ddb, s3, store, artifacts, ResourceLedger(ddb, res.state_table), res)
