"""The run stream's ASGI app (host/stream_app.py over host/live.py), driven directly as uvicorn
drives it behind the Lambda Web Adapter: the authorizer's context in `x-amzn-request-context`,
the deadline in `x-amzn-lambda-context`, the response as ASGI messages with arrival times, a
client disconnect as `http.disconnect`. AWS is moto; the worker is the real engine."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from helpers.engine import make_ctx
from helpers.engine import run as advance
from helpers.host import ALICE, MALLORY, append, make_host, park_on_approval, start
from helpers.shared import needs
from threads_aws.core.canonical import new_uuid7
from threads_aws.host.live import LiveSettings
from threads_aws.host.principal import Principal
from threads_aws.host.stream_app import StreamApp
from threads_aws.store.deltas import DeltaRow

FAST = LiveSettings(poll_ms=20, idle_poll_ms=20, heartbeat_ms=60_000, retry_ms=700)


def sse_message_validator(served: bool = True) -> Any:
    """The served contract's SseMessage (ours: a delta's `offset`, `thinking`), or the user's."""
    import jsonschema
    from threads_aws.host.runtime import openapi

    path = Path(__file__).resolve().parents[1] / "schemas" / "openapi.json"
    doc = json.loads(openapi()["body"]) if served else json.loads(path.read_text())
    root = {"$ref": "#/components/schemas/SseMessage", "components": doc["components"]}
    return jsonschema.Draft202012Validator(root)


@dataclass
class Msg:
    at: float
    id: str | None = None
    data: Any = None
    retry: str | None = None
    comment: str | None = None


@dataclass
class Got:
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    chunks: list[tuple[float, bytes]] = field(default_factory=list)
    complete: bool = False

    @property
    def body(self) -> bytes:
        return b"".join(c for _, c in self.chunks)

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def messages(self) -> list[Msg]:
        out: list[Msg] = []
        pending = b""
        for at, chunk in self.chunks:
            pending += chunk
            *blocks, pending = pending.split(b"\n\n")
            for block in blocks:
                m = Msg(at)
                for line in block.decode().split("\n"):
                    name, _, value = line.partition(":")
                    value = value.removeprefix(" ")
                    if name == "":
                        m.comment = value
                    elif name == "data":
                        m.data = json.loads(value)
                    elif name in ("id", "retry"):
                        setattr(m, name, value)
                out.append(m)
        return out

    def data(self) -> list[Any]:
        return [m.data for m in self.messages if m.data is not None]


def who(principal: Principal) -> str:
    auth = {"principalId": principal.key, **principal.as_dict(), "integrationLatency": 0}
    return json.dumps({"requestId": new_uuid7(), "stage": "dev", "authorizer": auth})


def call(
    app: StreamApp,
    path: str,
    *,
    query: str = "",
    headers: dict[str, str] | None = None,
    principal: Principal | None = ALICE,
    deadline_ms: int | None = None,
    stop: Callable[[Got], bool] = lambda g: False,
    timeout: float = 15.0,
) -> Got:
    """One GET through the app; the client disconnects when `stop(got)` holds (or at timeout)."""
    got = Got()
    hdrs = dict(headers or {})
    if principal is not None:
        hdrs["x-amzn-request-context"] = who(principal)
    if deadline_ms is not None:
        hdrs["x-amzn-lambda-context"] = json.dumps({"request_id": "r", "deadline": deadline_ms})
    scope = {
        "type": "http",
        "method": "GET",
        "path": path,
        "query_string": query.encode(),
        "headers": [(k.lower().encode(), v.encode()) for k, v in hdrs.items()],
    }

    async def main() -> None:
        gone = asyncio.Event()
        first = True

        async def receive() -> dict[str, Any]:
            nonlocal first
            if first:
                first = False
                return {"type": "http.request", "body": b"", "more_body": False}
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                got.status = message["status"]
                got.headers = {k.decode().lower(): v.decode() for k, v in message["headers"]}
            elif message["type"] == "http.response.body":
                if message.get("body"):
                    got.chunks.append((time.monotonic(), message["body"]))
                if not message.get("more_body"):
                    got.complete = True
                if stop(got):
                    gone.set()

        task = asyncio.ensure_future(app(scope, receive, send))
        deadline = time.monotonic() + timeout
        while not task.done() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        gone.set()
        await asyncio.wait_for(task, 10)

    asyncio.run(main())
    return got


def events_path(run: dict[str, str]) -> str:
    return f"/v1/threads/{run['thread_id']}/runs/{run['run_id']}/events"


