"""The timeline of any size is readable: pages bounded by entries and by bytes, chained by an
RFC 8288 Link; a thread whose log is over 6 MB read through the local gateway (whole, it would
be over Lambda's response limit: 502 for good)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl

import pytest
from helpers.dev_process import DevProcess, dev_process
from helpers.host import ALICE, make_host, park_on_approval, start
from threads_aws.host import paging
from threads_aws.host.errors import ApiError

NEXT = re.compile(r'^<(timeline\?[^>]*)>; rel="next"$')


def next_query(headers: dict[str, str]) -> dict[str, str] | None:
    link = next((v for k, v in headers.items() if k.lower() == "link"), None)
    if link is None:
        return None
    m = NEXT.match(link)
    assert m, link
    return dict(parse_qsl(m.group(1).split("?", 1)[1]))


def read_all(timeline: dict[str, Any], query: dict[str, str], budget: int) -> tuple[list[Any], int]:
    """Follow the Links from `query`; (entries, pages)."""
    out: list[Any] = []
    pages = 0
    q: dict[str, str] | None = query
    while q is not None:
        body, headers = paging.timeline_page(timeline, q, budget=budget)
        page = json.loads(body)
        assert page["thread_id"] == timeline["thread_id"] and page["branch_id"] == timeline["branch_id"]
        out += page["entries"]
        pages += 1
        q = next_query(headers)
    return out, pages


@pytest.fixture
def timeline(aws: Any) -> dict[str, Any]:
    host = make_host(aws)
    run = start(host)
    park_on_approval(host, run)
    return host.timeline(ALICE, run["thread_id"], None)


def test_one_page_when_it_fits(timeline: dict[str, Any]) -> None:
    body, headers = paging.timeline_page(timeline, {})
    assert json.loads(body) == timeline and headers == {}


def test_pages_by_bytes_and_by_limit_cover_the_timeline_once(timeline: dict[str, Any]) -> None:
    entries = timeline["entries"]
    assert len(entries) > 4
    # a budget smaller than any entry: one entry per page, still every entry
    got, pages = read_all(timeline, {}, budget=1)
    assert got == entries and pages == len(entries)
    got, pages = read_all(timeline, {"limit": "2"}, budget=paging.PAGE_BYTES)
    assert got == entries and pages == (len(entries) + 1) // 2
    two = sum(paging.wire_size(json.dumps(e, separators=(",", ":")).encode()) + 1 for e in entries[:2])
    body, headers = paging.timeline_page(timeline, {"branch_id": "b"}, budget=two + 200)
    assert len(json.loads(body)["entries"]) == 2
    assert next_query(headers) == {"after_seq": str(entries[1]["event"]["seq"]), "branch_id": "b"}
    after = entries[2]["event"]["seq"]
    body, _ = paging.timeline_page(timeline, {"after_seq": str(after)})
    assert json.loads(body)["entries"] == entries[3:]


@pytest.mark.parametrize(
    "query",
    [{"limit": "0"}, {"limit": "10001"}, {"limit": "x"}, {"after_seq": "-1"}, {"after_seq": "9" * 17}],
)
def test_malformed_page_parameters(query: dict[str, str]) -> None:
    with pytest.raises(ApiError) as exc:
        paging.page_params(query)
    assert exc.value.code == "invalid_request"  # dispatch answers it 403 forbidden on this route


def test_fork_points_page_the_same_way() -> None:
    points = [
        {"branch_id": "b", "seq": seq, "event_id": f"e{seq}", "snapshot": {"pad": "p" * 100}}
        for seq in (3, 9, 12, 20)
    ]
    body, headers = paging.fork_points_page(points, {})
    assert json.loads(body) == points and headers == {}
    got: list[Any] = []
    q: dict[str, str] | None = {"branch_id": "b"}
    while q is not None:
        body, headers = paging.fork_points_page(points, q, budget=1)
        got += json.loads(body)
        link = headers.get("Link")
        q = None if link is None else dict(parse_qsl(link.split("?", 1)[1].split(">", 1)[0]))
        assert link is None or link.startswith("<fork-points?")
    assert got == points
    body, headers = paging.fork_points_page(points, {"after_seq": "9", "limit": "1"})
    assert json.loads(body) == points[2:3] and "after_seq=12" in headers["Link"]


# ---------------------------------------------------------------- over 6 MB, through the gateway


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevProcess]:
    with dev_process(tmp_path_factory.mktemp("paging")) as d:
        yield d


def test_a_timeline_over_6_mb_is_read_in_pages(dev: DevProcess) -> None:
    text = "z" * 1_000_000  # each run: the input, and the demo model's reply quoting it
    run = dev.start_run(text)
    thread = run["thread_id"]
    for n in range(2, 5):
        dev.wait_for(thread, "turn_completed", count=n - 1, timeout=120)
        status, body, _ = dev.call(
            "POST",
            "/v1/runs",
            {"agent": "demo", "input": text, "thread_id": thread},
            headers={"Idempotency-Key": f"big-{thread}-{n}"},
        )
        assert status == 202, body
    dev.wait_for(thread, "turn_completed", count=4, timeout=120)
    entries: list[dict[str, Any]] = []
    total = pages = 0
    query = ""
    while True:
        status, body, headers = dev.call("GET", f"/v1/threads/{thread}/timeline{query}")
        assert status == 200, (status, str(body)[:300])
        size = len(json.dumps(body))
        assert size <= paging.PAGE_BYTES  # each page under Lambda's 6 MB response
        total += size
        pages += 1
        entries += body["entries"]
        q = next_query(headers)
        if q is None:
            break
        query = "?" + "&".join(f"{k}={v}" for k, v in q.items())
    assert total > 6 * 1024 * 1024 and pages >= 2
    seqs = [e["event"]["seq"] for e in entries]
    assert seqs == list(range(1, len(seqs) + 1))  # every entry once, in order
    assert [e["event"]["type"] for e in entries].count("user_input") == 4
