"""The memory of a principal (semantics.md §2 `memory_bindings`, §8 "Memory scope"): the rows
the `remember` / `recall` / `forget` tools write and read (engine/memory_tools.py).

Scope: `<e(issuer)>/<e(subject)>`, where `e` escapes `%` then `/`. The tenant is a key part of
its own, so one issuer and subject under two tenants never share a row, and nothing here reads
across a (tenant, scope) partition: every read is by that partition's key.

One row kind, keys spelled once (`memory_key`, `tenant_index`):
- pk ``MEMORY#<sha256 hex of e(tenant)/scope>``: hashed because the tenant, issuer and subject
  take up to 256 bytes each, up to 3x escaped, past DynamoDB's 2,048-byte partition key; the row
  also holds `tenant` and `scope` in clear, and every read checks them;
- sk = the memory key (at most KEY_MAX UTF-8 bytes);
- `state` live|forgotten; a live row holds `text` (≤ INLINE_MAX bytes) or `ref` (an ArtifactRef,
  the value in S3 through the artifact store, ≤ TEXT_MAX bytes) plus `preview` (its first
  PREVIEW_MAX bytes, what search reads of it); `record_id` (a new uuid7 per write), the write's
  `effect_key`, and the writing `thread_id`, `branch_id`, `call_id`, `updated_at`;
- gsi1pk ``MEMORYT#<e(tenant)>``, gsi1sk = the writing thread id: the tenant's rows, and a
  thread's (the deletion of a thread or a tenant, `delete_written_by`, `delete_tenant`).

Exactly once: `remember` is a put conditioned on the row not already holding this effect key, so
a re-dispatch (same key, attempt+1) after a crash is a no-op. `forget` turns the row into a
tombstone (keys, `forgotten_by` = the effect key, DynamoDB TTL `ttl` past the tools' dedup
window) rather than deleting it, so a re-dispatch finds its own forget and answers the same;
the worker's role therefore never needs DeleteItem. Deletions (scope, thread, tenant) delete.

Deletion ("DELETE of a thread or tenant covers what they wrote"): memory belongs to a principal
scope, not to a thread, so a thread's deletion removes the rows whose current value that thread
wrote (`delete_written_by`, per deleted thread, children included), a tenant's deletion every
row of the tenant (`delete_tenant`), and an erasure request for one user their scope
(`delete_scope`). They are not part of the deletion's one transaction (a scope may hold more
rows than a transaction takes): the caller runs them after the tombstone, again until they
delete nothing. A value another thread recalled is in that thread's log (an `injected` event,
C6) and goes with that thread. Each returns the S3 refs of the values it deleted: content-
addressed artifacts the sweeper releases when nothing live references them (it must count live
memory rows' refs as references). The deleting function needs DeleteItem and BatchWriteItem on
the state table (leading keys ``MEMORY#*``) and Query on gsi1.

AWS calls: remember 1 PutItem (+1 S3 PutObject over INLINE_MAX); recall by key 1 GetItem;
search 1 Query page (at most SEARCH_ROWS rows, ≤ 1 MB); forget 1 UpdateItem (+1 GetItem only
when its condition fails and DynamoDB returns no old item).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from .dynamo import N, S, condition_failed, n_of, s_of
from .records import Item

KEY_MAX = 256  # UTF-8 bytes of a memory key
INLINE_MAX = 4 * 1024  # a value up to this many bytes lives in the row; a longer one in S3
TEXT_MAX = 64 * 1024  # the largest value remember takes (it is recalled into the context)
PREVIEW_MAX = 1024  # bytes of an S3-held value kept in the row for search
SEARCH_ROWS = 200  # rows one search reads: one Query page (200 x ~5 KB stays under its 1 MB)
TOMBSTONE_TTL_S = 2 * 86_400  # a forgotten row outlives the 24 h dedup window of forget
MEDIA_TYPE = "text/plain"


def _e(part: str) -> str:
    return part.replace("%", "%25").replace("/", "%2F")


def memory_scope(issuer: str, subject: str) -> str:
    """The scope of a principal: `<e(issuer)>/<e(subject)>` (semantics.md §8)."""
    return f"{_e(issuer)}/{_e(subject)}"


def scope_pk(tenant: str, scope: str) -> str:
    digest = hashlib.sha256(f"{_e(tenant)}/{scope}".encode("utf-8", "surrogatepass")).hexdigest()
    return f"MEMORY#{digest}"


def memory_key(tenant: str, scope: str, key: str) -> Item:
    return {"pk": S(scope_pk(tenant, scope)), "sk": S(key)}


def tenant_index(tenant: str) -> str:
    return f"MEMORYT#{_e(tenant)}"


@dataclass(frozen=True, slots=True)
class MemoryWrite:
    tenant: str
    scope: str
    key: str
    text: str
    effect_key: str
    thread_id: str
    branch_id: str
    call_id: str
    now: int


@dataclass(frozen=True, slots=True)
class MemoryRow:
    key: str
    record_id: str
    text: str | None  # None when the value is in S3 (`ref`)
    ref: dict[str, Any] | None
    preview: str
    thread_id: str
    updated_at: int


@dataclass(frozen=True, slots=True)
class Deleted:
    """What a deletion removed: its row count and the artifact refs those rows held (values in
    S3, content-addressed: the sweeper releases each no live row or log still references)."""

    rows: int
    refs: tuple[dict[str, Any], ...]


def _decode(item: Item) -> MemoryRow:
    ref = None
    if "ref_sha256" in item:
        ref = {
            "bytes": n_of(item, "ref_bytes"),
            "media_type": s_of(item, "ref_media_type"),
            "sha256": s_of(item, "ref_sha256"),
        }
    text = s_of(item, "text")
    return MemoryRow(
        key=item["sk"]["S"],
        record_id=s_of(item, "record_id") or "",
        text=text,
        ref=ref,
        preview=text if text is not None else (s_of(item, "preview") or ""),
        thread_id=s_of(item, "thread_id") or "",
        updated_at=n_of(item, "updated_at") or 0,
    )


def _ref_of(item: Item) -> dict[str, Any] | None:
    return _decode(item).ref if "ref_sha256" in item else None


class MemoryStore:
    def __init__(self, ddb: Any, state_table: str, artifacts: Any) -> None:
        self.ddb = ddb
        self.table = state_table
        self.artifacts = artifacts

    # ------------------------------------------------------------ writes (the tools)
    def remember(self, w: MemoryWrite, record_id: str) -> None:
        """Set `w.key` to `w.text` in the scope, once per effect key (module docstring)."""
        data = w.text.encode("utf-8")
        item: Item = {
            **memory_key(w.tenant, w.scope, w.key),
            "kind": S("memory"),
            "tenant": S(w.tenant),
            "scope": S(w.scope),
            "state": S("live"),
            "record_id": S(record_id),
            "effect_key": S(w.effect_key),
            "thread_id": S(w.thread_id),
            "branch_id": S(w.branch_id),
            "call_id": S(w.call_id),
            "updated_at": N(w.now),
            "gsi1pk": S(tenant_index(w.tenant)),
            "gsi1sk": S(w.thread_id),
        }
        if len(data) <= INLINE_MAX:
            item["text"] = S(w.text)
        else:
            ref = self.artifacts.put(data, MEDIA_TYPE)  # durable before the row names it
            item.update(
                ref_sha256=S(ref["sha256"]),
                ref_bytes=N(ref["bytes"]),
                ref_media_type=S(ref["media_type"]),
                preview=S(data[:PREVIEW_MAX].decode("utf-8", "ignore")),
            )
        try:
            self.ddb.put_item(
                TableName=self.table,
                Item=item,
                ConditionExpression="attribute_not_exists(effect_key) OR effect_key <> :ek",
                ExpressionAttributeValues={":ek": S(w.effect_key)},
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            # the row holds this very write: an earlier attempt of the same effect stored it

    def forget(self, tenant: str, scope: str, key: str, effect_key: str, now: int) -> bool:
        """Tombstone the live row under `key`; True if this effect forgot it (now or in an earlier
        attempt), False if nothing was remembered under it."""
        try:
            self.ddb.update_item(
                TableName=self.table,
                Key=memory_key(tenant, scope, key),
                UpdateExpression=(
                    "SET #state = :forgotten, forgotten_by = :ek, updated_at = :now, #ttl = :ttl "
                    "REMOVE #text, preview, ref_sha256, ref_bytes, ref_media_type"
                ),
                ConditionExpression="#state = :live AND tenant = :tenant AND #scope = :scope",
                ExpressionAttributeNames={n: n[1:] for n in ("#state", "#ttl", "#text", "#scope")},
                ExpressionAttributeValues={
                    ":forgotten": S("forgotten"),
                    ":live": S("live"),
                    ":ek": S(effect_key),
                    ":now": N(now),
                    ":ttl": N(now // 1000 + TOMBSTONE_TTL_S),
                    ":tenant": S(tenant),
                    ":scope": S(scope),
                },
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            return True
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            old = exc.response.get("Item")
            if old is None:
                old = self._get(tenant, scope, key)
            return old is not None and s_of(old, "forgotten_by") == effect_key

    # ------------------------------------------------------------ reads (the tools)
    def get(self, tenant: str, scope: str, key: str) -> MemoryRow | None:
        item = self._get(tenant, scope, key)
        if item is None or s_of(item, "state") != "live":
            return None
        return _decode(item)

    def search(self, tenant: str, scope: str, query: str, limit: int) -> tuple[list[MemoryRow], bool]:
        """The scope's live memories matching `query` (case-insensitive terms, in the key or the
        value's inline text / preview), best first: most distinct terms matched, then the latest
        written. Reads one Query page of at most SEARCH_ROWS rows; the flag says whether the
        scope held more than that page (those were not searched)."""
        terms = sorted({t for t in query.casefold().split() if t})
        if not terms:
            return [], False
        out = self.ddb.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": S(scope_pk(tenant, scope))},
            ConsistentRead=True,
            Limit=SEARCH_ROWS,
        )
        scored: list[tuple[int, int, MemoryRow]] = []
        for item in out.get("Items", []):
            if not self._ours(item, tenant, scope) or s_of(item, "state") != "live":
                continue
            row = _decode(item)
            hay = f"{row.key}\n{row.preview}".casefold()
            score = sum(1 for t in terms if t in hay)
            if score:
                scored.append((score, row.updated_at, row))
        scored.sort(key=lambda s: (-s[0], -s[1], s[2].key))
        return [s[2] for s in scored[:limit]], "LastEvaluatedKey" in out

    # ------------------------------------------------------------ deletion
    def delete_scope(self, tenant: str, scope: str) -> Deleted:
        """Every row of one principal's scope (an erasure request for one user)."""
        pages = self._pages(
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": S(scope_pk(tenant, scope))},
            ConsistentRead=True,
        )
        return self._delete_all(item for page in pages for item in page if self._ours(item, tenant, scope))

    def delete_tenant(self, tenant: str) -> Deleted:
        """Every memory row of a tenant, every scope (`threads-aws tenant delete`)."""
        pages = self._pages(
            IndexName="gsi1",
            KeyConditionExpression="gsi1pk = :t",
            ExpressionAttributeValues={":t": S(tenant_index(tenant))},
        )
        return self._delete_all(item for page in pages for item in page if s_of(item, "tenant") == tenant)

    def delete_written_by(self, tenant: str, thread_id: str) -> Deleted:
        """The rows whose current value the thread wrote (the deletion of a thread). Memory is per
        principal, not per thread: a value the thread wrote and another thread overwrote since
        is that other thread's, and stays. Each delete is conditioned on the writing thread, so
        a row overwritten after the index read is kept. The index is eventually consistent: a
        caller that must be exhaustive calls again later (idempotent)."""
        pages = self._pages(
            IndexName="gsi1",
            KeyConditionExpression="gsi1pk = :t AND gsi1sk = :th",
            ExpressionAttributeValues={":t": S(tenant_index(tenant)), ":th": S(thread_id)},
        )
        rows, refs = 0, []
        for page in pages:
            for item in page:
                try:
                    self.ddb.delete_item(
                        TableName=self.table,
                        Key={"pk": item["pk"], "sk": item["sk"]},
                        ConditionExpression="thread_id = :th AND tenant = :t",
                        ExpressionAttributeValues={":th": S(thread_id), ":t": S(tenant)},
                    )
                except ClientError as exc:
                    if not condition_failed(exc):
                        raise
                    continue
                rows += 1
                ref = _ref_of(item)
                if ref is not None:
                    refs.append(ref)
        return Deleted(rows, tuple(refs))

    # ------------------------------------------------------------ plumbing
    def _get(self, tenant: str, scope: str, key: str) -> Item | None:
        item: Item | None = self.ddb.get_item(
            TableName=self.table, Key=memory_key(tenant, scope, key), ConsistentRead=True
        ).get("Item")
        return item if item is not None and self._ours(item, tenant, scope) else None

    @staticmethod
    def _ours(item: Item, tenant: str, scope: str) -> bool:
        # the pk is a hash: the clear attributes make a (never expected) collision harmless
        return s_of(item, "tenant") == tenant and s_of(item, "scope") == scope

    def value_refs(self) -> set[str]:
        """The sha256 of every memory value held in S3 (the artifact collector keeps them: no
        log names a memory's value, its row does). One Scan of the memory rows with a ref."""
        out: set[str] = set()
        start: Item | None = None
        while True:
            req: dict[str, Any] = {
                "TableName": self.table,
                "FilterExpression": "begins_with(pk, :p) AND attribute_exists(ref_sha256)",
                "ExpressionAttributeValues": {":p": S("MEMORY#")},
                "ProjectionExpression": "ref_sha256",
            }
            if start is not None:
                req["ExclusiveStartKey"] = start
            page = self.ddb.scan(**req)
            out.update(str(item["ref_sha256"]["S"]) for item in page.get("Items", []))
            start = page.get("LastEvaluatedKey")
            if not start:
                return out

    def _pages(self, **query: Any) -> Iterator[list[Item]]:
        start: Item | None = None
        while True:
            req = {"TableName": self.table, **query}
            if start is not None:
                req["ExclusiveStartKey"] = start
            out = self.ddb.query(**req)
            yield out.get("Items", [])
            start = out.get("LastEvaluatedKey")
            if not start:
                return

    def _delete_all(self, items: Iterator[Item]) -> Deleted:
        rows, refs, batch = 0, [], []
        for item in items:
            batch.append({"pk": item["pk"], "sk": item["sk"]})
            ref = _ref_of(item)
            if ref is not None:
                refs.append(ref)
            if len(batch) == 25:  # BatchWriteItem's limit
                rows += self._batch_delete(batch)
                batch = []
        if batch:
            rows += self._batch_delete(batch)
        return Deleted(rows, tuple(refs))

    def _batch_delete(self, keys: list[Item]) -> int:
        request: dict[str, Any] = {self.table: [{"DeleteRequest": {"Key": k}} for k in keys]}
        while request:
            out = self.ddb.batch_write_item(RequestItems=request)
            request = out.get("UnprocessedItems") or {}
            if request:
                time.sleep(0.05)
        return len(keys)