@pytest.fixture
def host(aws):
    return make_host(aws)


@pytest.fixture
def app(host):
    return StreamApp(lambda: host, lambda: FAST)


def demo_run(host, text: str) -> dict[str, str]:
    return host.start_run(ALICE, {"agent": "demo", "input": text}, new_uuid7())


def in_background(fn: Callable[[], Any], delay: float = 0.2) -> threading.Thread:
    def go() -> None:
        time.sleep(delay)
        fn()

    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t


# ---------------------------------------------------------------- before the stream


def test_failures_are_the_route_s_json_errors(app, host):
    run = start(host)
    got = call(app, events_path(run), principal=None)
    assert got.status == 401 and got.json()["error"]["code"] == "unauthenticated"
    got = call(app, events_path(run), principal=MALLORY)  # another tenant's thread
    assert got.status == 404 and got.json()["error"]["code"] == "not_found"
    got = call(app, events_path({**run, "run_id": new_uuid7()}))
    assert got.status == 404
    got = call(app, events_path({**run, "thread_id": "not-a-uuid"}))
    assert got.status == 404
    # A refused parameter is 403 forbidden naming it (the route declares no invalid_request),
    # never 404, which reads as "no such thread".
    got = call(app, events_path(run), query="format=xml")
    assert got.status == 403 and "format" in got.json()["error"]["message"]
    for bad in ("x", "-1", "1.5", "9" * 17, "9007199254740992", "²"):
        got = call(app, events_path(run), query=f"after_seq={bad}")  # the contract's Int
        assert got.status == 403 and "after_seq" in got.json()["error"]["message"], bad
    for name in ("thinking", "through_parks"):  # the contract's booleans (schemathesis: -15604)
        for bad in ("-15604", "yes", "TRUE", ""):
            got = call(app, events_path(run), query=f"{name}={bad}")
            assert got.status == 403 and name in got.json()["error"]["message"], (name, bad)
    got = call(app, events_path(run), query="format=craze&after_seq=3.1")  # a mapper id
    assert got.status == 200
    got = call(app, events_path(run), headers={"Last-Event-ID": "junk"})  # never "from the start"
    assert got.status == 403 and got.json()["error"]["code"] == "forbidden"
    assert "Last-Event-ID" in got.json()["error"]["message"]
    got = call(app, events_path(run), headers={"Last-Event-ID": " 1"})  # SSE's leading space
    assert got.status == 200
    assert call(app, "/").status == 404  # the adapter's readiness check: answered at once


def test_a_settled_run_streams_its_events_then_the_result(app, host, aws):
    run = demo_run(host, "hello")
    assert advance(make_ctx(aws), run["branch_id"]).state == "idle"
    got = call(app, events_path(run))
    assert got.status == 200 and got.complete
    assert got.headers["content-type"] == "text/event-stream" and got.headers["cache-control"] == "no-cache"
    msgs = got.messages
    assert msgs[0].retry == "700"  # the reconnect delay, first
    events = [m for m in msgs if m.data and m.data["kind"] == "event"]
    assert [int(m.id) for m in events] == [m.data["event"]["seq"] for m in events]
    assert events[0].data["event"]["event_id"] == run["run_id"]
    assert msgs[-1].data["kind"] == "result" and msgs[-1].id is None
    assert msgs[-1].data["result"]["status"] == "completed"
    # Resume: Last-Event-ID wins over after_seq; nothing at or before it comes again.
    cut = int(events[1].id)
    again = call(app, events_path(run), query="after_seq=0", headers={"Last-Event-ID": str(cut)})
    ids = [int(m.id) for m in again.messages if m.id]
    assert ids == [int(m.id) for m in events if int(m.id) > cut]
    assert again.data()[-1]["kind"] == "result"


# ---------------------------------------------------------------- live


