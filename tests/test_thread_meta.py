"""Threads an app can manage (issue 18 §6) on moto: PATCH /v1/threads/{id} (title, metadata
merged, limits refused before any write), and GET /v1/threads by last activity with its filters
(status, agent, metadata, updated_after/before, title_contains), paged, tenant-scoped, and the
index reads reading no more than they return (DynamoDB's own ScannedCount, seen on the client)."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qsl

import pytest
from helpers.host import ALICE, MALLORY, append, make_host, park_on_approval, start
from threads_aws.host.errors import ApiError
from threads_aws.host.thread_meta import filter_params
from threads_aws.store.thread_query import ThreadFilter, query_threads


@pytest.fixture
def host(aws):
    return make_host(aws)


def ids(host, who=ALICE, limit=50, **filters: Any) -> list[str]:
    page, _ = host.threads(who, limit, None, ThreadFilter(**filters))
    return [r["thread_id"] for r in page["threads"]]


def finish(host, run) -> None:
    append(host, run["branch_id"], ("turn_completed", {"reason": "end_turn"}))


def scanned(aws) -> list[int]:
    """ScannedCount of every Query the client sends from now on (DynamoDB's count of items read)."""
    seen: list[int] = []

    def hook(http_response: Any, parsed: dict[str, Any], **_: Any) -> None:
        seen.append(parsed.get("ScannedCount", 0))

    aws.ddb.meta.events.register("after-call.dynamodb.Query", hook)
    return seen


def test_patch_sets_the_title_and_merges_metadata(host):
    run = start(host, text="first prompt")
    tid = run["thread_id"]
    row = host.update_thread(
        ALICE, tid, {"title": "Trip to Lisbon", "metadata": {"project": "apollo", "k": "1"}}
    )
    assert row["title"] == "Trip to Lisbon" and row["metadata"] == {"project": "apollo", "k": "1"}
    row = host.update_thread(ALICE, tid, {"metadata": {"k": None, "owner": "ann"}})
    assert row["metadata"] == {"project": "apollo", "owner": "ann"} and row["title"] == "Trip to Lisbon"
    (listed,) = host.threads(ALICE, 50, None)[0]["threads"]
    assert listed["metadata"] == {"project": "apollo", "owner": "ann"} and listed["title"] == "Trip to Lisbon"
    detail = host.thread(ALICE, tid)
    assert detail["metadata"] == listed["metadata"] and detail["title"] == "Trip to Lisbon"
    # the next user input doesn't take the PATCHed title back (its title is only for a thread with none)
    finish(host, run)
    host.start_run(ALICE, {"agent": "scripted", "thread_id": tid, "input": "second"}, "k-2")
    assert host.thread(ALICE, tid)["title"] == "Trip to Lisbon"
    row = host.update_thread(ALICE, tid, {"metadata": {"project": None, "owner": None}})
    assert "metadata" not in row


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({}, "title or metadata"),
        ({"title": ""}, "body.title"),
        ({"title": "x" * 257}, "body.title"),
        ({"color": "red"}, "body.color"),
        ({"metadata": {"bad key": "v"}}, "metadata key"),
        ({"metadata": {"k": "v" * 513}}, "body.metadata.k"),
        ({"metadata": {"k": 3}}, "body.metadata.k"),
        ({"metadata": [1]}, "body.metadata"),
        ({"metadata": {f"k{i}": "v" for i in range(17)}}, "at most 16"),
    ],
)
def test_a_bad_patch_is_invalid_request_and_writes_nothing(host, body, says):
    run = start(host)
    before = host.thread(ALICE, run["thread_id"])
    with pytest.raises(ApiError) as exc:
        host.update_thread(ALICE, run["thread_id"], body)
    assert exc.value.code == "invalid_request" and says in exc.value.message
    assert host.thread(ALICE, run["thread_id"]) == before


