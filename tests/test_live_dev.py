"""The live run stream through `threads-aws dev` (a subprocess: moto, the gateway with the
authorizer in front, the stream route served by the same ASGI app as in Lambda through the
adapter emulation, the worker fed by the SQS poller): a demo run's deltas before its
`model_response`; a client that disconnects mid-run and resumes with Last-Event-ID sees no gap
and no duplicate; heartbeats while a run is parked; the craze and AG-UI streams of real runs
(text, a tool, todos, an approval, a question) validate event by event."""

from __future__ import annotations

import http.client
import json
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from helpers.dev_process import ALICE, DevProcess, dev_process
from helpers.shared import needs

WORDS = " ".join(f"w{i}" for i in range(40))


@dataclass
class Msg:
    at: float
    id: str | None = None
    data: Any = None
    retry: str | None = None
    comment: str | None = None


def sse(
    dev: DevProcess,
    thread_id: str,
    run_id: str,
    *,
    query: str = "",
    last_id: str | None = None,
    until: Callable[[list[Msg]], bool] = lambda m: False,
    timeout: float = 30,
    then: Callable[[list[Msg]], None] | None = None,
) -> list[Msg]:
    """Read the run's stream; disconnect as soon as `until(messages)` holds. `then(messages)` runs
    after each message (the test acts while the stream is open)."""
    url = urllib.parse.urlsplit(dev.url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)
    headers = {"Authorization": f"Bearer {ALICE}"}
    if last_id is not None:
        headers["Last-Event-ID"] = last_id
    path = f"/v1/threads/{thread_id}/runs/{run_id}/events" + (f"?{query}" if query else "")
    started = time.monotonic()
    conn.request("GET", path, headers=headers)
    resp = conn.getresponse()
    assert resp.status == 200, resp.read()
    assert resp.getheader("Content-Type") == "text/event-stream"
    msgs: list[Msg] = []
    cur = Msg(0)
    try:
        while time.monotonic() - started < timeout:
            line = resp.readline()
            if not line:
                break
            text = line.decode().rstrip("\n")
            if text:
                name, _, value = text.partition(":")
                value = value.removeprefix(" ")
                if name == "":
                    cur.comment = value
                elif name == "data":
                    cur.data = json.loads(value)
                else:
                    setattr(cur, name, value)
                continue
            cur.at = time.monotonic() - started
            msgs.append(cur)
            cur = Msg(0)
            if then is not None:
                then(msgs)
            if until(msgs):
                break
    finally:
        conn.close()
    return msgs


def kind(m: Msg) -> str | None:
    if m.data is None:
        return None
    return str(m.data["event"]["type"]) if m.data.get("kind") == "event" else str(m.data.get("kind"))


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevProcess]:
    env = {"THREADS_DEMO_DELTA_MS": "25", "STREAM_HEARTBEAT_MS": "300"}
    with dev_process(tmp_path_factory.mktemp("live"), env=env) as d:
        yield d


def test_a_demo_run_s_deltas_arrive_before_its_model_response(dev):
    run = dev.start_run(WORDS)
    msgs = sse(dev, run["thread_id"], run["run_id"])
    kinds = [kind(m) for m in msgs if m.data]
    assert kinds[-1] == "result" and msgs[-1].data["result"]["status"] == "completed"
    deltas = [m for m in msgs if kind(m) == "delta"]
    response = next(m for m in msgs if kind(m) == "model_response")
    assert len(deltas) >= 3, kinds  # a word every 25 ms, polled every 100 ms
    assert all(m.id is None for m in deltas) and all(m.at <= response.at for m in deltas)
    assert kinds.index("model_request") < kinds.index("delta") < kinds.index("model_response")
    text = "".join(m.data["text"] for m in deltas)
    assert text == response.data["event"]["data"]["content"][0]["text"] == f'You said: "{WORDS}"'


def test_disconnect_mid_run_and_resume_sees_no_gap_and_no_duplicate(dev):
    run = dev.start_run("todo: " + "; ".join(f"step {i}" for i in range(5)))
    first = sse(dev, run["thread_id"], run["run_id"], until=lambda ms: kind(ms[-1]) == "model_request")
    ids = [int(m.id) for m in first if m.id]
    assert first[-1].data["kind"] == "event" and not any(kind(m) == "result" for m in first)
    rest = sse(dev, run["thread_id"], run["run_id"], last_id=str(ids[-1]))
    more = [int(m.id) for m in rest if m.id]
    assert rest[-1].data["kind"] == "result" and rest[-1].id is None
    seen = ids + more
    assert seen == list(range(seen[0], seen[-1] + 1))  # every committed event once, in order
    events = [e for e in dev.timeline(run["thread_id"]) if e["seq"] >= seen[0]]
    assert [e["seq"] for e in events] == seen
    # the request in flight at the disconnect gets no deltas on the new connection
    assert not any(kind(m) == "delta" for m in rest[: [kind(x) for x in rest].index("model_response")])


def test_heartbeats_arrive_while_a_run_is_parked(dev):
    run = dev.start_run("note: buy milk")
    decided: list[str] = []

    def approve_after_pings(msgs: list[Msg]) -> None:
        if sum(m.comment == "ping" for m in msgs) >= 3 and not decided:
            status, pending, _ = dev.call("GET", f"/v1/threads/{run['thread_id']}/approvals")
            assert status == 200 and pending
            cid = pending[0]["challenge_id"]
            status, _, _ = dev.call(
                "POST", f"/v1/threads/{run['thread_id']}/approvals/{cid}", {"decision": "grant"}
            )
            assert status == 200
            decided.append(cid)

    msgs = sse(
        dev,
        run["thread_id"],
        run["run_id"],
        query="through_parks=true",
        then=approve_after_pings,
        until=lambda ms: kind(ms[-1]) == "result",
    )
    kinds = [kind(m) for m in msgs]
    parked = kinds.index("parked")
    pings = [i for i, m in enumerate(msgs) if m.comment == "ping"]
    assert len([i for i in pings if i > parked]) >= 3  # while parked (a slow machine may ping before)
    assert "approval_granted" in kinds and msgs[-1].data["result"]["status"] == "completed"
    # without through_parks a park is the result, as the contract has it
    again = dev.start_run("note: sell the car")
    plain = sse(dev, again["thread_id"], again["run_id"], until=lambda ms: kind(ms[-1]) == "result")
    assert plain[-1].data["result"]["status"] == "parked"


def _answer_or_approve(dev: DevProcess, run: dict[str, str]) -> Callable[[list[Msg]], None]:
    done: set[int] = set()

    def act(msgs: list[Msg]) -> None:
        m = msgs[-1]
        if m.data is None or m.id is None or int(m.id.split(".")[0]) in done:
            return
        t = m.data.get("type")
        seq = int(m.id.split(".")[0])
        interrupt = t == "RUN_FINISHED" and m.data.get("outcome", {}).get("type") == "interrupt"
        if t == "permission" or interrupt:
            done.add(seq)
            _, pending, _ = dev.call("GET", f"/v1/threads/{run['thread_id']}/approvals")
            for p in pending:
                path = f"/v1/threads/{run['thread_id']}/approvals/{p['challenge_id']}"
                dev.call("POST", path, {"decision": "grant"})
        if t == "question" or interrupt:
            done.add(seq)
            events = dev.timeline(run["thread_id"])
            parked = [e for e in events if e["type"] == "parked" and e["data"]["address"]["kind"] == "input"]
            for p in parked:
                dev.call(
                    "POST",
                    f"/v1/threads/{run['thread_id']}/questions/{p['data']['address']['id']}/answer",
                    {"answer": "blue"},
                )

    return act


PROMPTS = ["hello there", "time", "todo: wash; dry", "note: buy milk", "ask: which colour?"]


@needs  # the craze seed schema
@pytest.mark.parametrize("prompt", PROMPTS)
def test_the_craze_and_ag_ui_streams_of_real_runs_validate_event_by_event(dev, prompt):
    from helpers.streams import (
        AgUiVerifier,
        assert_asks_paired,
        assert_tool_rows,
        check_agui_event,
        craze_validator,
    )

    v = craze_validator()
    for fmt in ("craze", "ag-ui"):
        run = dev.start_run(prompt)
        msgs = sse(
            dev,
            run["thread_id"],
            run["run_id"],
            query=f"format={fmt}&through_parks=true",  # the stream ends when the run does
            then=_answer_or_approve(dev, run),
        )
        data = [m.data for m in msgs if m.data is not None]
        if fmt == "craze":
            for d in data:
                assert not sorted(v.iter_errors(d), key=str), d
                assert next(iter(d)) == "type"
            assert data[0]["type"] == "turn" and data[0]["turn"]["phase"] == "started"
            assert data[-1] == {**data[-1], "type": "turn"} and data[-1]["turn"]["phase"] == "ended"
            assert any(d["type"] == "done" for d in data)
            assert_asks_paired(data)
            assert_tool_rows(data)
        else:
            verifier = AgUiVerifier()
            for d in data:
                check_agui_event(d)
                verifier.feed(d)
            assert data[0]["type"] == "RUN_STARTED" and data[-1]["type"] == "RUN_FINISHED"
        ids = [m.id for m in msgs if m.id]
        assert len(ids) == len(set(ids))