def test_deltas_arrive_before_the_response_in_order_and_without_ids(app, host, aws, monkeypatch):
    monkeypatch.setenv("THREADS_DEMO_DELTA_MS", "15")
    words = " ".join(f"word{i}" for i in range(30))
    run = demo_run(host, words)
    ctx = make_ctx(aws)
    worker = in_background(lambda: advance(ctx, run["branch_id"]))
    got = call(app, events_path(run))
    worker.join()
    msgs = [m for m in got.messages if m.data]
    kinds = [m.data["kind"] if m.data["kind"] != "event" else m.data["event"]["type"] for m in msgs]
    first_delta, response = kinds.index("delta"), kinds.index("model_response")
    assert kinds.index("model_request") < first_delta < response
    deltas = [m for m in msgs if m.data["kind"] == "delta"]
    assert len(deltas) > 1 and all(m.id is None for m in deltas)
    offset = 0
    for m in deltas:  # contiguous: each chunk starts where the last ended
        assert m.data["offset"] == offset and set(m.data) == {"kind", "request_event_id", "text", "offset"}
        offset += len(m.data["text"])
    served, users = sse_message_validator(), sse_message_validator(served=False)
    for m in msgs:  # every message is the contract's SseMessage, a delta with our add-only extras
        assert not list(served.iter_errors(m.data)), m.data
        if m.data["kind"] != "delta":
            assert not list(users.iter_errors(m.data)), m.data
        else:
            assert not list(users.iter_errors({k: v for k, v in m.data.items() if k != "offset"}))
    text = "".join(m.data["text"] for m in deltas)
    committed = msgs[response].data["event"]["data"]["content"][0]["text"]
    assert committed.startswith(text) and text == committed  # the final write precedes the commit
    assert all(kinds.index("delta") < response for _ in deltas) and kinds[-1] == "result"


def row(branch: str, rid: str, text: str = "", at: int = 0, thinking: str = "", version: int = 1) -> DeltaRow:
    return DeltaRow(branch, rid, text, at, thinking, 0, version, 1)


def open_request(host, run) -> str:
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
    return str(req.event_id)


def test_reasoning_goes_out_only_when_asked_and_a_gap_stops_a_request_s_deltas(app, host, aws):
    run = start(host)
    rid = open_request(host, run)
    deltas = aws.stores().deltas
    b = run["branch_id"]

    def stream(query: str, v: int) -> list[tuple[str, bool, int]]:
        """The worker writes its next state each time the stream has shown the last one."""
        states = [
            row(b, rid, "Hello", thinking="Let me think", version=v),
            row(b, rid, "Hello wor", thinking="Let me think.", version=v + 1),
            # the text's tail moved past what the stream showed: no more text deltas for it
            row(b, rid, "XYZ", at=50, thinking="Let me think.!", version=v + 2),
        ]
        deltas.put(states.pop(0))

        def on_send(g: Got) -> bool:
            if states and any(d["kind"] == "delta" and d["text"].endswith(("o", "r")) for d in g.data()[-2:]):
                deltas.put(states.pop(0))
            return False

        # The stream runs to the timeout (on_send never stops it): long enough for three delta
        # polls on a loaded machine (1 s was not, once, in CI).
        got = call(app, events_path(run), query=query, stop=on_send, timeout=3.0)
        assert all(d["request_event_id"] == rid for d in got.data() if d["kind"] == "delta")
        ds = [d for d in got.data() if d["kind"] == "delta"]
        return [(d["text"], d.get("thinking", False), d["offset"]) for d in ds]

    assert stream("", 10) == [("Hello", False, 0), (" wor", False, 5)]
    assert stream("thinking=true", 20) == [
        ("Hello", False, 0),
        ("Let me think", True, 0),
        (" wor", False, 5),
        (".", True, 12),
        ("!", True, 13),
    ]


def test_a_resumed_stream_never_replays_a_delta_of_a_request_it_knew(app, host, aws):
    run = start(host)
    rid = open_request(host, run)
    aws.stores().deltas.put(row(run["branch_id"], rid, "Hello"))
    head = aws.stores().events.head(run["branch_id"]).head_seq
    fresh = call(app, events_path(run), timeout=2.0)
    assert [d["text"] for d in fresh.data() if d["kind"] == "delta"] == ["Hello"]
    resumed = call(app, events_path(run), headers={"Last-Event-ID": str(head)}, timeout=2.0)
    assert [d for d in resumed.data() if d["kind"] == "delta"] == []
    before = call(app, events_path(run), headers={"Last-Event-ID": str(head - 1)}, timeout=2.0)
    assert [d["text"] for d in before.data() if d["kind"] == "delta"] == ["Hello"]  # it never saw it


