"""threads_aws_client over every route through the local gateway (`threads-aws dev`, real HTTP):
results in the contract's shapes, a typed exception for each error path the host can be driven
into, idempotent replay (the same key, a lost answer retried with it), and the run stream
resuming by itself (short windows; a connection cut mid-window) without a gap or a duplicate.

Transports that lose an answer or cut a stream wrap httpx's real transport: every byte still
comes from the host; they only stand for the network failing."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import httpx
import pytest
from helpers.people_dev import RETRY_MS, people_dev, release
from helpers.shared import needs
from threads_aws_client import (
    AsyncClient,
    Client,
    ConnectionFailed,
    ForbiddenError,
    IdempotencyKeyPrincipalMismatchError,
    IdempotencyKeyReusedError,
    InvalidRequestError,
    InvalidTransitionError,
    NoOpenQuestionError,
    NoSnapshotBoundaryError,
    NotFoundError,
    NotParkedError,
    ThreadsError,
    TooLargeError,
    UnauthenticatedError,
)
from threads_aws_client._streams import id_key
from threads_aws_client.errors import ApprovalDuplicateError
from threads_aws_client.types import OUTCOMES, RunOutcome, Schedule

ALICE = "dev:api:local:alice"
BOB = "dev:api:local:bob"  # same tenant, another principal
MALLORY = "dev:api:other:mallory"  # another tenant


@pytest.fixture(scope="module")
def url() -> str:
    return people_dev().url


@pytest.fixture
def client(url: str) -> Any:
    with Client(url, ALICE) as c:
        yield c


def settle(client: Client, text: str, **kw: Any) -> tuple[Any, RunOutcome]:
    stream = client.run("demo", text, **kw)
    outcome = stream.wait()
    assert set(outcome) == OUTCOMES[outcome["status"]].__required_keys__
    return stream, outcome


def run_events(client: Client, thread_id: str, run_id: str) -> list[int]:
    """The seqs of the run's events in the timeline (from its user_input to the next one)."""
    seqs, inside = [], False
    for entry in client.timeline(thread_id)["entries"]:
        ev = entry["event"]
        if ev["type"] == "user_input":
            inside = ev["event_id"] == run_id
        if inside:
            seqs.append(ev["seq"])
    return seqs


# ------------------------------------------------------------------ every route
def test_a_run_parks_on_approval_and_completes_after_grant(client: Client):
    stream, outcome = settle(client, "note: buy milk")
    assert outcome["status"] == "parked" and outcome["reason"] == "awaiting_approval"
    accepted = stream.accepted
    assert accepted is not None and set(accepted) == {"thread_id", "branch_id", "run_id"}
    (pending,) = client.approvals(stream.thread_id)
    assert pending["challenge_id"] == outcome["pending"][0]["id"]
    assert pending["tool"] == "note" and pending["input"] == {"text": "buy milk"}
    appended = client.approve(
        stream.thread_id, pending["challenge_id"], remember_rule=pending["suggested_rules"][0]
    )
    assert set(appended) == {"event_id"}
    with pytest.raises(ApprovalDuplicateError) as exc:
        client.deny(stream.thread_id, pending["challenge_id"])
    assert exc.value.status == 409 and exc.value.code == "approval_duplicate"
    rest = client.stream(stream.thread_id, stream.run_id, after_seq=stream.cursor)
    types = [m["event"]["type"] for m in rest if m["kind"] == "event"]
    assert rest.result is not None and rest.result["status"] == "completed"
    assert types[:2] == ["approval_granted", "permission_rule_added"] and types[-1] == "turn_completed"
    assert client.approvals(stream.thread_id) == []


def test_ask_answered_and_the_question_errors(client: Client, url: str):
    stream, outcome = settle(client, "ask: tea or coffee?")
    assert outcome["status"] == "parked" and outcome["reason"] == "awaiting_input"
    call_id = outcome["pending"][0]["id"]
    with Client(url, BOB) as bob, pytest.raises(ForbiddenError) as exc:
        bob.answer(stream.thread_id, call_id, "tea")  # only who opened the turn answers
    assert exc.value.status == 403
    with pytest.raises(InvalidRequestError):
        client.answer(stream.thread_id, call_id, [])  # the contract wants at least one
    client.answer(stream.thread_id, call_id, "tea")
    with pytest.raises(NoOpenQuestionError):
        client.answer(stream.thread_id, call_id, "tea")
    rest = client.stream(stream.thread_id, stream.run_id, after_seq=stream.cursor).wait()
    assert rest == {
        "status": "completed",
        "thread_id": stream.thread_id,
        "branch_id": outcome["branch_id"],
        "output": "Done: tea",
    }