def test_a_merge_past_16_keys_is_refused_whole(host):
    tid = start(host)["thread_id"]
    host.update_thread(ALICE, tid, {"metadata": {f"k{i}": "v" for i in range(10)}})
    with pytest.raises(ApiError) as exc:  # 9 kept + 8 new = 17, although the patch holds 9
        host.update_thread(
            ALICE, tid, {"title": "new", "metadata": {"k0": None, **{f"n{i}": "v" for i in range(8)}}}
        )
    assert exc.value.code == "invalid_request" and "17 keys" in exc.value.message
    row = host.threads(ALICE, 50, None)[0]["threads"][0]
    assert len(row["metadata"]) == 10 and row["title"] == "hello"
    # replacing within the limit is fine: removals count first
    ok = host.update_thread(ALICE, tid, {"metadata": {"k0": None, **{f"n{i}": "v" for i in range(6)}}})
    assert len(ok["metadata"]) == 15


def test_tenant_isolation_patch_and_filters(host):
    mine = start(host)
    theirs = start(host, who=MALLORY)
    host.update_thread(MALLORY, theirs["thread_id"], {"title": "hello there", "metadata": {"team": "a"}})
    with pytest.raises(ApiError) as exc:
        host.update_thread(MALLORY, mine["thread_id"], {"title": "pwned"})
    assert exc.value.code == "not_found"
    assert host.thread(ALICE, mine["thread_id"])["title"] == "hello"
    host.update_thread(ALICE, mine["thread_id"], {"metadata": {"team": "a"}})
    for f in (
        {},
        {"status": "in_turn"},
        {"agent": "scripted"},
        {"metadata": {"team": "a"}},
        {"title_contains": "hel"},
    ):
        assert ids(host, **f) == [mine["thread_id"]], f
        assert ids(host, MALLORY, **f) == [theirs["thread_id"]], f
    with pytest.raises(ApiError) as exc:
        host.update_thread(ALICE, "01900000-0000-7000-8000-00000000dead", {"title": "x"})
    assert exc.value.code == "not_found"


def test_sorted_by_last_activity_and_time_ranges(host, aws):
    a = start(host, text="a")
    aws.clock.advance(1000)
    b = start(host, text="b")
    assert ids(host) == [b["thread_id"], a["thread_id"]]
    t_b = aws.clock.now
    aws.clock.advance(1000)
    finish(host, a)  # a status change: a moves to the top
    t_a = aws.clock.now
    assert ids(host) == [a["thread_id"], b["thread_id"]]
    assert ids(host, updated_after=t_b) == [a["thread_id"]]
    assert ids(host, updated_before=t_a) == [b["thread_id"]]
    assert ids(host, updated_after=t_b - 1, updated_before=t_a + 1) == [a["thread_id"], b["thread_id"]]
    assert ids(host, updated_after=t_a, updated_before=t_b) == []  # an empty range reads nothing
    # a PATCH is not activity: the order holds
    host.update_thread(ALICE, b["thread_id"], {"title": "renamed"})
    assert ids(host) == [a["thread_id"], b["thread_id"]]


def test_status_agent_metadata_and_title_filters(host):
    parked = start(host, text="Plan the Q3 offsite")
    park_on_approval(host, parked)
    idle = start(host, text="write the report")
    finish(host, idle)
    demo = host.start_run(ALICE, {"agent": "demo", "input": "plan a PARTY"}, "k-demo")
    host.update_thread(ALICE, idle["thread_id"], {"metadata": {"team": "red", "prio": "1"}})
    host.update_thread(ALICE, demo["thread_id"], {"metadata": {"team": "red"}})
    assert ids(host, status="parked") == [parked["thread_id"]]
    assert ids(host, status="idle") == [idle["thread_id"]]
    assert ids(host, agent="demo") == [demo["thread_id"]]
    assert ids(host, agent="scripted", status="idle") == [idle["thread_id"]]
    assert ids(host, agent="demo", status="idle") == []
    assert ids(host, metadata={"team": "red"}) == [demo["thread_id"], idle["thread_id"]]
    assert ids(host, metadata={"team": "red", "prio": "1"}) == [idle["thread_id"]]
    assert ids(host, metadata={"team": "blue"}) == []
    assert ids(host, title_contains="PLAN") == [demo["thread_id"], parked["thread_id"]]
    assert ids(host, title_contains="plan", agent="scripted") == [parked["thread_id"]]
    # a PATCHed title is what the text match reads
    host.update_thread(ALICE, idle["thread_id"], {"title": "Planning notes"})
    assert idle["thread_id"] in ids(host, title_contains="planning")