def test_heartbeats_while_quiet_and_while_parked_through_parks(host, aws):
    app = StreamApp(lambda: host, lambda: LiveSettings(poll_ms=20, idle_poll_ms=20, heartbeat_ms=150))

    def pings(g: Got) -> int:
        return sum(m.comment == "ping" for m in g.messages)

    run = start(host)  # running, and no worker: nothing happens
    got = call(app, events_path(run), stop=lambda g: pings(g) >= 3, timeout=10)
    assert pings(got) >= 3 and not any(d["kind"] == "result" for d in got.data())
    gaps = [b[0] - a[0] for a, b in zip(got.chunks[1:], got.chunks[2:], strict=False)]
    assert all(g >= 0.1 for g in gaps)  # one per heartbeat interval, not per tick
    park_on_approval(host, run)
    got = call(app, events_path(run), timeout=5)  # a park is the result...
    assert got.data()[-1]["result"]["status"] == "parked" and got.complete
    got = call(app, events_path(run), query="through_parks=true", stop=lambda g: pings(g) >= 3, timeout=10)
    assert pings(got) >= 3 and not any(d["kind"] == "result" for d in got.data())  # ...unless asked


def test_the_stream_ends_before_the_deadline_with_a_retry(app, host):
    run = start(host)
    now = time.time_ns() // 1_000_000
    started = time.monotonic()
    got = call(app, events_path(run), deadline_ms=now + 10_000 + 300)  # margin 10 s: 0.3 s left
    assert got.complete and time.monotonic() - started < 3
    assert got.messages[-1].retry == "700" and not any(d["kind"] == "result" for d in got.data())


def test_a_disconnect_stops_the_subscription(app, host):
    run = start(host)
    started = time.monotonic()
    got = call(app, events_path(run), stop=lambda g: len(g.chunks) >= 2, timeout=5)
    # the app returned (its subscription thread joined) right after the disconnect
    assert time.monotonic() - started < 2 and len(got.chunks) >= 2
    assert threading.active_count() < 50 and not [t for t in threading.enumerate() if t.name == "run-stream"]


def test_retry_wait_status_while_a_retry_waits(app, host):
    run = start(host)
    rid = open_request(host, run)
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
    got = call(app, events_path(run), timeout=2.0)
    status = [m for m in got.messages if m.data and m.data["kind"] == "status"]
    wanted = {"kind": "status", "status": "retry_wait", "until": until}
    assert [(m.data, m.id) for m in status] == [(wanted, None)]


# ---------------------------------------------------------------- formats


@needs  # the craze seed schema
def test_craze_and_ag_ui_streams_validate_and_resume_at_every_cursor(app, host, aws):
    from helpers.streams import check_agui_event, craze_validator

    run = demo_run(host, "todo: wash; dry")
    ctx = make_ctx(aws)
    assert advance(ctx, run["branch_id"]).state == "idle"
    v = craze_validator()
    for fmt in ("craze", "ag-ui"):
        whole = call(app, events_path(run), query=f"format={fmt}")
        msgs = [m for m in whole.messages if m.data is not None]
        for m in msgs:
            if fmt == "craze":
                assert not list(v.iter_errors(m.data)), m.data
            else:
                check_agui_event(m.data)
        ids = [m.id for m in msgs if m.id]
        assert len(ids) > 3
        for k, cursor in enumerate(ids):  # resume after each id: exactly the rest, nothing twice
            rest = call(app, events_path(run), query=f"format={fmt}", headers={"Last-Event-ID": cursor})
            tail = [m.data for m in rest.messages if m.data is not None]
            after = [m.data for m in msgs[[m.id for m in msgs].index(cursor) + 1 :]]
            if fmt == "craze":
                assert tail == after, (cursor, k)
            else:  # AG-UI re-opens the run a new connection must start with
                assert tail[len(tail) - len(after) :] == after, (cursor, k)
                assert not after or tail[0]["type"] == "RUN_STARTED"


def test_ag_ui_live_deltas_carry_the_time_each_was_written(app, host, aws, monkeypatch):
    """Issue 18: every live TEXT_MESSAGE_CONTENT carried the model_request's time; the
    subscription now stamps each delta with its row's updated_at and the mapper uses it."""
    monkeypatch.setenv("THREADS_DEMO_DELTA_MS", "15")
    run = demo_run(host, " ".join(f"word{i}" for i in range(30)))
    ctx = make_ctx(aws)
    worker = in_background(lambda: advance(ctx, run["branch_id"]))
    got = call(app, events_path(run), query="format=ag-ui")
    worker.join()
    live = [m.data for m in got.messages if m.data and m.id is None]
    stamps = [d["timestamp"] for d in live if d["type"] == "TEXT_MESSAGE_CONTENT"]
    assert len(stamps) > 1 and stamps == sorted(set(stamps)), stamps  # distinct, in order
