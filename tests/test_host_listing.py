"""Listing (ours): GET /v1/threads and GET /v1/threads/{thread_id} over the thread index on moto:
newest first, paged by cursor with Link rel=next, tenant-scoped (another tenant's thread is
not_found), and the row's status moved by the appends that change it (the Writer's companion)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from helpers.host import ALICE, MALLORY, append, make_host, park_on_approval, park_on_question, start
from threads_aws.host.errors import ApiError
from threads_aws.host.listing import list_params


@pytest.fixture
def host(aws):
    return make_host(aws)


def rows(host, who=ALICE, **kw) -> list[dict[str, Any]]:
    page, _ = host.threads(who, kw.get("limit", 50), kw.get("before"))
    return page["threads"]


def finish(host, run) -> None:
    append(
        host,
        run["branch_id"],
        ("turn_completed", {"reason": "end_turn"}),
    )


def index_items(aws) -> int:
    """Thread META items in the state table (the listing writes no row of its own)."""
    out = aws.ddb.scan(TableName=aws.resources.state_table)["Items"]
    return sum(1 for i in out if i["sk"]["S"] == "META")


def test_newest_first_with_agent_title_and_status(host):
    first = start(host, text="plan   the\ntrip")
    second = start(host, text="x" * 500)
    got = rows(host)
    assert [r["thread_id"] for r in got] == [second["thread_id"], first["thread_id"]]
    one = got[1]
    assert one["agent"] == "scripted" and one["title"] == "plan the trip"
    assert one["status"] == "in_turn" and one["status_branch_id"] == first["branch_id"]
    assert one["main_branch_id"] == first["branch_id"]
    assert one["created_at"] <= one["last_activity_at"]
    assert len(got[0]["title"]) == 120 and got[0]["title"].endswith("\u2026")


def test_status_follows_the_appends_that_change_it(host, aws):
    run = start(host)
    cid = park_on_approval(host, run)
    (row,) = rows(host)
    assert row["status"] == "parked"
    detail = host.thread(ALICE, run["thread_id"])
    assert detail["status"] == "parked" and detail["open_approvals"] == 1 and detail["open_questions"] == 0
    host.decide_approval(ALICE, run["thread_id"], cid, {"decision": "grant"})  # resumed: working again
    assert rows(host)[0]["status"] == "in_turn" == host.thread(ALICE, run["thread_id"])["status"]
    assert index_items(aws) == 1


def test_a_question_counts_and_a_finished_turn_is_idle(host):
    run = start(host)
    park_on_question(host, run)
    assert host.thread(ALICE, run["thread_id"])["open_questions"] == 1
    other = start(host)
    finish(host, other)
    by_id = {r["thread_id"]: r for r in rows(host)}
    assert by_id[run["thread_id"]]["status"] == "parked"
    assert by_id[other["thread_id"]]["status"] == "idle"


def test_thread_detail_lists_branches_with_usage(host):
    run = start(host)
    finish(host, run)
    d = host.thread(ALICE, run["thread_id"])
    assert d["thread_id"] == run["thread_id"] and d["title"] == "hello" and d["agent"] == "scripted"
    (b,) = d["branches"]
    assert b["branch_id"] == run["branch_id"] and b["status"] == "idle" and b["runnable"]
    assert b["head_seq"] == 3
    assert b["usage"] == {"input_tokens": 0, "output_tokens": 0, "unknown_responses": 0}
    assert d["usage"] == b["usage"] and d["last_activity_at"] >= d["created_at"]


def test_paging_by_cursor_visits_every_thread_once(host):
    made = [start(host, text=f"t{i}")["thread_id"] for i in range(7)]
    seen, before, pages = [], None, 0
    while True:
        page, before = host.threads(ALICE, 3, before)
        seen += [r["thread_id"] for r in page["threads"]]
        pages += 1
        if before is None:
            break
    assert seen == made[::-1] and pages == 3
    # a page that ends exactly at the end names no next page
    assert host.threads(ALICE, 7, None)[1] is None


def test_tenant_isolation(host):
    mine = start(host)
    theirs = start(host, who=MALLORY)
    assert [r["thread_id"] for r in rows(host)] == [mine["thread_id"]]
    assert [r["thread_id"] for r in rows(host, MALLORY)] == [theirs["thread_id"]]
    with pytest.raises(ApiError) as exc:
        host.thread(ALICE, theirs["thread_id"])
    assert exc.value.code == "not_found"
    # another tenant's cursor position reveals nothing: the query is under the caller's tenant
    _, cursor = host.threads(MALLORY, 1, None)
    assert cursor is None


@pytest.mark.parametrize(
    "query",
    [{"limit": "0"}, {"limit": "201"}, {"limit": "x"}, {"limit": "٣"}, {"before": "nope"}, {"before": ""}],
)
def test_malformed_page_parameters_are_invalid_request(query):
    with pytest.raises(ApiError) as exc:
        list_params(query)
    assert exc.value.code == "invalid_request"


def _event(op: str, path: str, query: dict[str, str] | None, params: dict[str, str] | None, tenant: str):
    return {
        "httpMethod": "GET",
        "path": path,
        "pathParameters": params,
        "queryStringParameters": query,
        "headers": {},
        "body": None,
        "requestContext": {"authorizer": {"issuer": "api", "tenant": tenant, "subject": "alice"}},
    }


def test_routes_over_http_link_next_and_typed_errors(aws, monkeypatch):
    from threads_aws.host import runtime
    from threads_aws.host.runtime import api

    for k, v in aws.resources.env().items():
        monkeypatch.setenv(k, v)
    runtime.reset()
    host = runtime.host()
    made = [start(host, text=f"t{i}")["thread_id"] for i in range(3)]
    seen, query = [], {"limit": "2"}
    while query is not None:
        out = api(_event("listThreads", "/v1/threads", query, None, "acme"), "listThreads")
        assert out["statusCode"] == 200
        seen += [r["thread_id"] for r in json.loads(out["body"])["threads"]]
        link = out["headers"].get("Link")
        if link is None:
            query = None
        else:
            m = re.fullmatch(r'<threads\?before=([^&]+)&limit=2>; rel="next"', link)
            assert m, link
            from urllib.parse import unquote

            query = {"before": unquote(m.group(1)), "limit": "2"}
    assert seen == made[::-1]
    bad = api(_event("listThreads", "/v1/threads", {"limit": "0"}, None, "acme"), "listThreads")
    assert bad["statusCode"] == 400 and json.loads(bad["body"])["error"]["code"] == "invalid_request"
    tid = made[0]
    ok = api(_event("getThread", f"/v1/threads/{tid}", None, {"thread_id": tid}, "acme"), "getThread")
    assert ok["statusCode"] == 200 and json.loads(ok["body"])["branches"]
    other = api(_event("getThread", f"/v1/threads/{tid}", None, {"thread_id": tid}, "evil"), "getThread")
    assert other["statusCode"] == 404 and json.loads(other["body"])["error"]["code"] == "not_found"
    runtime.reset()