def test_index_reads_read_no_more_than_they_return(host, aws):
    runs = [start(host, text=f"t{i}") for i in range(12)]
    for r in runs[:9]:
        finish(host, r)
    other = host.start_run(ALICE, {"agent": "demo", "input": "x"}, "k-demo")
    seen = scanned(aws)
    got = ids(host, status="in_turn")
    assert set(got) == {r["thread_id"] for r in runs[9:]} | {other["thread_id"]}
    assert sum(seen) <= len(got) + 1, seen  # the page and at most one look-ahead item
    seen.clear()
    assert ids(host, agent="demo") == [other["thread_id"]]
    assert sum(seen) <= 2, seen
    seen.clear()
    assert len(ids(host, limit=5)) == 5
    assert sum(seen) <= 6, seen
    # a filtered read reads the index it narrows: here every in_turn thread, 4 of them
    seen.clear()
    assert ids(host, status="in_turn", agent="demo") == [other["thread_id"]]
    assert sum(seen) == 4, seen


def test_paging_with_filters_visits_each_match_once(host, aws):
    want = []
    for i in range(11):
        run = start(host, text=f"t{i}")
        if i % 3 != 1:
            host.update_thread(ALICE, run["thread_id"], {"metadata": {"team": "red"}})
            want.append(run["thread_id"])
    f = ThreadFilter(metadata={"team": "red"})
    seen, before = [], None
    while True:
        page, before = host.threads(ALICE, 2, before, f)
        seen += [r["thread_id"] for r in page["threads"]]
        if before is None:
            break
    assert seen == want[::-1]


def test_a_filtered_page_stops_at_its_read_budget_and_names_where_to_go_on(host, aws):
    made = [start(host, text=f"t{i}")["thread_id"] for i in range(6)]
    host.update_thread(ALICE, made[0], {"metadata": {"team": "red"}})  # the oldest: read last
    res = aws.resources
    f = ThreadFilter(metadata={"team": "red"})
    page, cursor = query_threads(aws.ddb, res.state_table, "acme", f, limit=10, before=None, read_budget=3)
    assert page == [] and cursor is not None  # read 3, matched none, and says there is more
    page, cursor = query_threads(aws.ddb, res.state_table, "acme", f, limit=10, before=cursor, read_budget=3)
    assert [t.thread_id for t in page] == [made[0]] and cursor is None


def _event(method: str, path: str, query, params, tenant: str, body: Any = None) -> dict[str, Any]:
    return {
        "httpMethod": method,
        "path": path,
        "pathParameters": params,
        "queryStringParameters": query,
        "headers": {"Content-Type": "application/json"} if body is not None else {},
        "body": None if body is None else json.dumps(body),
        "requestContext": {"authorizer": {"issuer": "api", "tenant": tenant, "subject": "alice"}},
    }


