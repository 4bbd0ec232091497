"""The buffered run subscription: framing, resume by Last-Event-ID / after_seq, the result."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.host import ALICE, MALLORY, append, make_host, park_on_approval, start
from helpers.shared import needs
from threads_aws.host import sse
from threads_aws.host.errors import ApiError

REPO = Path(__file__).resolve().parents[1]

NOW = sse.Window(wait_ms=0, poll_ms=50, retry_ms=1500)


@pytest.fixture
def host(aws):
    return make_host(aws)


def window(host, run, cursor=0, w=NOW, **kw):
    body = sse.subscribe(host, ALICE, run["thread_id"], run["run_id"], cursor=cursor, window=w, **kw)
    return body, sse.parse_messages(body)


def test_framing_and_retry_while_running(host):
    run = start(host)
    body, msgs = window(host, run)
    assert body.startswith(b"id: 2\ndata: ")
    assert [m.get("id") for m in msgs] == ["2", None]
    assert msgs[0]["data"]["kind"] == "event" and msgs[0]["data"]["event"]["event_id"] == run["run_id"]
    assert msgs[-1] == {"retry": "1500"}  # still running: the window ends with a retry hint


def test_parked_then_resumed_no_gap_no_duplicate(host):
    run = start(host)
    cid = park_on_approval(host, run)
    _, first = window(host, run)
    ids = [int(m["id"]) for m in first if "id" in m]
    assert ids == list(range(2, ids[-1] + 1))
    assert first[-1]["data"]["kind"] == "result" and "id" not in first[-1]
    assert first[-1]["data"]["run_id"] == run["run_id"]
    assert first[-1]["data"]["result"]["status"] == "parked"
    assert first[-1]["data"]["result"]["pending"] == [{"kind": "approval", "id": cid}]
    host.decide_approval(ALICE, run["thread_id"], cid, {"decision": "grant"})
    append(
        host,
        run["branch_id"],
        ("effect_begin", {"call_id": "call_1", "attempt": 1}),
        (
            "effect_commit",
            {"call_id": "call_1", "result_ref": {"bytes": 1, "media_type": "text/plain", "sha256": "0" * 64}},
        ),
    )
    _, mid = window(host, run, cursor=ids[-1])  # Last-Event-ID = the last seq seen
    mid_ids = [int(m["id"]) for m in mid if "id" in m]
    assert mid_ids[0] == ids[-1] + 1 and mid[-1] == {"retry": "1500"}
    append(
        host,
        run["branch_id"],
        (
            "tool_result",
            {
                "call_id": "call_1",
                "is_error": False,
                "completeness": "complete",
                "preview": "ok",
                "origin": "executed",
            },
        ),
        (
            "model_request",
            {
                "attempt": 1,
                "request_ref": {"bytes": 10, "media_type": "application/x-ndjson", "sha256": "0" * 64},
                "declared_prefix": {"bytes": 5, "sha256": "0" * 64},
            },
        ),
    )
    req = host.writer.load(run["branch_id"]).fold.events[-1]["event_id"]
    append(
        host,
        run["branch_id"],
        (
            "model_response",
            {
                "request_event_id": req,
                "content": [{"type": "text", "text": "done"}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 1, "output_tokens": 1},
                "completeness": "complete",
            },
        ),
        ("turn_completed", {"reason": "end_turn"}),
    )
    _, last = window(host, run, cursor=mid_ids[-1])
    last_ids = [int(m["id"]) for m in last if "id" in m]
    seen = ids + mid_ids + last_ids
    assert seen == list(range(2, seen[-1] + 1))  # no gap, no duplicate
    assert last[-1]["data"]["result"] == {
        "status": "completed",
        "thread_id": run["thread_id"],
        "branch_id": run["branch_id"],
        "output": "done",
    }


def test_stream_stops_at_the_next_run(host):
    run = start(host)
    append(host, run["branch_id"], ("turn_completed", {"reason": "cancelled"}))
    start(host, thread_id=run["thread_id"])
    _, msgs = window(host, run)
    assert [m["data"]["event"]["type"] for m in msgs[:-1]] == ["user_input", "turn_completed"]
    assert msgs[-1]["data"]["result"]["status"] == "cancelled"


def test_waits_for_more_within_the_window(host):
    run = start(host)
    clock = {"t": 0.0}
    polls = []

    def sleep(s):
        polls.append(s)
        clock["t"] += s
        if len(polls) == 2:
            append(host, run["branch_id"], ("turn_completed", {"reason": "max_turns"}))

    w = sse.Window(wait_ms=10_000, poll_ms=500, retry_ms=1000)
    _, msgs = window(host, run, cursor=2, w=w, sleep=sleep, monotonic=lambda: clock["t"])
    assert len(polls) == 2
    assert msgs[0]["id"] == "3" and msgs[-1]["data"]["result"]["status"] == "failed"


def test_resume_cursor_precedence():
    assert sse.resume_cursor("7", "3") == 7
    assert sse.resume_cursor(None, "3") == 3
    assert sse.resume_cursor("x", "3") == 3
    assert sse.resume_cursor(None, None) == 0


def test_unknown_run_and_other_tenant(host):
    run = start(host)
    with pytest.raises(ApiError) as exc:
        sse.subscribe(host, MALLORY, run["thread_id"], run["run_id"], cursor=0, window=NOW)
    assert exc.value.code == "not_found"
    with pytest.raises(ApiError):
        sse.subscribe(host, ALICE, run["thread_id"], run["thread_id"], cursor=0, window=NOW)


def test_window_env(monkeypatch):
    monkeypatch.setenv("SSE_WAIT_MS", "999999")
    monkeypatch.setenv("SSE_POLL_MS", "bad")
    w = sse.Window.from_env()
    assert w.wait_ms == sse.GATEWAY_LIMIT_MS - sse.FINISH_MS and w.poll_ms == sse.DEFAULT_POLL_MS
    assert sse.Window.from_env(remaining_ms=10_000).wait_ms == 10_000 - sse.FINISH_MS
    assert sse.Window.from_env(remaining_ms=1_000).wait_ms == 0


def test_the_wait_ends_safely_before_the_function_timeout(monkeypatch):
    # template.yaml's Timeout is the one constant: the deployed SSE_WAIT_MS, whatever it says,
    # can't outlast the invocation Lambda derives from it.
    from threads_aws_dev.local.infra import load_template

    fn = load_template(REPO / "template.yaml")["Resources"]["SubscribeRunFunction"]["Properties"]
    timeout_ms = fn["Timeout"] * 1000
    assert timeout_ms < sse.GATEWAY_LIMIT_MS
    for name, value in fn["Environment"]["Variables"].items():
        monkeypatch.setenv(name, value)
    w = sse.Window.from_env(remaining_ms=timeout_ms)
    assert 0 < w.wait_ms and w.wait_ms + w.poll_ms + sse.FINISH_MS <= timeout_ms
    monkeypatch.setenv("SSE_WAIT_MS", str(timeout_ms * 2))
    assert sse.Window.from_env(remaining_ms=timeout_ms).wait_ms == timeout_ms - sse.FINISH_MS


def test_windows_are_bounded_by_bytes_and_an_event_larger_than_one_still_arrives(host):
    run = start(host)
    park_on_approval(host, run)  # several events, then the run settles parked
    _, whole = window(host, run)
    events = [int(m["id"]) for m in whole if "id" in m]
    assert len(events) > 3 and whole[-1]["data"]["kind"] == "result"
    # A window smaller than any event: one event each, `retry: 0`, no gap, no duplicate, then
    # the result.
    tiny = sse.Window(wait_ms=0, poll_ms=50, retry_ms=1500, max_bytes=1)
    seen: list[int] = []
    for _ in range(len(events) + 1):
        _, msgs = window(host, run, cursor=seen[-1] if seen else 0, w=tiny)
        ids = [int(m["id"]) for m in msgs if "id" in m]
        seen += ids
        if msgs[-1].get("data", {}).get("kind") == "result":
            break
        assert len(ids) == 1 and msgs[-1] == {"retry": "0"}
    assert seen == events and msgs[-1]["data"] == whole[-1]["data"]
    # Bounded by bytes as the proxy response counts them: two events' worth holds two.
    two = sum(sse.wire_size(sse.event_message(m["data"]["event"])) for m in whole[:2])
    _, msgs = window(host, run, w=sse.Window(wait_ms=0, max_bytes=two))
    assert [int(m["id"]) for m in msgs if "id" in m] == events[:2] and msgs[-1] == {"retry": "0"}


def test_resume_cursor_never_fails_on_odd_digits():
    # str.isdigit() admits "²" and int() refuses more than 4300 digits: both were a 500.
    assert sse.resume_cursor("²", "3") == 3
    assert sse.resume_cursor(None, "9" * 5000) == 0
    assert sse.resume_cursor(" 12 ", None) == 12


def test_a_window_never_serves_a_control_s_uncommitted_line(host, monkeypatch):
    # The local gateway serves requests on threads that share one Host (and its cached views).
    # A control that loses the head race has already fed its line into the cached view; a
    # stream reading that view at the same moment served it: a phantom id, then a gap.
    import threading

    from threads_aws.core.errors import LogError

    run = start(host)
    real_append, real_load = host.store.append, host._load
    lost = {"n": 0}

    def racing(*a, **kw):
        if not lost["n"]:
            lost["n"] = 1
            raise LogError("seq_conflict", 3, "head moved")
        return real_append(*a, **kw)

    monkeypatch.setattr(host.store, "append", racing)
    control = threading.Thread(target=host.cancel, args=(ALICE, run["thread_id"], None))

    loads = []

    def load_then_race(rec):
        view = real_load(rec)
        loads.append(rec)
        if len(loads) == 2:  # run_start's load, then the window's read
            control.start()
            control.join(0.3)  # a stream holding the host lock keeps the control waiting
        return view

    monkeypatch.setattr(host, "_load", load_then_race)
    _, msgs = window(host, run)
    control.join()
    committed = {e["seq"]: e["event_id"] for e in host.writer.load(run["branch_id"]).fold.events}
    served = [m["data"]["event"] for m in msgs if m.get("data", {}).get("kind") == "event"]
    assert all(committed.get(e["seq"]) == e["event_id"] for e in served)


def test_a_window_carries_retry_wait_while_a_retry_waits(host):
    import time

    run = start(host)
    (req,) = append(
        host,
        run["branch_id"],
        (
            "model_request",
            {
                "attempt": 1,
                "request_ref": {"bytes": 10, "media_type": "application/x-ndjson", "sha256": "0" * 64},
                "declared_prefix": {"bytes": 5, "sha256": "0" * 64},
            },
        ),
    )
    rid = str(req.event_id)
    until = time.time_ns() // 1_000_000 + 60_000
    append(
        host,
        run["branch_id"],
        (
            "model_attempt_abandoned",
            {"provider_outcome": "failed", "reason": "rate_limited", "request_event_id": rid},
        ),
        (
            "retry_scheduled",
            {"request_event_id": rid, "delay_ms": 60_000, "not_before": until, "basis": "backoff"},
        ),
    )
    _, msgs = window(host, run)
    status = [m for m in msgs if m.get("data", {}).get("kind") == "status"]
    assert status == [{"data": {"kind": "status", "status": "retry_wait", "until": until}}]  # once, no id
    assert msgs[-1] == {"retry": "1500"}
    # a wait that is over (or a newer request) sends none
    assert sse.retry_wait([{"seq": 2, "type": "user_input"}], 2) is None
    events = [
        {"seq": 2, "type": "user_input"},
        {"seq": 3, "type": "retry_scheduled", "data": {"not_before": 5}},
        {"seq": 4, "type": "model_request"},
    ]
    assert sse.retry_wait(events, 2) is None and sse.retry_wait(events[:2], 2) == 5


@needs  # the craze seed schema
@pytest.mark.parametrize("fmt", ["craze", "ag-ui"])
def test_format_windows_map_the_run_and_resume_by_the_mapper_s_ids(host, fmt):
    from helpers.streams import AgUiVerifier, check_agui_event, craze_validator
    from threads_aws.host import sse_formats

    def fwindow(run, raw=None, w=NOW):
        body = sse_formats.subscribe(
            host, ALICE, run["thread_id"], run["run_id"], fmt=fmt, raw_cursor=raw, window=w
        )
        return sse.parse_messages(body)

    run = start(host)
    running = fwindow(run)
    assert running[-1] == {"retry": "1500"}  # still running: reconnect
    park_on_approval(host, run)
    whole = fwindow(run)
    assert "retry" not in whole[-1]  # parked: the end of this stream (no result message here)
    data = [m["data"] for m in whole]
    if fmt == "craze":
        v = craze_validator()
        assert all(not list(v.iter_errors(d)) for d in data)
        assert data[0]["type"] == "turn" and any(d["type"] == "permission" for d in data)
    else:
        verifier = AgUiVerifier()
        for d in data:
            check_agui_event(d)
            verifier.feed(d)
    ids = [m["id"] for m in whole if "id" in m]
    assert len(ids) == len(set(ids))
    # resumed at each id: exactly what followed it (AG-UI re-opens the run first: its preamble)
    for i, m in enumerate(whole):
        if "id" not in m:
            continue
        rest = [x["data"] for x in fwindow(run, m["id"]) if "data" in x]
        tail = [x["data"] for x in whole[i + 1 :]]
        if fmt == "craze":
            assert rest == tail
        else:
            assert rest[len(rest) - len(tail) :] == tail
    # a window of one byte still carries an output with an id, and says come back at once
    small = fwindow(run, None, sse.Window(wait_ms=0, poll_ms=50, retry_ms=1500, max_bytes=1))
    assert small[-1] == {"retry": "0"} and "id" in small[-2]