def test_reads_settings_mode_cancel_and_fork_errors(client: Client):
    stream, outcome = settle(client, "todo: a; b")
    t = stream.thread_id
    assert outcome["status"] == "completed"
    timeline = client.timeline(t)
    assert timeline["thread_id"] == t and timeline["branch_id"] == outcome["branch_id"]
    entries = timeline["entries"]
    assert [e["event"]["seq"] for e in entries] == list(range(1, len(entries) + 1))
    assert all(set(e) == {"event", "fork_point"} for e in entries)
    assert "todos_updated" in [e["event"]["type"] for e in entries]
    (branch,) = client.branches(t)
    assert branch == {"branch_id": outcome["branch_id"], "mode": "live", "runnable": True}
    assert client.fork_points(t) == []
    with pytest.raises(NoSnapshotBoundaryError):
        client.fork(t, entries[2]["event"]["event_id"])
    with pytest.raises(InvalidTransitionError):
        client.set_mode(t, "bypass")  # the demo agent does not allow bypass
    with pytest.raises(InvalidRequestError):
        client.set_mode(t, "sideways")
    mode = client.set_mode(t, "plan")
    assert set(mode) == {"event_id"}
    with pytest.raises(InvalidTransitionError):  # rule 18: not in the agent's models
        client.set_model(t, {"provider": "demo", "name": "not-in-the-agent"})
    model = client.set_model(t, {"provider": "demo", "name": "demo-1"})
    assert set(model) == {"event_id"}
    with pytest.raises(NotParkedError):
        client.resolve_parked(t, f"{outcome['branch_id']}:call_x", "assume_done")
    recorded = {e["event"]["event_id"]: e["event"]["type"] for e in client.timeline(t)["entries"]}
    assert (recorded[mode["event_id"]], recorded[model["event_id"]]) == ("mode_changed", "settings_changed")
    before = client.timeline(t)["entries"]
    appended = client.cancel(t)  # the run completed: a no-op answer naming the last event
    assert appended == {"event_id": before[-1]["event"]["event_id"]}
    assert client.timeline(t)["entries"] == before