def test_routes_over_http(aws, monkeypatch):
    from threads_aws.host import runtime
    from threads_aws.host.runtime import api

    for k, v in aws.resources.env().items():
        monkeypatch.setenv(k, v)
    runtime.reset()
    host = runtime.host()
    made = [start(host, text=f"t{i}")["thread_id"] for i in range(5)]

    def patch(tid: str, body: Any, tenant: str = "acme") -> dict[str, Any]:
        ev = _event("PATCH", f"/v1/threads/{tid}", None, {"thread_id": tid}, tenant, body)
        return api(ev, "updateThread")

    for tid in made[1:]:
        out = patch(tid, {"metadata": {"team": "red"}})
        assert out["statusCode"] == 200 and json.loads(out["body"])["metadata"] == {"team": "red"}
    bad = patch(made[0], {"title": 5})
    assert bad["statusCode"] == 400 and json.loads(bad["body"])["error"]["code"] == "invalid_request"
    assert "body.title" in json.loads(bad["body"])["error"]["message"]
    other = patch(made[0], {"title": "x"}, tenant="evil")
    assert other["statusCode"] == 404 and json.loads(other["body"])["error"]["code"] == "not_found"
    seen, query = [], {"limit": "3", "metadata[team]": "red", "status": "in_turn"}
    while query is not None:
        out = api(_event("GET", "/v1/threads", query, None, "acme"), "listThreads")
        assert out["statusCode"] == 200, out
        seen += [r["thread_id"] for r in json.loads(out["body"])["threads"]]
        link = out["headers"].get("Link")
        m = re.fullmatch(r'<threads\?([^>]+)>; rel="next"', link) if link else None
        query = dict(parse_qsl(m.group(1))) if m else None
        if query is not None:
            assert query["metadata[team]"] == "red" and query["status"] == "in_turn" and query["limit"] == "3"
    assert seen == made[1:][::-1]
    for q, name in [
        ({"status": "sleeping"}, "status"),
        ({"updated_after": "-1"}, "updated_after"),
        ({"metadata[bad key]": "v"}, "metadata"),
        ({"title_contains": ""}, "title_contains"),
        ({"metadata[k]": "v" * 129}, "metadata[k]"),
        ({f"metadata[k{i}]": "v" for i in range(5)}, "at most 4 pairs"),
    ]:
        out = api(_event("GET", "/v1/threads", q, None, "acme"), "listThreads")
        body = json.loads(out["body"])
        assert out["statusCode"] == 400 and body["error"]["code"] == "invalid_request", q
        assert name in body["error"]["message"], body
    runtime.reset()


def test_filter_params_parse_every_filter():
    f = filter_params(
        {
            "status": "idle",
            "agent": "demo",
            "metadata[a.b]": "1",
            "updated_after": "5",
            "updated_before": "9",
            "title_contains": "x",
        }
    )
    assert f == ThreadFilter("idle", "demo", {"a.b": "1"}, 5, 9, "x")
    assert f.filtered()
    assert not ThreadFilter(status="idle", updated_after=1).filtered()


def test_backfill_lists_rows_written_before_the_indexes(host, aws):
    from threads_aws.store.thread_backfill import backfill

    old = start(host, text="Old thread")
    new = start(host, text="new one")
    table = aws.resources.state_table
    key = {"pk": {"S": f"THREAD#{old['thread_id']}"}, "sk": {"S": "META"}}
    # the row as an older host wrote it: none of the listing's index keys
    aws.ddb.update_item(
        TableName=table, Key=key, UpdateExpression="REMOVE act_sk, status_pk, agent_pk, title_fold"
    )
    assert ids(host) == [new["thread_id"]]
    assert backfill(aws.ddb, table) == 1
    assert ids(host) == [new["thread_id"], old["thread_id"]]
    assert ids(host, status="in_turn", agent="scripted", title_contains="old") == [old["thread_id"]]
    assert backfill(aws.ddb, table) == 0  # nothing left to do


def test_concurrent_patches_lose_no_key(host, aws):
    tid = start(host)["thread_id"]
    raced = []

    def race(params: Any, **_: Any) -> None:
        # another PATCH lands between this one's read and its write (once)
        if not raced and b"meta_rev" in params.get("body", b""):
            raced.append(True)
            host.update_thread(ALICE, tid, {"metadata": {"b": "2"}})

    aws.ddb.meta.events.register("before-call.dynamodb.UpdateItem", race)
    row = host.update_thread(ALICE, tid, {"metadata": {"a": "1"}})
    assert raced and row["metadata"] == {"a": "1", "b": "2"}
    assert host.index.get_thread("acme", tid).meta_rev == 2
