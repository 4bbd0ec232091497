"""Per-container wiring: one `Host` built lazily from the environment (template.yaml's
EVENTS_TABLE, STATE_TABLE, ARTIFACTS_BUCKET, RUN_STEP_QUEUE_URL; AGENTS_FILE optional) and the
entry points the functions' `app.handler`s call. Building lazily keeps cold imports small and
lets tests and the local gateway point the environment at moto first."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from .http import dispatch, error_response
from .keys import ApiKeys
from .service import Host

_lock = threading.Lock()
_host: Host | None = None
_keys: ApiKeys | None = None


def _clients() -> tuple[Any, Any, Any]:
    import boto3

    session = boto3.session.Session()
    return session.client("dynamodb"), session.client("s3"), session.client("sqs")


def build_host() -> Host:
    from ..agents import load_agents
    from ..store import ArtifactStore, EventStore, ResourceNames, ThreadIndex
    from ..writer import Writer

    res = ResourceNames.from_env()
    ddb, s3, sqs = _clients()
    artifacts = ArtifactStore(s3, res.bucket)
    store = EventStore(ddb, res.events_table, res.state_table, artifacts)
    return Host(
        Writer(store),
        artifacts,
        ThreadIndex(ddb, res.state_table),
        ddb,
        res.state_table,
        sqs,
        res.run_step_queue_url,
        load_agents(),
    )


def host() -> Host:
    global _host
    with _lock:
        if _host is None:
            _host = build_host()
        return _host


def keys() -> ApiKeys:
    global _keys
    with _lock:
        if _keys is None:
            import os

            import boto3

            _keys = ApiKeys(boto3.session.Session().client("dynamodb"), os.environ["STATE_TABLE"])
        return _keys


def reset() -> None:
    """Forget the cached clients (tests that re-point the environment)."""
    global _host, _keys
    with _lock:
        _host = None
        _keys = None


def api(event: Mapping[str, Any], operation: str) -> dict[str, Any]:
    """A route's whole handler: parse, call Host, map the result or failure."""
    from .routes import ROUTES

    codes, call = ROUTES[operation]
    return dispatch(event, codes, lambda req: call(host(), req))


def authorize(event: Mapping[str, Any]) -> dict[str, Any]:
    from .auth import authorize as _authorize

    return _authorize(event, keys())


def openapi() -> dict[str, Any]:
    """GET /openapi.json: the contract this host serves (packaged with the layer)."""
    from importlib import resources

    body = resources.files(__package__).joinpath("openapi.json").read_text()
    return {
        "statusCode": 200,
        "headers": {"Content-Type": "application/json"},
        "body": body,
        "isBase64Encoded": False,
    }


__all__ = ["api", "authorize", "build_host", "error_response", "host", "keys", "openapi", "reset"]
