"""`threads-aws tenant delete TENANT --yes` (erasure): every thread of the tenant (children
cascading), its API keys, notes, receipts and other rows go; another tenant's stay untouched;
a busy thread is reported and kept (exit 1) until a rerun. `threads-aws sweep` runs a pass."""

from __future__ import annotations

import json
from typing import Any

from helpers.engine import make_ctx, new_thread, run, say
from helpers.host import ALICE, MALLORY, make_host
from threads_aws.core.canonical import new_uuid7
from threads_aws.host.keys import ApiKeys
from threads_aws.store.records import wall_ms
from threads_aws_dev.cli import main


def _items(aws: Any) -> list[dict[str, Any]]:
    out = []
    for table in (aws.resources.events_table, aws.resources.state_table):
        kwargs: dict[str, Any] = {"TableName": table}
        while True:
            page = aws.ddb.scan(**kwargs)
            out.extend(page["Items"])
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    return out


def test_tenant_delete_erases_one_tenant(aws: Any, monkeypatch: Any, capsys: Any) -> None:
    for k, v in aws.resources.env().items():
        monkeypatch.setenv(k, v)
    aws.clock.now = wall_ms()  # the command reads the wall clock (leases, the grace)
    host, ctx = make_host(aws), make_ctx(aws)
    mine = [host.start_run(ALICE, {"agent": "demo", "input": f"hello {i}"}, new_uuid7()) for i in range(2)]
    for r in mine:
        run(ctx, r["branch_id"])
    spawned = new_thread(ctx)  # acme's, with a subagent child
    say(ctx, spawned, "spawn: demo: hi")
    run(ctx, spawned)
    theirs = host.start_run(MALLORY, {"agent": "demo", "input": "evil's"}, new_uuid7())
    run(ctx, theirs["branch_id"])
    keys = ApiKeys(host.stores.api_keys)
    acme_key, evil_key = keys.create("acme", "alice"), keys.create("evil", "mallory")
    busy = host.start_run(ALICE, {"agent": "demo", "input": "still running"}, new_uuid7())
    lease = host.store.acquire_lease(busy["branch_id"], "worker-1", ttl_ms=600_000)
    evil_before = [it for it in _items(aws) if "evil" in json.dumps(it, default=str)]

    assert main(["tenant", "delete", "acme"]) == 2  # no --yes: refused, nothing touched
    assert host.thread(ALICE, mine[0]["thread_id"])

    assert main(["tenant", "delete", "acme", "--yes"]) == 1  # one thread is busy
    out = capsys.readouterr().out
    assert busy["thread_id"] in out and "deleted 3 threads of acme" in out
    assert host.thread(ALICE, busy["thread_id"])  # kept
    host.store.release_lease(busy["branch_id"], lease)
    assert main(["tenant", "delete", "acme", "--yes"]) == 0

    left = [it for it in _items(aws) if "acme" in json.dumps(it, default=str)]
    assert {it["pk"]["S"].split("#")[0] for it in left} == {"TOMBSTONE"}  # no content
    assert keys.lookup(acme_key.token) is None
    assert keys.lookup(evil_key.token) is not None
    assert host.thread(MALLORY, theirs["thread_id"])["thread_id"] == theirs["thread_id"]
    evil_after = [it for it in _items(aws) if "evil" in json.dumps(it, default=str)]
    assert evil_after == evil_before  # the other tenant's rows, byte for byte
    page, _ = host.threads(ALICE, 50, None)
    assert page["threads"] == []


def test_sweep_command(aws: Any, monkeypatch: Any, capsys: Any) -> None:
    for k, v in aws.resources.env().items():
        monkeypatch.setenv(k, v)
    assert main(["sweep", "--grace-ms", "0"]) == 0
    assert "tombstones finished 0" in capsys.readouterr().out
