"""A tenant's threads by last activity, filtered (`GET /v1/threads`), and a thread's title and
metadata (`PATCH /v1/threads/{id}`): both over the META rows of `store.index`, never a log.

Which index a listing reads (each sparse: META rows only, sorted by ``act_sk`` =
``<status_at:016d>#<thread_id>``, read backwards, so the most recent activity comes first):
- `status` given: ``threads_status`` (hash: tenant and status), an index read;
- else `agent` given: ``threads_agent`` (hash: tenant and agent), an index read;
- else ``threads_activity`` (hash: the tenant), an index read.
`updated_after` / `updated_before` and the paging cursor are ranges of the sort key: index reads
too. `agent` when `status` is also given, `metadata` key=value pairs and `title_contains` are
DynamoDB filter expressions over the chosen index: those items are read and dropped. Such a
page stops after READ_BUDGET items read, answering what matched with a cursor to go on (so a
page may be short, even empty, and still name a next one): the cost of a page stays bounded
whatever the tenant holds.

The order is the last status change (a run starting, parking, settling, cancelled): a running
thread sorts by its run's start while its row's `last_activity_at` (the branch's last append)
moves on. A thread whose activity moves while a client pages may be seen twice or missed,
as in any list ordered by a moving key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from .dynamo import N, S, condition_failed
from .index import (
    ACTIVITY_INDEX,
    AGENT_INDEX,
    STATUS_INDEX,
    ThreadRecord,
    agent_index_pk,
    status_index_pk,
    tenant_gsi_pk,
    thread_key,
)
from .records import Item

READ_BUDGET = 1000  # items a filtered page reads at most
_PATCH_TRIES = 5


class MetadataFull(ValueError):
    """A PATCH would leave more metadata keys than allowed."""


@dataclass(frozen=True, slots=True)
class ThreadFilter:
    status: str | None = None
    agent: str | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)
    updated_after: int | None = None  # ms, exclusive
    updated_before: int | None = None  # ms, exclusive
    title_contains: str | None = None

    def filtered(self) -> bool:
        """True when some condition is a filter expression rather than a key."""
        return bool(self.metadata or self.title_contains or (self.status and self.agent))


def _index(tenant: str, f: ThreadFilter) -> tuple[str, str, str]:
    """(index name, hash attribute, hash value) for the filter."""
    if f.status is not None:
        return STATUS_INDEX, "status_pk", status_index_pk(tenant, f.status)
    if f.agent is not None:
        return AGENT_INDEX, "agent_pk", agent_index_pk(tenant, f.agent)
    return ACTIVITY_INDEX, "gsi1pk", tenant_gsi_pk(tenant)


def query_request(table: str, tenant: str, f: ThreadFilter, before: str | None) -> dict[str, Any] | None:
    """The Query of the first read of a page (the caller adds Limit and ExclusiveStartKey);
    None when the range holds nothing."""
    name, hash_attr, hash_value = _index(tenant, f)
    names: dict[str, str] = {"#h": hash_attr, "#s": "act_sk"}
    values: dict[str, Any] = {":h": S(hash_value)}
    hi = before
    if f.updated_before is not None:
        bound = f"{f.updated_before:016d}#"  # below every key of that ms
        hi = bound if hi is None or bound < hi else hi
    lo = f"{f.updated_after + 1:016d}#" if f.updated_after is not None else None
    key = "#h = :h"
    if lo is not None and hi is not None and lo > hi:
        return None  # an empty range (DynamoDB refuses BETWEEN with its bounds reversed)
    if lo is not None and hi is not None:
        # BETWEEN is inclusive: `hi` (a cursor or a bound ending in '#') is never a key
        # of a later row, and the row equal to a cursor is dropped by `_keep`
        key += " AND #s BETWEEN :lo AND :hi"
        values[":lo"], values[":hi"] = S(lo), S(hi)
    elif hi is not None:
        key += " AND #s < :hi"
        values[":hi"] = S(hi)
    elif lo is not None:
        key += " AND #s >= :lo"
        values[":lo"] = S(lo)
    req: dict[str, Any] = {
        "TableName": table,
        "IndexName": name,
        "KeyConditionExpression": key,
        "ScanIndexForward": False,
    }
    conds: list[str] = []
    if f.status is not None and f.agent is not None:
        names["#ag"] = "agent"
        values[":ag"] = S(f.agent)
        conds.append("#ag = :ag")
    for i, (k, v) in enumerate(sorted(f.metadata.items())):
        names["#md"], names[f"#mk{i}"] = "metadata", k
        values[f":mv{i}"] = S(v)
        conds.append(f"#md.#mk{i} = :mv{i}")
    if f.title_contains:
        names["#tf"] = "title_fold"
        values[":tq"] = S(f.title_contains.casefold())
        conds.append("contains(#tf, :tq)")
    if conds:
        req["FilterExpression"] = " AND ".join(conds)
    if "#s" not in key:
        del names["#s"]  # DynamoDB refuses an unused name
    req["ExpressionAttributeNames"] = names
    req["ExpressionAttributeValues"] = values
    return req


def query_threads(
    ddb: Any,
    table: str,
    tenant: str,
    f: ThreadFilter,
    *,
    limit: int,
    before: str | None,
    read_budget: int = READ_BUDGET,
) -> tuple[list[ThreadRecord], str | None]:
    """One page, most recent activity first, and the next page's cursor (None: the last)."""
    req = query_request(table, tenant, f, before)
    if req is None:
        return [], None
    filtered = f.filtered()
    items: list[Item] = []
    read = 0
    resume: str | None = None  # where a page cut short by its read budget goes on
    while len(items) <= limit:
        want = limit + 1 - len(items)  # one more than asked: a full last page names no next
        req["Limit"] = min(max(want, 100), read_budget - read) if filtered else want
        out = ddb.query(**req)
        read += int(out.get("ScannedCount", len(out.get("Items", []))))
        items.extend(i for i in out.get("Items", []) if _keep(i, before))
        last = out.get("LastEvaluatedKey")
        if not last:
            break
        if read >= read_budget:
            resume = last["act_sk"]["S"]
            break
        req["ExclusiveStartKey"] = last
    page = [ThreadRecord.from_item(i) for i in items[:limit]]
    if len(items) > limit:
        return page, items[limit - 1]["act_sk"]["S"]  # the index's own key of the last row
    return page, resume


