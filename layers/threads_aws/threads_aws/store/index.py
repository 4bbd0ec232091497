"""The thread index in the StateTable.

Items (pk, sk):
- ``THREAD#<thread_id>`` / ``META``: the thread (ThreadRecord); gsi1 = ``TENANT#<tenant>`` /
  ``<created_at:016d>#<thread_id>`` lists a tenant's threads (newest first: the query runs
  backwards). It also carries the listing's summary: ``agent`` and ``title`` (from the first
  lines: thread_started, the first user_input), ``status`` / ``status_branch_id`` /
  ``status_at`` (the fold status of the branch whose status changed last).
- ``THREAD#<thread_id>`` / ``BRANCH#<branch_id>``: membership of a branch in its thread.

Three sparse indexes hold META items only (each keyed by ``act_sk`` =
``<status_at:016d>#<thread_id>``: the thread's last status change, its "last activity" order):
``threads_activity`` (hash gsi1pk, the tenant's), ``threads_status`` (hash ``status_pk``: tenant and
status) and ``threads_agent`` (hash ``agent_pk``: tenant and agent). `store.thread_query` reads
them for `GET /v1/threads`; ``metadata`` (a small string map) and ``title_fold`` (the title,
casefolded, for its text match) are set by `PATCH /v1/threads/{id}` (`store.thread_query`).

Both are written in the transaction that creates a branch (`store.branches`). The summary moves
with the appends that change a branch's status: `activity` is their companion (an unconditional
Update of META, so it can never fail the append it rides with), built by the Writer, which knows
the fold before and after. A status changes a few times a run (a turn opens, parks, ends), so the
write cost is one more transaction item on those appends only; the last activity time is not
written at all: it is the status branch's head ``updated_at``, which every append already sets,
read with the page (one BatchGetItem). Branches of one thread that change status concurrently
leave the later commit's status (TransactionConflict orders them): the list is a summary, the
thread's own route (`GET /v1/threads/{id}`) reads each branch's fold.

Tenant isolation: every lookup takes the caller's tenant, and a thread or branch of another
tenant reads as absent (None / []), exactly like a missing one, so its existence doesn't leak.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from ..core.lines import StoredLine
from .dynamo import Expr, N, S, condition_failed, n_of, s_of
from .records import AlreadyExists, Companion, Item
from .retention import Retention

if TYPE_CHECKING:
    from .branches import Branches, BranchRecord
    from .thread_query import ThreadFilter

#: The META row's retention deadline (epoch seconds). Deliberately not the StateTable's TTL
#: attribute `ttl`: DynamoDB would delete the row with no `busy` check; the sweeper deletes the
#: thread through `store.deletion` instead.
RETAIN_UNTIL = "retain_until"

THREAD_PREFIX = "THREAD#"
ACTIVITY_INDEX = "threads_activity"
STATUS_INDEX = "threads_status"
AGENT_INDEX = "threads_agent"
MEMBER_PREFIX = "BRANCH#"


def thread_key(thread_id: str) -> Item:
    return {"pk": S(THREAD_PREFIX + thread_id), "sk": S("META")}


def membership_key(thread_id: str, branch_id: str) -> Item:
    return {"pk": S(THREAD_PREFIX + thread_id), "sk": S(MEMBER_PREFIX + branch_id)}


def tenant_gsi_pk(tenant: str) -> str:
    return f"TENANT#{tenant}"


def status_index_pk(tenant: str, status: str) -> str:
    # JSON keeps the pair unambiguous whatever characters a tenant or agent name holds
    return "STATUS#" + json.dumps([tenant, status], separators=(",", ":"))


def agent_index_pk(tenant: str, agent: str) -> str:
    return "AGENT#" + json.dumps([tenant, agent], separators=(",", ":"))


def activity_sk(at: int, thread_id: str) -> str:
    return f"{at:016d}#{thread_id}"


TITLE_CHARS = 120  # of the first prompt, for a list row
_CURSOR = re.compile(r"[0-9]{16}#[A-Za-z0-9._:-]{1,128}")


@dataclass(frozen=True, slots=True)
class ThreadRecord:
    thread_id: str
    tenant: str
    main_branch_id: str
    created_at: int
    agent: str | None = None
    title: str | None = None
    status: str = "idle"
    status_branch_id: str = ""  # "" until a status change names one: the main branch
    status_at: int = 0
    metadata: dict[str, str] = field(default_factory=dict)
    meta_rev: int = 0  # PATCH's optimistic version (`store.thread_query.update_meta`)

    @property
    def cursor(self) -> str:
        """This thread's place in its tenant's list, by last activity (the ``act_sk`` key)."""
        return activity_sk(self.status_at, self.thread_id)

    @classmethod
    def from_item(cls, item: Item) -> ThreadRecord:
        created = int(item["created_at"]["N"])
        return cls(
            thread_id=item["thread_id"]["S"],
            tenant=item["tenant"]["S"],
            main_branch_id=item["main_branch_id"]["S"],
            created_at=created,
            agent=s_of(item, "agent"),
            title=s_of(item, "title"),
            status=s_of(item, "status") or "idle",
            status_branch_id=s_of(item, "status_branch_id") or item["main_branch_id"]["S"],
            status_at=n_of(item, "status_at") or created,
            metadata={k: v["S"] for k, v in item.get("metadata", {}).get("M", {}).items()},
            meta_rev=n_of(item, "meta_rev") or 0,
        )


@dataclass(frozen=True, slots=True)
class Summary:
    """What a thread's first lines tell its list row."""

    agent: str | None = None
    title: str | None = None


def summary_of(lines: Sequence[StoredLine]) -> Summary:
    """The agent (thread_started) and the title (the first user_input's text) among `lines`."""
    agent = title = None
    for line in lines:
        ev = json.loads(line.raw)
        data = ev.get("data") or {}
        if ev.get("type") == "thread_started" and agent is None:
            name = data.get("agent_name")
            agent = name if isinstance(name, str) else None
        elif ev.get("type") == "user_input" and title is None:
            title = title_of(data)
    return Summary(agent, title)


def title_of(user_input: dict[str, Any]) -> str | None:
    """A list title from a user_input's text, or its first text part: one line, cut short."""
    text = user_input.get("text")
    if not isinstance(text, str):
        parts = user_input.get("content")
        texts = [p.get("text") for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []
        text = next((t for t in texts if isinstance(t, str) and t.strip()), None)
    if not isinstance(text, str) or not text.strip():
        return None
    one = " ".join(text.split())
    return one if len(one) <= TITLE_CHARS else one[: TITLE_CHARS - 1] + "\u2026"


def thread_item(
    tenant: str,
    thread_id: str,
    main_branch_id: str,
    created_at: int,
    summary: Summary = Summary(),
    status: str | None = None,
    ttl_s: int | None = None,
) -> Item:
    item: Item = {
        **thread_key(thread_id),
        "kind": S("thread"),
        "thread_id": S(thread_id),
        "tenant": S(tenant),
        "main_branch_id": S(main_branch_id),
        "created_at": {"N": str(created_at)},
        "gsi1pk": S(tenant_gsi_pk(tenant)),
        "gsi1sk": S(f"{created_at:016d}#{thread_id}"),
        "act_sk": S(activity_sk(created_at, thread_id)),
        "status_pk": S(status_index_pk(tenant, status or "idle")),  # from_item's default
    }
    if summary.agent is not None:
        item["agent"] = S(summary.agent)
        item["agent_pk"] = S(agent_index_pk(tenant, summary.agent))
    if summary.title is not None:
        item["title"] = S(summary.title)
        item["title_fold"] = S(summary.title.casefold())
    if status is not None:
        item["status"] = S(status)
        item["status_branch_id"] = S(main_branch_id)
        item["status_at"] = N(created_at)
    if ttl_s is not None:
        item[RETAIN_UNTIL] = N(ttl_s)  # not the table's TTL attribute: `store.retention`
    return item


def thread_put(
    table: str,
    tenant: str,
    thread_id: str,
    main_branch_id: str,
    created_at: int,
    lines: Sequence[StoredLine] = (),
    status: str | None = None,
    ttl_s: int | None = None,
) -> Item:
    """The TransactItem creating a thread's META item (fails if the thread id is taken), with the
    summary its first `lines` give, the fold `status` after them (when the caller knows it) and
    the retention's ``ttl``."""
    item = thread_item(tenant, thread_id, main_branch_id, created_at, summary_of(lines), status, ttl_s)
    return {"Put": {"TableName": table, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}}


def activity_update(
    table: str,
    thread_id: str,
    branch_id: str,
    status: str,
    at: int,
    title: str | None = None,
    ttl_s: int | None = None,
    tenant: str | None = None,
) -> Item:
    """The TransactItem recording a branch's new fold status on its thread's row (and the title,
    if the thread has none yet: a thread started by a channel gets it from its first message).
    Unconditional: it never fails the append it commits with. With a retention, it also moves
    the row's DynamoDB TTL (``ttl``, epoch seconds: `at` + the retention, `store.retention`).
    With the `tenant`, the row moves in the listing's indexes too (``act_sk``, ``status_pk``)."""
    e = Expr()
    sets = [
        f"{e.n('status')} = {e.v(S(status))}",
        f"{e.n('status_branch_id')} = {e.v(S(branch_id))}",
        f"{e.n('status_at')} = {e.v(N(at))}",
    ]
    if tenant is not None:
        sets.append(f"{e.n('act_sk')} = {e.v(S(activity_sk(at, thread_id)))}")
        sets.append(f"{e.n('status_pk')} = {e.v(S(status_index_pk(tenant, status)))}")
    if ttl_s is not None:
        sets.append(f"{e.n(RETAIN_UNTIL)} = {e.v(N(ttl_s))}")
    if title is not None:
        t = e.n("title")
        sets.append(f"{t} = if_not_exists({t}, {e.v(S(title))})")
        tf = e.n("title_fold")  # a PATCHed title is kept: both only where there is none yet
        sets.append(f"{tf} = if_not_exists({tf}, {e.v(S(title.casefold()))})")
    return {
        "Update": e.apply(
            {"TableName": table, "Key": thread_key(thread_id), "UpdateExpression": "SET " + ", ".join(sets)}
        )
    }


def thread_check(table: str, tenant: str, thread_id: str) -> Item:
    """The TransactItem requiring the thread to exist under `tenant`."""
    e = Expr()
    cond = f"attribute_exists(pk) AND {e.n('tenant')} = {e.v(S(tenant))}"
    return {
        "ConditionCheck": e.apply(
            {"TableName": table, "Key": thread_key(thread_id), "ConditionExpression": cond}
        )
    }


def membership_put(table: str, tenant: str, thread_id: str, branch_id: str, created_at: int) -> Item:
    item = {
        **membership_key(thread_id, branch_id),
        "kind": S("thread_branch"),
        "thread_id": S(thread_id),
        "branch_id": S(branch_id),
        "tenant": S(tenant),
        "created_at": {"N": str(created_at)},
    }
    return {"Put": {"TableName": table, "Item": item}}


def membership_delete(table: str, thread_id: str, branch_id: str) -> Item:
    return {"Delete": {"TableName": table, "Key": membership_key(thread_id, branch_id)}}


def valid_cursor(cursor: str) -> bool:
    return _CURSOR.fullmatch(cursor) is not None


class ThreadIndex:
    def __init__(
        self,
        ddb: Any,
        state_table: str,
        branches: Branches,
        *,
        retention_ms: int | None = None,
        retention: Retention | None = None,
    ) -> None:
        self.ddb = ddb
        self.table = state_table
        self.branches = branches
        # idle threads' lifetime by agent (`store.retention`); no retention: forever
        self.retention = retention or Retention(retention_ms)

    def ttl_s(self, agent: str | None, at: int) -> int | None:
        """The ``ttl`` of a thread of `agent` created or changing status at `at` (None: none)."""
        return self.retention.ttl_s(agent, at)

    def create_thread(
        self, tenant: str, thread_id: str, main_branch_id: str, created_at: int
    ) -> ThreadRecord:
        """Create the thread's META item (AlreadyExists if the thread id is taken).

        A branch created with ``NewBranch(create_thread=True)`` does this in the same transaction;
        use this alone only when the branch is created afterwards.
        """
        put = thread_put(self.table, tenant, thread_id, main_branch_id, created_at)["Put"]
        try:
            self.ddb.put_item(**put)
        except ClientError as exc:
            if condition_failed(exc):
                raise AlreadyExists(f"thread {thread_id} exists") from exc
            raise
        return ThreadRecord.from_item(put["Item"])

    def get_thread(self, tenant: str, thread_id: str) -> ThreadRecord | None:
        out = self.ddb.get_item(TableName=self.table, Key=thread_key(thread_id), ConsistentRead=True)
        item = out.get("Item")
        if not item or item.get("tenant", {}).get("S") != tenant:
            return None
        return ThreadRecord.from_item(item)

    def list_threads(
        self,
        tenant: str,
        *,
        limit: int = 50,
        before: str | None = None,
        filters: ThreadFilter | None = None,
    ) -> tuple[list[ThreadRecord], str | None]:
        """A tenant's threads, most recent activity first (`store.thread_query`: which index
        each filter reads; eventually consistent: a thread changed a moment ago may show its
        change a moment later). `before` is the previous page's cursor (`ThreadRecord.cursor`).
        Returns (page, the next page's cursor or None)."""
        from .thread_query import ThreadFilter, query_threads

        if before is not None and not valid_cursor(before):
            raise ValueError(f"malformed thread cursor {before!r}")
        f = filters or ThreadFilter()
        return query_threads(self.ddb, self.table, tenant, f, limit=limit, before=before)

    def update_meta(
        self,
        tenant: str,
        thread_id: str,
        *,
        title: str | None = None,
        metadata: Mapping[str, str | None] | None = None,
        max_keys: int = 16,
    ) -> ThreadRecord | None:
        """PATCH's write (`store.thread_query.update_meta`): None if no such thread here."""
        from .thread_query import update_meta

        return update_meta(
            self.ddb, self.table, tenant, thread_id, title=title, metadata=metadata, max_keys=max_keys
        )

    def last_activity(self, threads: Sequence[ThreadRecord]) -> dict[str, int]:
        """thread_id → ms of its last append: the status branch's head ``updated_at`` (set by
        every append), never before the row's own status change. One BatchGetItem a page."""
        heads = {r.branch_id: r for r in self.branches.heads([t.status_branch_id for t in threads])}
        out = {}
        for t in threads:
            head = heads.get(t.status_branch_id)
            out[t.thread_id] = max(t.status_at, head.updated_at if head is not None else 0)
        return out

    def activity(
        self,
        thread_id: str,
        branch_id: str,
        status: str,
        at: int,
        title: str | None,
        agent: str | None = None,
        tenant: str | None = None,
    ) -> Companion:
        """The companion of an append that changes `branch_id`'s fold status (`activity_update`);
        `agent` (the thread's) chooses the retention, `tenant` places it in the listing's indexes."""
        ttl_s = self.retention.ttl_s(agent, at)
        return Companion(
            "thread_activity",
            activity_update(self.table, thread_id, branch_id, status, at, title, ttl_s, tenant),
        )

    def record_activity(self, companion: Companion) -> None:
        """Apply an activity update on its own: for an append too large to carry companions (a
        split batch), right after it commits. A crash in between leaves the row's status one
        change behind until the branch's next change; the thread's own route is exact. On its
        own it requires the row: a thread deleted meanwhile is not re-created as a bare row."""
        try:
            self.ddb.update_item(**companion.item["Update"], ConditionExpression="attribute_exists(pk)")
        except ClientError as exc:
            if not condition_failed(exc):
                raise

    def list_branches(self, tenant: str, thread_id: str) -> list[BranchRecord]:
        """The thread's branches (not those still `forking`), oldest first."""
        if self.get_thread(tenant, thread_id) is None:
            return []
        ids: list[str] = []
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :p AND begins_with(sk, :b)",
            "ExpressionAttributeValues": {":p": S(THREAD_PREFIX + thread_id), ":b": S(MEMBER_PREFIX)},
            "ConsistentRead": True,
        }
        while True:
            out = self.ddb.query(**kwargs)
            ids.extend(i["branch_id"]["S"] for i in out.get("Items", []))
            if not out.get("LastEvaluatedKey"):
                break
            kwargs["ExclusiveStartKey"] = out["LastEvaluatedKey"]
        records = [r for r in self.branches.heads(ids) if r.tenant == tenant and r.thread_id == thread_id]
        records = [r for r in records if r.state != "forking"]
        records.sort(key=lambda r: (r.created_at, r.branch_id))
        return records

    def branch_of(self, tenant: str, thread_id: str | None, branch_id: str) -> BranchRecord | None:
        """The branch if it belongs to this tenant (and to `thread_id`, when given); any state,
        `forking` included."""
        rec = self.branches.head(branch_id)
        if rec is None or rec.tenant != tenant or (thread_id is not None and rec.thread_id != thread_id):
            return None
        return rec
