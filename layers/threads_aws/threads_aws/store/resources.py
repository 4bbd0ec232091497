"""The resources ledger (semantics.md §2 `resources`): one row per provider resource, written
`pending` with a fresh operation_key BEFORE the provider call, moved by compare-and-set. It
outlives its owner's log, so cleanup never depends on a branch still existing.

Rows live in the StateTable under `RES#<owner_branch_id>` / `RES#<resource_id>`, so an owner's
rows are one Query and a transition is one conditional UpdateItem."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from ..core.canonical import new_uuid7
from ..core.errors import LogError
from .dynamo import condition_failed

STATES = ("pending", "live", "releasing", "released", "release_failed", "unknown")


def owner_pk(owner_branch_id: str) -> dict[str, str]:
    return {"S": f"RES#{owner_branch_id}"}


def resource_key(owner_branch_id: str, resource_id: str) -> dict[str, Any]:
    return {"pk": owner_pk(owner_branch_id), "sk": {"S": f"RES#{resource_id}"}}


@dataclass(slots=True)
class ResourceRow:
    resource_id: str
    owner_branch_id: str
    tenant: str
    provider: str
    kind: str
    state: str
    operation_key: str
    ref: str | None = None


class ResourceLedger:
    def __init__(self, ddb: Any, table: str) -> None:
        self.ddb = ddb
        self.table = table

    def open(self, *, tenant: str, owner_branch_id: str, provider: str, kind: str, now: int) -> ResourceRow:
        row = ResourceRow(new_uuid7(), owner_branch_id, tenant, provider, kind, "pending", new_uuid7())
        self.ddb.put_item(
            TableName=self.table,
            Item={
                **resource_key(owner_branch_id, row.resource_id),
                "tenant": {"S": tenant},
                "provider": {"S": provider},
                "kind": {"S": kind},
                "state": {"S": "pending"},
                "operation_key": {"S": row.operation_key},
                "acquired_at": {"N": str(now)},
            },
            ConditionExpression="attribute_not_exists(pk)",
        )
        return row

    def move(
        self,
        row: ResourceRow,
        to: str,
        *,
        ref: str | None = None,
        expect: tuple[str, ...] = (),
        ttl_s: int | None = None,
    ) -> None:
        """Compare-and-set the row's state (from its current state, or any of `expect`); `ttl_s`
        (epoch seconds) lets DynamoDB's TTL drop a settled row of a branch that is gone."""
        names = {"#s": "state"}
        values: dict[str, Any] = {":to": {"S": to}}
        allowed = expect or (row.state,)
        cond = " OR ".join(f"#s = :from{i}" for i in range(len(allowed)))
        for i, s in enumerate(allowed):
            values[f":from{i}"] = {"S": s}
        update = "SET #s = :to"
        if ttl_s is not None:
            update += ", #ttl = :ttl"
            names["#ttl"] = "ttl"
            values[":ttl"] = {"N": str(ttl_s)}
        if ref is not None:
            update += ", #r = :ref"
            names["#r"] = "ref"
            values[":ref"] = {"S": ref}
        try:
            self.ddb.update_item(
                TableName=self.table,
                Key=resource_key(row.owner_branch_id, row.resource_id),
                UpdateExpression=update,
                ConditionExpression=cond,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except ClientError as exc:
            if condition_failed(exc):
                raise LogError(
                    "resource_unknown", None, f"resource {row.resource_id} moved concurrently"
                ) from None
            raise
        row.state = to
        if ref is not None:
            row.ref = ref

    def rows(self, owner_branch_id: str) -> list[ResourceRow]:
        out: list[ResourceRow] = []
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": owner_pk(owner_branch_id)},
            "ConsistentRead": True,
        }
        while True:
            page = self.ddb.query(**kwargs)
            for it in page["Items"]:
                out.append(
                    ResourceRow(
                        resource_id=it["sk"]["S"][4:],
                        owner_branch_id=owner_branch_id,
                        tenant=it["tenant"]["S"],
                        provider=it["provider"]["S"],
                        kind=it["kind"]["S"],
                        state=it["state"]["S"],
                        operation_key=it["operation_key"]["S"],
                        ref=it.get("ref", {}).get("S"),
                    )
                )
            if "LastEvaluatedKey" not in page:
                return out
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def claim(self, row: ResourceRow, token: str, *, now: int, ttl_ms: int = 300_000) -> bool:
        """Claim a `releasing` row for cleanup (the ledger's ``cleanup_claim``, by compare-and-set:
        unclaimed, or its claim lapsed). A deleted thread's rows arrive `releasing` from the
        deletion's transaction; of two sweepers, one releases each."""
        try:
            self.ddb.update_item(
                TableName=self.table,
                Key=resource_key(row.owner_branch_id, row.resource_id),
                UpdateExpression="SET cleanup_claim = :t, claim_expires_at = :exp",
                ConditionExpression=(
                    "#s = :releasing AND (attribute_not_exists(cleanup_claim) OR claim_expires_at < :now)"
                ),
                ExpressionAttributeNames={"#s": "state"},
                ExpressionAttributeValues={
                    ":t": {"S": token},
                    ":exp": {"N": str(now + ttl_ms)},
                    ":now": {"N": str(now)},
                    ":releasing": {"S": "releasing"},
                },
            )
        except ClientError as exc:
            if condition_failed(exc):
                return False
            raise
        return True
