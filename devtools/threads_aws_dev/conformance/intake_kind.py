"""The `intake` kind: each case webhook through the real webhook route (`channels.webhook.handle`,
the library every provider's function-URL handler calls) with the conformance fake verifying
adapter, into the real inbox and channel routes on the case's fresh store.

The fake's rules (conformance README): the tenant is ``<channel>:<installation_id>``, each item
a message from ``{issuer: <channel>:<installation_id>, tenant, subject: sender}`` at address
``conversation``, keyed by ``item_id`` or ``<delivery_id>#<index>``; ``forged: true`` fails
verify. Compared: the HTTP status of each webhook, the inbox rows in insertion order, and the
number of distinct threads they map to. The injected clock is the case's; no wall time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .env import CaseEnv
from .intake_adapter import ConformanceAdapter, installations_for
from .runner import _expect


def _event(webhook: dict[str, Any]) -> dict[str, Any]:
    path = f"/channels/{webhook['channel']}/events"
    return {
        "version": "2.0",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {"content-type": "application/json"},
        "requestContext": {"http": {"method": "POST", "path": path}},
        "body": json.dumps(webhook, sort_keys=True),
        "isBase64Encoded": False,
    }


def run_intake(env: CaseEnv, case_dir: Path, case: dict[str, Any], expected: dict[str, Any]) -> None:
    import boto3
    from threads_aws.channels.secrets import SecretResolver
    from threads_aws.channels.webhook import handle
    from threads_aws.services import Services
    from threads_aws.store.inbox import Inbox

    now = int(case["clock"]["now"])
    webhooks = case["input"]["webhooks"]
    session = boto3.session.Session()
    clients = {"dynamodb": env.ddb, "s3": env.s3, "sqs": session.client("sqs")}
    services = Services(env.resources, clients=clients, clock=lambda: now)
    installations = installations_for(webhooks)
    adapter = ConformanceAdapter()
    responses = []
    for w in webhooks:
        out = handle(
            _event(w),
            provider=None,
            services=services,
            installations=installations,
            resolver=SecretResolver(env={}),
            adapter=adapter,
        )
        responses.append(out["statusCode"])
    rows = Inbox(env.ddb, env.resources.state_table).all_rows()
    if "responses" in expected:
        _expect("responses", expected["responses"], responses)
    if "inbox" in expected:
        _expect("inbox", expected["inbox"], [{"channel": r.channel, "item_key": r.item_key} for r in rows])
    if "threads" in expected:
        _expect("threads", expected["threads"], len({r.thread_id for r in rows}))
