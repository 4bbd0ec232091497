"""Token deltas from worker to stream: the delta row kind (store/deltas.py) on moto, the worker's
publisher (engine/deltas.py), and the engine wiring: a demo run's streamed words end up in its
request's row, written before the response commits."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from helpers.engine import make_ctx, new_thread, say
from helpers.engine import run as advance
from threads_aws.engine.deltas import DeltaPublisher
from threads_aws.store.deltas import TAIL_BYTES, DeltaRow, DeltaRows, delta_key, tail


def rows(aws: Any) -> DeltaRows:
    store = aws.stores().deltas
    assert isinstance(store, DeltaRows)
    return store


def test_tail_keeps_whole_code_points_within_the_byte_limit():
    assert tail("hello") == ("hello", 0)
    text = "é" * 2000  # 2 bytes each
    piece, at = tail(text)
    assert len(piece.encode()) <= TAIL_BYTES and piece == text[at:] and at == 2000 - TAIL_BYTES // 2
    odd = "a" + "€" * 1000  # 3 bytes each: a cut through a code point drops it whole
    piece, at = tail(odd)
    assert piece == odd[at:] and len(piece.encode()) <= TAIL_BYTES and len(piece.encode()) > TAIL_BYTES - 3


def test_a_row_round_trips_with_the_head_in_one_read_and_never_goes_back(aws):
    ctx = make_ctx(aws)
    branch = new_thread(ctx)
    store = rows(aws)
    assert store.put(DeltaRow(branch, "r1", "Hel", 0, "", 0, 1, 1_000))
    assert store.put(DeltaRow(branch, "r1", "Hello", 0, "hm", 0, 3, 2_000))
    assert not store.put(DeltaRow(branch, "r1", "He", 0, "", 0, 2, 3_000))  # older: refused
    head, got = store.head_and_rows(branch, ["r1", "r2"])
    assert head is not None and head.branch_id == branch and head.head_seq >= 1
    assert set(got) == {"r1"}
    row = got["r1"]
    assert (row.text, row.text_at, row.thinking, row.version) == ("Hello", 0, "hm", 3)
    item = aws.ddb.get_item(TableName=aws.resources.state_table, Key=delta_key(branch, "r1"))["Item"]
    assert int(item["ttl"]["N"]) == 2 + 3600  # DynamoDB's TTL deletes it an hour after the last write


def test_a_big_row_stays_one_read_unit(aws):
    from threads_aws.store.deltas import tail as cut

    text, at = cut("x" * 50_000)
    thinking, tat = cut("y" * 50_000)
    row = DeltaRow("b" * 36, "r" * 36, text, at, thinking, tat, 7, 1_700_000_000_000)
    size = sum(len(k) + len(next(iter(v.values()))) for k, v in row.item(3600).items())
    assert size < 4096


class Recording:
    def __init__(self, fail: int = 0) -> None:
        self.rows: list[tuple[float, DeltaRow]] = []
        self.fail = fail
        self.lock = threading.Lock()

    def put(self, row: DeltaRow) -> bool:
        with self.lock:
            if self.fail:
                self.fail -= 1
                raise RuntimeError("throttled")
            self.rows.append((time.monotonic(), row))
        return True


def test_the_publisher_writes_at_most_once_per_interval_and_the_rest_on_close():
    store = Recording()
    pub = DeltaPublisher(store, "b", "r", interval_ms=50)
    started = time.monotonic()
    for i in range(40):
        pub("text", f"w{i} ")
        time.sleep(0.005)
    pub("thinking", "hmm")
    pub.close()
    times = [t for t, _ in store.rows][:-1]  # the flusher's; close() writes the rest at once
    assert len(times) >= 2 and all(b - a >= 0.045 for a, b in zip(times, times[1:], strict=False))
    assert len(times) <= (time.monotonic() - started) / 0.05 + 2
    last = store.rows[-1][1]
    assert last.text == "".join(f"w{i} " for i in range(40)) and last.thinking == "hmm"
    assert [r.version for _, r in store.rows] == list(range(1, len(store.rows) + 1))
    pub("text", "late")  # after close: ignored
    assert store.rows[-1][1] is last


def test_a_pause_in_the_stream_still_flushes_within_the_interval():
    store = Recording()
    pub = DeltaPublisher(store, "b", "r", interval_ms=50)
    pub("text", "Let me check")
    time.sleep(0.2)  # the model writes a tool call: no text for a while
    assert store.rows and store.rows[-1][1].text == "Let me check"
    pub.close()


def test_a_failed_write_is_carried_by_the_next_and_never_raises():
    store = Recording(fail=1)
    pub = DeltaPublisher(store, "b", "r", threaded=False)
    pub("text", "a")
    assert pub.flush() is False
    pub("text", "b")
    pub.close()
    assert store.rows[-1][1].text == "ab"
    DeltaPublisher(None, "b", "r")("text", "nothing")  # no store: a no-op


@pytest.mark.parametrize("pause", ["0", "5"])
def test_a_demo_run_streams_its_words_into_the_row_before_the_response(aws, monkeypatch, pause):
    monkeypatch.setenv("THREADS_DEMO_DELTA_MS", pause)
    ctx = make_ctx(aws)
    branch = new_thread(ctx)
    say(ctx, branch, "the quick brown fox")
    written: list[int] = []
    store = ctx.stores.deltas
    real_put = store.put

    class Watch:  # records the head at every row write: the response must not be in it yet
        def put(self, row: DeltaRow) -> bool:
            written.append(ctx.store.head(branch).head_seq)
            return real_put(row)

        def head_and_rows(self, *a: Any) -> Any:
            return store.head_and_rows(*a)

    from dataclasses import replace

    ctx.stores = replace(ctx.stores, deltas=Watch())
    assert advance(ctx, branch).state == "idle"
    events = ctx.writer.load(branch).fold.events
    req = next(e for e in events if e["type"] == "model_request")
    resp = next(e for e in events if e["type"] == "model_response")
    _, got = store.head_and_rows(branch, [req["event_id"]])
    answer = resp["data"]["content"][0]["text"]
    assert got[req["event_id"]].text == answer == 'You said: "the quick brown fox"'
    assert written and max(written) < resp["seq"]
