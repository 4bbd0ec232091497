"""POST /v1/runs under concurrency and its schema-valid shapes: parallel replays that continue a
thread share one receipt; `branch_id` without `thread_id` continues that branch's thread."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from helpers.host import ALICE, MALLORY, append, make_host, start, types
from threads_aws.core.canonical import new_uuid7
from threads_aws.core.errors import LogError
from threads_aws.host.errors import ApiError


def code_of(fn: Any, *a: Any, **kw: Any) -> str:
    with pytest.raises((ApiError, LogError)) as exc:
        fn(*a, **kw)
    return exc.value.code


def idle_thread(aws: Any) -> dict[str, str]:
    host = make_host(aws)
    run = start(host)
    append(host, run["branch_id"], ("turn_completed", {"reason": "end_turn"}))
    return run


def parallel(hosts: list[Any], **body: Any) -> tuple[list[dict[str, str]], list[BaseException]]:
    """One POST per host, all released at once, same key and body."""
    results: list[dict[str, str]] = []
    errors: list[BaseException] = []
    gate = threading.Barrier(len(hosts))

    def post(h: Any) -> None:
        gate.wait()
        try:
            results.append(start(h, key="continue-1", text="again", **body))
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=post, args=(h,)) for h in hosts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, errors


@pytest.mark.parametrize("containers", [1, 10], ids=["one-container", "ten-containers"])
def test_ten_parallel_replays_continuing_a_thread_get_one_receipt(aws: Any, containers: int) -> None:
    run = idle_thread(aws)
    # ten Lambda containers each have their own Host (writer, view cache, lock); one container
    # serves concurrent requests through its one Host (the local gateway's threads).
    made = [make_host(aws) for _ in range(containers)]
    hosts = [made[i % containers] for i in range(10)]
    results, errors = parallel(hosts, thread_id=run["thread_id"])
    assert errors == []
    assert len(results) == 10 and all(r == results[0] for r in results)
    assert results[0]["thread_id"] == run["thread_id"] and results[0]["run_id"] != run["run_id"]
    assert types(made[0], run["branch_id"]).count("user_input") == 2


def test_a_busy_branch_without_this_keys_receipt_stays_not_runnable(aws: Any) -> None:
    host = make_host(aws)
    run = start(host)  # its turn is open
    assert code_of(start, host, key="other", thread_id=run["thread_id"]) == "branch_not_runnable"
    assert host.stores.receipts.get("acme", "other") is None


def test_branch_id_without_thread_id_continues_that_branch(aws: Any) -> None:
    run = idle_thread(aws)
    host = make_host(aws)
    again = start(host, key="by-branch", branch_id=run["branch_id"])
    assert (again["thread_id"], again["branch_id"]) == (run["thread_id"], run["branch_id"])
    assert start(host, key="by-branch", branch_id=run["branch_id"]) == again  # a replay
    assert types(host, run["branch_id"]).count("user_input") == 2
    # another tenant's branch reads as absent, like an unknown one
    assert code_of(start, host, MALLORY, key="k-m", branch_id=run["branch_id"]) == "not_found"
    assert code_of(start, host, ALICE, key="k-u", branch_id=new_uuid7()) == "not_found"
    assert host.stores.receipts.get("evil", "k-m") is None


def test_branch_id_without_thread_id_through_the_handler(aws: Any, monkeypatch: Any) -> None:
    """The schema-valid body is answered 202 by the deployed handler path (body validation,
    dispatch, Host)."""
    from threads_aws.host import runtime

    for k, v in aws.resources.env().items():
        monkeypatch.setenv(k, v)
    run = idle_thread(aws)
    event = {
        "resource": "/v1/runs",
        "path": "/v1/runs",
        "httpMethod": "POST",
        "headers": {"Content-Type": "application/json", "Idempotency-Key": "h-1"},
        "multiValueHeaders": {"Content-Type": ["application/json"], "Idempotency-Key": ["h-1"]},
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "pathParameters": None,
        "requestContext": {
            "resourcePath": "/v1/runs",
            "httpMethod": "POST",
            "authorizer": {
                "issuer": "api",
                "tenant": "acme",
                "subject": "alice",
                "principalId": "api/acme/alice",
            },
        },
        "body": json.dumps({"agent": "scripted", "input": "via handler", "branch_id": run["branch_id"]}),
        "isBase64Encoded": False,
    }
    out = runtime.api(event, "startRun")
    assert out["statusCode"] == 202, out
    body = json.loads(out["body"])
    assert (body["thread_id"], body["branch_id"]) == (run["thread_id"], run["branch_id"])
