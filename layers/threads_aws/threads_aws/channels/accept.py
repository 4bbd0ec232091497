"""Accept a verified webhook batch (semantics.md §5, Channels, POST steps 2-3): every item into
the inbox, each conversation mapped to its thread, durable BEFORE the ack; then one inbox-queue
wake-up per affected thread.

Transactions:
- every conversation of the batch already routed (the usual case for a live conversation):
  ONE transaction puts all inbox rows (`Inbox.insert_batch`);
- one new conversation (a first message): ONE transaction creates the thread (header,
  `thread_started` of the installation's agent, thread index, the `channel_threads` route) and
  puts every inbox row of the batch, as companions of the branch creation;
- several new conversations in one batch (a WhatsApp batch from several users, rare): each new
  thread is created with its route first (a thread with no items yet is harmless: create-or-get
  finds it on the redelivery), then one transaction puts all inbox rows.
A button press in a conversation no thread has is dropped (it could only be refused). A route
that another webhook created first fails its condition: the winner's row comes back and
its thread is used. A redelivered item fails its row's condition and is dropped from the insert
(a no-op, still acked). Message text never selects a thread or a tenant: only the verified
(tenant, channel, installation, conversation) does.

The wake-ups are sent after the insert, also for a redelivery (the first attempt may have died
between its insert and its send); a failed send raises, so the provider gets a 5xx and redelivers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.canonical import new_uuid7
from ..new_thread import start_thread
from ..store.channel_threads import ChannelRoute
from ..store.inbox import InboxRow, order_key
from ..store.inbox_queue import InboxQueue
from ..store.protocol import Stores
from ..store.records import Companion, CompanionFailed
from ..writer import Writer
from .installations import Installation
from .intake import Received
from .model import InboxItem

# A branch creation takes 5 items + its lines; DynamoDB's transaction limit is 100.
MAX_BATCH_WITH_THREAD = 90


class AgentUnavailable(Exception):
    """The installation names an agent this deployment lacks: a deployment fault (5xx)."""


@dataclass(frozen=True)
class Accepted:
    inserted: tuple[InboxRow, ...]  # rows this webhook stored (a redelivery: none)
    rows: tuple[InboxRow, ...]  # every row of the batch, as stored
    threads: tuple[tuple[str, str], ...]  # (thread_id, branch_id) of each affected thread
    created: tuple[str, ...]  # thread ids this webhook created


def _group_key(inst: Installation, item: InboxItem) -> tuple[str, str, str, str]:
    return (inst.tenant, inst.channel, inst.installation_id, item.conversation)


def accept(
    received: Received,
    *,
    stores: Stores,
    writer: Writer,
    agents: Mapping[str, Any],
    queue: InboxQueue | None,
    now_ms: int,
) -> Accepted:
    batch = received.items
    if not batch:
        return Accepted((), (), (), ())
    groups: dict[tuple[str, str, str, str], list[tuple[int, Installation, InboxItem]]] = {}
    for i, (inst, item) in enumerate(batch):
        groups.setdefault(_group_key(inst, item), []).append((i, inst, item))
    routes: dict[tuple[str, str, str, str], ChannelRoute] = {}
    new: list[tuple[str, str, str, str]] = []
    for key in list(groups):
        route = stores.channel_threads.get(*key)
        if route is not None:
            routes[key] = route
        elif all(item.kind == "decision" for _, _, item in groups[key]):
            # A button press in a conversation no thread has: it names no challenge of any
            # thread, so it would be refused; it creates no thread either.
            del groups[key]
        else:
            new.append(key)
    if not groups:
        return Accepted((), (), (), ())

    def rows() -> list[InboxRow]:
        out = []
        batch_id = new_uuid7()
        for key, members in groups.items():
            route = routes[key]
            for i, inst, item in members:
                inbox_id = new_uuid7()
                out.append(
                    InboxRow(
                        inbox_id=inbox_id,
                        tenant=inst.tenant,
                        channel=inst.channel,
                        installation_id=inst.installation_id,
                        item_key=item.item_key,
                        delivery_id=item.delivery_id,
                        thread_id=route.thread_id,
                        branch_id=route.branch_id,
                        item=item.as_dict(),
                        received_at=now_ms,
                        order=order_key(now_ms, batch_id, i),
                    )
                )
        return sorted(out, key=lambda r: r.order)

    created: list[str] = []
    inserted: list[InboxRow] | None = None
    planned: dict[tuple[str, str, str, str], ChannelRoute] = {}
    for n, key in enumerate(new):
        inst = groups[key][0][1]
        route = ChannelRoute(*key, thread_id=new_uuid7(), branch_id=new_uuid7(), created_at=now_ms)
        planned[key] = route
        # The last new thread carries the whole batch (one transaction) when it fits in one.
        last = n == len(new) - 1 and len(batch) <= MAX_BATCH_WITH_THREAD
        if last:
            routes.update(planned)
            batch_rows = rows()
            extra = [stores.inbox.put(r) for r in batch_rows]
        else:
            batch_rows, extra = [], []
        try:
            _create_thread(stores, writer, agents, inst, route, now_ms, extra)
        except CompanionFailed as exc:
            if exc.tag != "channel_thread":
                raise
            # Another webhook routed this conversation first: use its thread.
            winner = ChannelRoute.from_item(exc.item) if exc.item else stores.channel_threads.get(*key)
            if winner is None:  # pragma: no cover - a route is never deleted
                raise
            routes[key] = planned[key] = winner
            continue
        created.append(route.thread_id)
        routes[key] = route
        if last:
            inserted = batch_rows
    all_rows = rows() if inserted is None else inserted
    if inserted is None:
        inserted = stores.inbox.insert_batch(all_rows)
        if len(inserted) < len(all_rows):
            # The rows as stored: a redelivered item keeps its first row (and order).
            stored = {r.pk: r for r in stores.inbox.rows([r.pk for r in all_rows])}
            all_rows = sorted((stored.get(r.pk, r) for r in all_rows), key=lambda r: r.order)
    threads = tuple(dict.fromkeys((r.thread_id, r.branch_id) for r in all_rows))
    if queue is not None:
        for thread_id, branch_id in threads:
            queue.wake(thread_id, branch_id, [r.pk for r in all_rows if r.thread_id == thread_id])
    return Accepted(tuple(inserted), tuple(all_rows), threads, tuple(created))


def _create_thread(
    stores: Stores,
    writer: Writer,
    agents: Mapping[str, Any],
    inst: Installation,
    route: ChannelRoute,
    now_ms: int,
    extra: Sequence[Companion],
) -> None:
    """A new thread for a conversation (`new_thread.start_thread`), with its route and `extra`
    rows, in one transaction."""
    agent = agents.get(inst.agent)
    if agent is None:
        raise AgentUnavailable(f"{inst.channel}/{inst.installation_id}: no agent {inst.agent!r} deployed")
    start_thread(
        stores,
        writer,
        agent,
        tenant=inst.tenant,
        thread_id=route.thread_id,
        branch_id=route.branch_id,
        now_ms=now_ms,
        companions=[stores.channel_threads.create(route), *extra],
    )
