"""Inbox order on moto (store/inbox.py): two batches of one conversation received in the same
millisecond stay apart, each in its own item order, in the thread's pending index and in
`all_rows` (the order key is received_at#batch_id#index; an index before the batch id would
interleave them: a1 b1 a2 b2 ...). The intake case that found it lives in ../shared only."""

from __future__ import annotations

from threads_aws.channels.accept import accept
from threads_aws.channels.installations import Installation
from threads_aws.channels.intake import Received
from threads_aws.channels.model import Delivery, HttpResponse, InboxItem

NOW_MS = 1_790_000_000_000
INST = Installation(channel="slack", provider="slack", installation_id="T1", tenant="acme", agent="demo")


def batch(delivery_id: str, texts: list[str]) -> Received:
    items = tuple(
        InboxItem(
            installation_id="T1",
            delivery_id=delivery_id,
            item_key=f"{delivery_id}#{i}",
            conversation="C1",
            sender="U1",
            kind="message",
            text=text,
        )
        for i, text in enumerate(texts)
    )
    delivery = Delivery(delivery_id=delivery_id, items=items, installation_ids=("T1",))
    return Received(HttpResponse(200), delivery, tuple((INST, it) for it in items))


def test_two_batches_in_one_millisecond_keep_their_own_order(aws):
    svc = aws.services()
    first = ["a1", "a2", "a3", "a4"]
    second = ["b1", "b2", "b3", "b4"]
    accepted = []
    for delivery_id, texts in (("Ev1", first), ("Ev2", second)):
        accepted.append(
            accept(
                batch(delivery_id, texts),
                stores=svc.stores,
                writer=svc.writer,
                agents=svc.agents,
                queue=None,
                now_ms=NOW_MS,  # both batches in the same millisecond
            )
        )
    assert [len(a.inserted) for a in accepted] == [4, 4]
    (thread_id, _), = accepted[0].threads
    assert accepted[1].threads == accepted[0].threads  # one conversation, one thread
    rows = svc.stores.inbox.all_rows()
    assert {r.received_at for r in rows} == {NOW_MS}
    assert [r.item["text"] for r in rows] == first + second
    pending = svc.stores.inbox.pending(thread_id)
    assert [r.item["text"] for r in pending] == first + second

