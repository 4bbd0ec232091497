"""What `test_all_event_types_dev` shares with its recipes: the contract's event types, the
agents file a user of the provider fakes would write, a run followed to its outcome, and the
offline round trip of one stored branch (export, re-import, reduce, re-render, projections)."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

from threads_aws import agents
from threads_aws.core import render
from threads_aws.core.importer import import_log
from threads_aws.core.projections import all_projections
from threads_aws.core.reduced_state import reduce
from threads_aws.store.artifacts import ArtifactStore
from threads_aws.store.events import EventStore

from helpers.dev_process import ALICE, DevProcess, wait_until
from helpers.shared import openapi

READER = "dev:reader:acme:ops"  # a principal of the Slack installation's tenant


def contract_event_types() -> set[str]:
    """Every event type of the contract: the `type` consts of events_Event's oneOf."""
    schemas = openapi()["components"]["schemas"]
    alts = schemas["events_Event"]["allOf"][1]["oneOf"]
    return {schemas[a["$ref"].rsplit("/", 1)[1]]["properties"]["type"]["const"] for a in alts}


def agents_file(tmp: Path) -> Path:
    """The bundled agents plus two a user of the fakes would add: the OpenAI example answering
    in the background (`recover: true`, no fallback) and the Anthropic example with the
    demo-limits context policy (a 2,000-token window that compacts), no fallback either."""
    bundled = json.loads(agents.DEFAULT_FILE.read_text())
    oa = bundled["openai"]
    recover = {
        **oa,
        "adapter": {**oa["adapter"], "settings": {**oa["adapter"]["settings"], "recover": True}},
        "fallback_models": [],
    }
    an, limits = bundled["anthropic"], bundled["demo-limits"]["policy"]
    model = {**limits["models"][0], **an["model"]}
    small = {**an, "fallback_models": [], "policy": {**limits, "models": [model]}}
    path = tmp / "agents.json"
    path.write_text(json.dumps({**bundled, "openai-recover": recover, "anthropic-limits": small}))
    return path


def start(dev: DevProcess, text: str, agent: str = "demo", **extra: Any) -> dict[str, str]:
    status, body, _ = dev.call(
        "POST",
        "/v1/runs",
        {"agent": agent, "input": text, **extra},
        headers={"Idempotency-Key": str(uuid.uuid4())},
    )
    assert status == 202, body
    return body  # type: ignore[no-any-return]


def settle(dev: DevProcess, run: dict[str, str], want: str | None = "completed") -> dict[str, Any]:
    """Follow the run to its RunOutcome (the SSE route, resuming like an EventSource)."""
    deadline = time.monotonic() + 120
    while True:
        try:
            _, _, outcome = dev.stream(run["thread_id"], run["run_id"])
            break
        except AssertionError:  # a window with no result within the stream deadline
            assert time.monotonic() < deadline, f"run {run} never settled"
    assert want is None or outcome["status"] == want, outcome
    return outcome


def call_ok(dev: DevProcess, method: str, path: str, body: Any = None, token: str = ALICE) -> Any:
    status, out, _ = dev.call(method, path, body, token=token)
    assert 200 <= status < 300, (method, path, status, out)
    return out


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def wait_type(
    dev: DevProcess, thread_id: str, type_: str, token: str = ALICE, timeout: float = 270
) -> list[Any]:
    return wait_until(  # type: ignore[no-any-return]
        lambda: (evs := dev.timeline(thread_id, token)) and type_ in kinds(evs) and evs,
        timeout,
        f"{type_} in {thread_id}",
        every=0.2,
    )


def stores(dev: DevProcess) -> tuple[EventStore, ArtifactStore]:
    artifacts = ArtifactStore(dev.client("s3"), dev.env["ARTIFACTS_BUCKET"])
    events = EventStore(dev.client("dynamodb"), dev.env["EVENTS_TABLE"], dev.env["STATE_TABLE"], artifacts)
    return events, artifacts


def branch_timeline(dev: DevProcess, thread_id: str, branch_id: str, token: str) -> list[dict[str, Any]]:
    """The branch's events as the timeline route serves them (one page: these logs are small)."""
    path = f"/v1/threads/{thread_id}/timeline?branch_id={branch_id}&limit=10000"
    status, body, headers = dev.call("GET", path, token=token)
    assert status == 200, body
    assert not any(k.lower() == "link" for k in headers), "more than one page"
    return [e["event"] for e in body["entries"]]


def round_trip(dev: DevProcess, thread_id: str, branch_id: str, token: str) -> list[dict[str, Any]]:
    """The stored branch exports, re-imports (its chain verified), reduces, re-renders every
    request to the bytes that were sent (`render.verify_requests`), and the projections of the
    re-imported log equal those of the branch as the timeline route serves it; returns the
    re-imported events."""
    events, artifacts = stores(dev)
    imported = import_log(events.export(branch_id))
    assert imported.head_verified and imported.branch_id == branch_id
    state = reduce(imported.fold, imported.head.hash)
    assert state["head"]["seq"] == imported.fold.head_seq
    render.verify_requests(imported.fold.events, artifacts.get_ref)
    again = list(imported.fold.events)
    served = branch_timeline(dev, thread_id, branch_id, token)
    assert [e["event_id"] for e in served] == [e["event_id"] for e in again][-len(served) :], (
        thread_id,
        branch_id,
        kinds(served),
        kinds(again),
    )
    assert all_projections(again) == all_projections(served)
    return again