def test_timeline_pages_follow_link_next(client: Client):
    _, outcome = settle(client, "todo: a; b; c")
    t = outcome["thread_id"]
    whole = client.timeline(t)
    pages = list(client.timeline_pages(t, limit=3))
    assert len(pages) == -(-len(whole["entries"]) // 3) and all(len(p["entries"]) <= 3 for p in pages)
    assert client.timeline(t, limit=3) == whole  # every page, in order, nothing twice
    tail = client.timeline(t, after_seq=5)
    assert [e["event"]["seq"] for e in tail["entries"]] == [e["event"]["seq"] for e in whole["entries"]][5:]


def test_errors_of_auth_tenancy_and_size(client: Client, url: str):
    _, outcome = settle(client, "hello")
    t = outcome["thread_id"]
    with Client(url, "not-a-key") as bad, pytest.raises(UnauthenticatedError) as exc:
        bad.branches(t)
    assert exc.value.status == 401 and exc.value.message
    with Client(url, MALLORY) as mallory, pytest.raises(NotFoundError):
        mallory.timeline(t)  # another tenant's thread does not exist for it
    with pytest.raises(NotFoundError):
        client.approve(t, str(uuid.uuid4()))
    with pytest.raises(NotFoundError):
        client.start_run("no-such-agent", "hello")
    with pytest.raises(InvalidRequestError):
        client.start_run("", "hello")
    with pytest.raises(TooLargeError) as big:
        client.start_run("demo", "x" * (11 * 1024 * 1024))  # over what API Gateway accepts
    assert big.value.status == 413 and big.value.idempotency_key  # kept for a retry
    with pytest.raises(InvalidRequestError):
        client.threads(limit=0)
    with pytest.raises(NotFoundError), Client(url, MALLORY) as mallory:
        mallory.thread(t)  # another tenant's thread
    assert client.has_operation("listThreads") and client.has_operation("startRun")
    doc = client.openapi()
    assert doc["openapi"].startswith("3.")


def test_every_error_raised_is_typed(client: Client):
    """A typed error is a ThreadsError with the contract's code, message and status."""
    with pytest.raises(ThreadsError) as exc:
        client.answer(str(uuid.uuid4()), "call_x", "a")
    assert (exc.value.code, exc.value.status) == ("not_found", 404)
    assert str(exc.value).startswith("not_found: ")


# ------------------------------------------------------------------ idempotency
def test_idempotent_replay_and_refusals(client: Client, url: str):
    key = f"people-{uuid.uuid4()}"
    first = client.start_run("demo", "hello", idempotency_key=key)
    assert client.start_run("demo", "hello", idempotency_key=key) == first  # replayed, nothing new
    with pytest.raises(IdempotencyKeyReusedError) as reused:
        client.start_run("demo", "hello again", idempotency_key=key)
    assert reused.value.idempotency_key == key
    with Client(url, BOB) as bob, pytest.raises(IdempotencyKeyPrincipalMismatchError):
        bob.start_run("demo", "hello", idempotency_key=key)
    runs = [e for e in client.timeline(first["thread_id"])["entries"] if e["event"]["type"] == "user_input"]
    assert [e["event"]["event_id"] for e in runs] == [first["run_id"]]


class LoseFirstStart(httpx.BaseTransport):
    """Delivers the first POST /v1/runs to the host, then drops its answer (a broken connection)."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.keys: list[str] = []
        self.dropped: list[Any] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        resp = self.inner.handle_request(request)
        if request.method == "POST" and request.url.path == "/v1/runs":
            self.keys.append(request.headers["Idempotency-Key"])
            if not self.dropped:
                resp.read()
                self.dropped.append(httpx.Response(resp.status_code, content=resp.content).json())
                resp.close()
                raise httpx.ReadError("connection reset after the request was sent", request=request)
        return resp

    def close(self) -> None:
        self.inner.close()


def test_a_lost_answer_is_retried_with_the_same_key(url: str):
    transport = LoseFirstStart()
    with Client(url, ALICE, transport=transport) as c:
        accepted = c.start_run("demo", "hello")
        (lost,) = transport.dropped
        assert accepted == lost  # the host replayed the receipt of the first send
        assert len(transport.keys) == 2 and transport.keys[0] == transport.keys[1]
        runs = [e for e in c.timeline(accepted["thread_id"])["entries"] if e["event"]["type"] == "user_input"]
        assert len(runs) == 1


def test_an_unreachable_host_is_connection_failed():
    with socket_closed_port() as port, Client(f"http://127.0.0.1:{port}", ALICE) as c:
        c.retries = type(c.retries)(attempts=1, backoff_s=0.01)
        with pytest.raises(ConnectionFailed) as exc:
            c.start_run("demo", "hello", idempotency_key="k-unreachable")
    assert exc.value.code == "unavailable" and exc.value.status is None
    assert exc.value.idempotency_key == "k-unreachable"


class socket_closed_port:
    def __enter__(self) -> int:
        import socket

        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()  # nothing listens there now
        return self.port

    def __exit__(self, *exc: object) -> None:
        pass


# ------------------------------------------------------------------ the run stream
class Recording(httpx.BaseTransport):
    """Records each subscription: when it was sent, its Last-Event-ID, when its answer ended;
    optionally cuts the first answer after `cut` bytes (a connection lost mid-window)."""

    def __init__(self, cut: int | None = None) -> None:
        self.inner = httpx.HTTPTransport()
        self.cut = cut
        self.subs: list[dict[str, Any]] = []
        self.on_subscribe: Any = lambda n: None

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        resp = self.inner.handle_request(request)
        if not request.url.path.endswith("/events"):
            return resp
        rec = {"sent": time.monotonic(), "last_id": request.headers.get("Last-Event-ID"), "ended": None}
        self.subs.append(rec)
        self.on_subscribe(len(self.subs))
        cut = self.cut if len(self.subs) == 1 else None
        return httpx.Response(
            resp.status_code, headers=resp.headers, stream=_Body(resp, rec, cut), request=request
        )

    def close(self) -> None:
        self.inner.close()


class _Body(httpx.SyncByteStream):
    def __init__(self, resp: httpx.Response, rec: dict[str, Any], cut: int | None) -> None:
        self.resp, self.rec, self.cut = resp, rec, cut

    def __iter__(self) -> Any:
        sent = 0
        for chunk in self.resp.stream:  # type: ignore[union-attr]
            if self.cut is not None and sent + len(chunk) >= self.cut:
                yield chunk[: self.cut - sent]
                raise httpx.ReadError("connection lost mid-window")
            sent += len(chunk)
            yield chunk
        self.rec["ended"] = time.monotonic()

    def close(self) -> None:
        self.resp.close()


def test_stream_follows_windows_with_last_event_id_and_retry(url: str):
    transport = Recording()
    with Client(url, ALICE, transport=transport) as c:
        accepted = c.start_run("demo", "[hold] todo: a; b; c")
        # The model is held: windows end with no new event and `retry:`; the third one releases it.
        transport.on_subscribe = lambda n: n == 3 and release(accepted["branch_id"])
        stream = c.stream(accepted["thread_id"], accepted["run_id"])
        seqs = [m["event"]["seq"] for m in stream if m["kind"] == "event"]
        assert stream.result is not None and stream.result["status"] == "completed"
        assert seqs == run_events(c, stream.thread_id, stream.run_id)  # no gap, no duplicate
    subs = transport.subs
    assert len(subs) >= 3 and stream.connections == len(subs)
    for prev, nxt in zip(subs, subs[1:], strict=False):
        assert nxt["last_id"] is not None and int(nxt["last_id"]) in seqs  # resumes after the last seen
        assert nxt["sent"] - prev["ended"] >= RETRY_MS / 1000 * 0.9  # the server's retry: honoured


def test_stream_resumes_after_a_cut_mid_window_without_gap_or_duplicate(client: Client, url: str):
    stream, outcome = settle(client, "note: cut me")
    (pending,) = client.approvals(stream.thread_id)
    full = run_events(client, stream.thread_id, stream.run_id)
    # Replay the parked run from its start over a connection cut in the middle of its 3rd message.
    body = b"".join(
        client.http.get(f"/v1/threads/{stream.thread_id}/runs/{stream.run_id}/events").iter_bytes()
    )
    # (the live stream opens with a `retry:` frame: count the event messages by their `id:`)
    starts = [i for i in range(len(body)) if body.startswith(b"id: ", i) and (i == 0 or body[i - 1] == 10)]
    cut = starts[3] + 30  # inside the 4th: the 3rd is the last whole one
    transport = Recording(cut=cut)
    with Client(url, ALICE, transport=transport) as c:
        again = c.stream(stream.thread_id, stream.run_id)
        seqs = [m["event"]["seq"] for m in again]  # type: ignore[index]
        assert again.result == outcome
    assert seqs == full
    assert transport.subs[1]["last_id"] == str(full[2])  # resumed after the last whole message
    client.deny(stream.thread_id, pending["challenge_id"])


def test_stream_of_an_unknown_run_is_not_found(client: Client):
    _, outcome = settle(client, "hello")
    with pytest.raises(NotFoundError):
        list(client.stream(outcome["thread_id"], str(uuid.uuid4())))
    with pytest.raises(NotFoundError):
        list(client.stream(outcome["thread_id"], str(uuid.uuid4()), format="craze"))
    with pytest.raises(ValueError):
        client.stream(outcome["thread_id"], str(uuid.uuid4()), format="html")  # type: ignore[call-overload]


LIVE_ONLY = ("text", "thought", "TEXT_MESSAGE_CONTENT", "REASONING_MESSAGE_CONTENT")


def _committed(data: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events that do not depend on how the text streamed (deltas vs. the committed answer)."""
    return [d for d in data if d["type"] not in LIVE_ONLY]


def _text(data: list[dict[str, Any]]) -> str:
    return "".join(
        d.get("text") or d.get("delta") or "" for d in data if d["type"] in ("text", "TEXT_MESSAGE_CONTENT")
    )


@needs  # the craze seed schema
@pytest.mark.parametrize("fmt", ["craze", "ag-ui"])
def test_craze_and_ag_ui_streams_follow_a_run_across_connections(url: str, fmt: str):
    from helpers.streams import AgUiVerifier, assert_tool_rows, check_agui_event, craze_validator

    transport = Recording()
    with Client(url, ALICE, transport=transport) as c:
        accepted = c.start_run("demo", "[hold] todo: a; b; c")
        transport.on_subscribe = lambda n: n == 3 and release(accepted["branch_id"])
        live = c.stream(accepted["thread_id"], accepted["run_id"], format=fmt)  # type: ignore[call-overload]
        data = list(live)
        assert live.ended and live.connections == len(transport.subs) >= 3
        resumed = [id_key(sub["last_id"]) for sub in transport.subs[1:]]
        assert None not in resumed and resumed == sorted(resumed)  # each resumes after the last seen
        # one connection over the settled run: the same committed events, the same answer
        again = c.stream(accepted["thread_id"], accepted["run_id"], format=fmt)  # type: ignore[call-overload]
        replay = list(again)
        assert again.ended and again.last_event_id is not None
    if fmt == "craze":
        v = craze_validator()
        for d in data:
            assert not list(v.iter_errors(d)), d
        assert data[0]["type"] == "turn" and data[0]["turn"]["phase"] == "started"
        assert data[-1]["type"] == "turn" and data[-1]["turn"]["phase"] == "ended"
        assert_tool_rows(data)
        assert _committed(data) == _committed(replay)
    else:
        verifier = AgUiVerifier()
        for d in data:
            check_agui_event(d)
            verifier.feed(d)
        assert data[0]["type"] == "RUN_STARTED" and data[-1]["type"] == "RUN_FINISHED"
        assert _committed(data) == _committed(replay)  # one AG-UI stream: no preamble repeated
    assert _text(data) == _text(replay) != ""


@needs  # the craze seed schema
def test_a_format_stream_ends_at_a_park_unless_through_parks(client: Client):
    stream, outcome = settle(client, "note: park the craze")
    assert outcome["status"] == "parked"
    parked = client.stream(stream.thread_id, stream.run_id, format="craze")
    data = list(parked)
    assert parked.ended and any(d["type"] == "permission" for d in data)
    assert data[-1]["type"] != "turn"  # the turn is still open: the run waits for the decision
    # resuming from the last id sends nothing new, and ends the same way
    tail = client.stream(stream.thread_id, stream.run_id, format="craze", last_event_id=parked.last_event_id)
    assert list(tail) == [] and tail.ended
    (pending,) = client.approvals(stream.thread_id)
    follow = client.stream(
        stream.thread_id,
        stream.run_id,
        format="ag-ui",
        last_event_id=parked.last_event_id,
        through_parks=True,
    )
    client.approve(stream.thread_id, pending["challenge_id"])
    rest = list(follow)
    assert (
        follow.ended
        and rest[-1]["type"] == "RUN_FINISHED"
        and rest[-1].get("outcome", {}).get("type") != "interrupt"
    )


# ------------------------------------------------------------------ asyncio
def test_async_client_over_the_same_routes(url: str):
    async def main() -> None:
        async with AsyncClient(url, ALICE) as c:
            stream = await c.run("demo", "note: async milk")
            events = [m async for m in stream]
            assert stream.result is not None and stream.result["reason"] == "awaiting_approval"
            (pending,) = await c.approvals(stream.thread_id)
            await c.approve(stream.thread_id, pending["challenge_id"])
            rest = c.stream(stream.thread_id, stream.run_id, after_seq=stream.cursor)
            outcome = await rest.wait()
            assert outcome["status"] == "completed" and str(outcome["output"]).startswith("Done: stored note")
            timeline = await c.timeline(stream.thread_id)
            seqs = [e["event"]["seq"] for e in timeline["entries"]]
            assert [m["event"]["seq"] for m in events if m["kind"] == "event"][0] == seqs[1]
            assert (await c.branches(stream.thread_id))[0]["runnable"] is True
            assert await c.fork_points(stream.thread_id) == []
            with pytest.raises(ApprovalDuplicateError):
                await c.approve(stream.thread_id, pending["challenge_id"])
            key = str(uuid.uuid4())
            assert await c.start_run("demo", "hi", idempotency_key=key) == await c.start_run(
                "demo", "hi", idempotency_key=key
            )
            assert set(await c.cancel(stream.thread_id)) == {"event_id"}
            assert set(await c.set_mode(stream.thread_id, "plan")) == {"event_id"}
            with pytest.raises(NotParkedError):
                await c.resolve_parked(stream.thread_id, "k", "assume_not_done")
            with pytest.raises(NoOpenQuestionError):
                await c.answer(stream.thread_id, "call_x", "a")
            assert (await c.openapi())["info"]["title"]

    asyncio.run(main())


def test_steer_and_stop_on_an_open_turn_and_without_one(client: Client):
    stream, outcome = settle(client, "ask: tea or coffee?")
    t = stream.thread_id
    assert outcome["status"] == "parked"  # the turn stays open while it waits for the answer
    steered = client.steer(t, "make it green tea")
    stopped = client.stop(t, "enough for today")
    recorded = {e["event"]["event_id"]: e["event"] for e in client.timeline(t)["entries"]}
    assert recorded[steered["event_id"]]["type"] == "steer"
    assert recorded[steered["event_id"]]["data"]["source"] == "api"
    assert recorded[stopped["event_id"]]["type"] == "stop_when_idle"
    with pytest.raises(ValueError):
        client.steer(t)  # text or content, exactly one
    _, done = settle(client, "hello")
    with pytest.raises(InvalidTransitionError):
        client.steer(done["thread_id"], "too late")  # no open turn to steer
    with pytest.raises(InvalidTransitionError):
        client.stop(done["thread_id"])


def test_schedules_created_listed_and_deleted_tenant_scoped(client: Client, url: str):
    _, done = settle(client, "hello")
    t = done["thread_id"]
    made = client.create_schedule(t, "0 9 * * 1-5", "daily standup", timezone="Europe/Berlin")
    assert set(made) == Schedule.__required_keys__
    assert (made["thread_id"], made["cron"], made["timezone"], made["input"]) == (
        t,
        "0 9 * * 1-5",
        "Europe/Berlin",
        "daily standup",
    )
    assert [s["schedule_id"] for s in client.schedules(t)] == [made["schedule_id"]]
    with pytest.raises(InvalidRequestError):
        client.create_schedule(t, "61 * * * *", "never")  # minute out of range
    with pytest.raises(InvalidRequestError):
        client.create_schedule(t, "0 9 * * *", "x", timezone="Mars/Olympus")
    with Client(url, MALLORY) as mallory:
        with pytest.raises(NotFoundError):
            mallory.schedules(t)  # another tenant's thread is not there
        with pytest.raises(NotFoundError):
            mallory.delete_schedule(t, made["schedule_id"])
    assert client.delete_schedule(t, made["schedule_id"]) == {
        "schedule_id": made["schedule_id"],
        "deleted": True,
    }
    assert client.schedules(t) == []
    with pytest.raises(NotFoundError):
        client.delete_schedule(t, made["schedule_id"])


def test_async_schedules(url: str):
    async def main() -> None:
        async with AsyncClient(url, ALICE) as c:
            stream = await c.run("demo", "hello")
            await stream.wait()
            made = await c.create_schedule(stream.thread_id, "*/5 * * * *", "tick")
            assert made["timezone"] == "UTC"
            assert [s["schedule_id"] for s in await c.schedules(stream.thread_id)] == [made["schedule_id"]]
            assert (await c.delete_schedule(stream.thread_id, made["schedule_id"]))["deleted"] is True

    asyncio.run(main())
# ------------------------------------------------------------------ listing (ours)
def test_threads_listed_newest_first_paged_and_one_thread_detailed(client: Client, url: str):
    tag = uuid.uuid4().hex[:8]
    made = []
    for i in range(3):
        stream, outcome = settle(client, f"{tag} listing {i}")
        assert outcome["status"] == "completed"
        made.append(stream.thread_id)
    mine = [
        t
        for page in client.thread_pages(limit=2)
        for t in page["threads"]
        if t.get("title", "").startswith(tag)
    ]
    assert [t["thread_id"] for t in mine] == made[::-1]
    assert all(t["agent"] == "demo" and t["created_at"] <= t["last_activity_at"] for t in mine)
    first = client.threads(limit=1)
    assert len(first["threads"]) == 1
    detail = client.thread(made[0])
    assert detail["thread_id"] == made[0] and detail["title"] == f"{tag} listing 0"
    assert detail["branches"][0]["branch_id"] == detail["main_branch_id"]
    assert detail["status"] == mine[-1]["status"] == "idle" and detail["open_approvals"] == 0

    async def both() -> tuple[Any, Any]:
        async with AsyncClient(url, ALICE) as ac:
            pages = [p async for p in ac.thread_pages(limit=2)]
            return pages, await ac.thread(made[1])

    pages, adetail = asyncio.run(both())
    assert adetail["thread_id"] == made[1]
    assert made[2] in [t["thread_id"] for p in pages for t in p["threads"]]
