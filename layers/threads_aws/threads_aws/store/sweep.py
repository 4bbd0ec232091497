"""Whole-store listings for the workspace garbage collector (`sandbox.gc`): every branch head
and every resources-ledger row (paged Scans of the StateTable), and every content-addressed
object with its age (paged ListObjectsV2 under ``sha256/``), and the delete of one object. For
the deletion sweep (`threads_aws.sweeper`): every thread row with its TTL, every head with its
thread, and every item still naming a deleted thread or branch.

These are sweeper paths only: nothing on a request path scans. Keys are spelled by their
modules (`store.branches`, `store.resources`, `store.artifacts`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .artifacts import KEY_PREFIX
from .dynamo import each_item
from .index import RETAIN_UNTIL
from .resources import ResourceRow


@dataclass(frozen=True, slots=True)
class StoredObject:
    sha256: str
    size: int
    modified_ms: int


class Sweep:
    def __init__(self, ddb: Any, table: str, s3: Any, bucket: str) -> None:
        self.ddb = ddb
        self.table = table
        self.s3 = s3
        self.bucket = bucket
        self.calls = 0  # AWS requests made (benchmarks)

    def _count(self) -> None:
        self.calls += 1

    def _scan(self, prefix: str, extra: str = "") -> Iterator[dict[str, Any]]:
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "FilterExpression": "begins_with(pk, :p)" + extra,
            "ExpressionAttributeValues": {":p": {"S": prefix}},
            "ConsistentRead": True,
        }
        if extra:
            kwargs["ExpressionAttributeValues"][":head"] = {"S": "HEAD"}
        if not prefix:  # every item
            del kwargs["FilterExpression"], kwargs["ExpressionAttributeValues"]
        yield from each_item(self.ddb.scan, kwargs, self._count)

    def branch_ids(self) -> set[str]:
        """Every branch that has a head record (`store.branches`: BRANCH#<id> / HEAD)."""
        return {it["pk"]["S"][len("BRANCH#") :] for it in self._scan("BRANCH#", " AND sk = :head")}

    def heads(self) -> list[tuple[str, str, str]]:
        """(branch_id, thread_id, tenant) of every branch head."""
        return [
            (it["pk"]["S"][len("BRANCH#") :], it["thread_id"]["S"], it["tenant"]["S"])
            for it in self._scan("BRANCH#", " AND sk = :head")
            if "thread_id" in it and "tenant" in it
        ]

    def threads(self) -> list[tuple[str, str, int | None]]:
        """(thread_id, tenant, retain_until in epoch seconds or None) of every thread's META row."""
        return [
            (
                it["thread_id"]["S"],
                it["tenant"]["S"],
                int(it[RETAIN_UNTIL]["N"]) if RETAIN_UNTIL in it else None,
            )
            for it in self._scan("THREAD#")
            if it.get("sk", {}).get("S") == "META"
        ]

    def naming(self, ids: set[str]) -> Iterator[dict[str, Any]]:
        """The key of every StateTable item any of whose string attributes (keys included) names
        one of `ids` (thread or branch ids), except tombstones and ledger rows, which outlive
        their thread (module `store.deletion`): the purge's completeness net."""
        if not ids:
            return
        for it in self._scan(""):
            pk = it["pk"]["S"]
            if pk.startswith(("TOMBSTONE#", "RES#")):
                continue
            texts = [v["S"] for v in it.values() if isinstance(v, dict) and "S" in v]
            if any(i in t for t in texts for i in ids):
                yield {"pk": it["pk"], "sk": it["sk"]}

    def carrying(self, tenant: str) -> Iterator[dict[str, Any]]:
        """The key of every StateTable item whose ``tenant`` is `tenant`, except tombstones and
        ledger rows (`threads-aws tenant delete`'s net, once no thread of the tenant is left)."""
        for it in self._scan(""):
            pk = it["pk"]["S"]
            if it.get("tenant", {}).get("S") == tenant and not pk.startswith(("TOMBSTONE#", "RES#")):
                yield {"pk": it["pk"], "sk": it["sk"]}

    def resource_rows(self) -> list[ResourceRow]:
        """Every resources-ledger row (`store.resources`: RES#<owner> / RES#<resource_id>)."""
        return [
            ResourceRow(
                resource_id=it["sk"]["S"][4:],
                owner_branch_id=it["pk"]["S"][4:],
                tenant=it["tenant"]["S"],
                provider=it["provider"]["S"],
                kind=it["kind"]["S"],
                state=it["state"]["S"],
                operation_key=it["operation_key"]["S"],
                ref=it.get("ref", {}).get("S"),
            )
            for it in self._scan("RES#")
        ]

    def objects(self) -> Iterator[StoredObject]:
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": KEY_PREFIX}
        while True:
            self.calls += 1
            page = self.s3.list_objects_v2(**kwargs)
            for obj in page.get("Contents", []):
                modified = int(obj["LastModified"].timestamp() * 1000)
                yield StoredObject(obj["Key"][len(KEY_PREFIX) :], int(obj["Size"]), modified)
            if not page.get("IsTruncated"):
                return
            kwargs["ContinuationToken"] = page["NextContinuationToken"]

    def delete(self, sha256: str) -> None:
        self.calls += 1
        self.s3.delete_object(Bucket=self.bucket, Key=KEY_PREFIX + sha256)