def _keep(item: Item, before: str | None) -> bool:
    # a bare row (an activity update racing a deletion) has no thread fields: never listed
    return "thread_id" in item and "main_branch_id" in item and item["act_sk"]["S"] != before


def update_meta(
    ddb: Any,
    table: str,
    tenant: str,
    thread_id: str,
    *,
    title: str | None,
    metadata: Mapping[str, str | None] | None,
    max_keys: int,
) -> ThreadRecord | None:
    """Set the title and merge `metadata` into the thread's (a None value removes its key).
    None: no such thread under `tenant`. MetadataFull: the merge would leave over `max_keys`
    keys (nothing written). Optimistic on ``meta_rev``: a concurrent PATCH re-reads and merges
    again, so neither's keys are lost."""
    for _ in range(_PATCH_TRIES):
        out = ddb.get_item(TableName=table, Key=thread_key(thread_id), ConsistentRead=True)
        item = out.get("Item")
        if not item or item.get("tenant", {}).get("S") != tenant or "main_branch_id" not in item:
            return None
        current = ThreadRecord.from_item(item)
        merged = dict(current.metadata)
        for k, v in (metadata or {}).items():
            if v is None:
                merged.pop(k, None)
            else:
                merged[k] = v
        if len(merged) > max_keys:
            raise MetadataFull(f"metadata would hold {len(merged)} keys, at most {max_keys}")
        req = _patch_request(table, tenant, thread_id, current.meta_rev, title, merged)
        try:
            done = ddb.update_item(**req, ReturnValues="ALL_NEW")
        except ClientError as exc:
            if condition_failed(exc):
                continue  # another PATCH (or a deletion) came first: look again
            raise
        return ThreadRecord.from_item(done["Attributes"])
    raise RuntimeError(f"thread {thread_id}: metadata kept changing under {_PATCH_TRIES} tries")


def _patch_request(
    table: str, tenant: str, thread_id: str, rev: int, title: str | None, merged: dict[str, str]
) -> dict[str, Any]:
    names = {"#rev": "meta_rev", "#tenant": "tenant", "#md": "metadata"}
    values: dict[str, Any] = {":rev": N(rev), ":next": N(rev + 1), ":tenant": S(tenant)}
    sets = ["#rev = :next"]
    removes: list[str] = []
    if title is not None:
        names["#ti"], names["#tf"] = "title", "title_fold"
        values[":ti"], values[":tf"] = S(title), S(title.casefold())
        sets += ["#ti = :ti", "#tf = :tf"]
    if merged:
        values[":md"] = {"M": {k: S(v) for k, v in merged.items()}}
        sets.append("#md = :md")
    else:
        removes.append("#md")
    expr = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
    first = "attribute_not_exists(#rev)" if rev == 0 else "#rev = :rev"
    if rev == 0:
        del values[":rev"]
    return {
        "TableName": table,
        "Key": thread_key(thread_id),
        "UpdateExpression": expr,
        "ConditionExpression": f"attribute_exists(pk) AND #tenant = :tenant AND {first}",
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }
