"""The listing's index keys for thread rows written before they existed (issue 18 §6).

A META row gets ``act_sk``, ``status_pk``, ``agent_pk`` and ``title_fold`` when it is created
and as its status moves (`store.index`); a row created by an older host has none of them, so it
is in none of the listing's indexes until its next status change. `backfill` sets them from
what the row holds (the last status change's time, its status, agent and title): a Scan of the
state table for META rows without ``act_sk``, one conditional UpdateItem each (a row that
moved meanwhile already has its keys and is left alone). Run once after deploying
(`threads-aws index-backfill`); running it again finds nothing to do.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from .dynamo import S, condition_failed
from .index import ThreadRecord, activity_sk, agent_index_pk, status_index_pk


def backfill(ddb: Any, table: str) -> int:
    """Rows updated."""
    kwargs: dict[str, Any] = {
        "TableName": table,
        "FilterExpression": (
            "sk = :meta AND attribute_exists(main_branch_id) AND attribute_not_exists(act_sk)"
        ),
        "ExpressionAttributeValues": {":meta": S("META")},
        "ConsistentRead": True,
    }
    done = 0
    while True:
        out = ddb.scan(**kwargs)
        for item in out.get("Items", []):
            done += _set_keys(ddb, table, item)
        if not out.get("LastEvaluatedKey"):
            return done
        kwargs["ExclusiveStartKey"] = out["LastEvaluatedKey"]


def _set_keys(ddb: Any, table: str, item: dict[str, Any]) -> int:
    t = ThreadRecord.from_item(item)
    names = {"#a": "act_sk", "#s": "status_pk"}
    values: dict[str, Any] = {
        ":a": S(activity_sk(t.status_at, t.thread_id)),
        ":s": S(status_index_pk(t.tenant, t.status)),
    }
    sets = ["#a = :a", "#s = :s"]
    if t.agent is not None:
        names["#g"], values[":g"] = "agent_pk", S(agent_index_pk(t.tenant, t.agent))
        sets.append("#g = :g")
    if t.title is not None:
        names["#f"], values[":f"] = "title_fold", S(t.title.casefold())
        sets.append("#f = if_not_exists(#f, :f)")
    try:
        ddb.update_item(
            TableName=table,
            Key={"pk": item["pk"], "sk": item["sk"]},
            UpdateExpression="SET " + ", ".join(sets),
            ConditionExpression="attribute_exists(pk) AND attribute_not_exists(#a)",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )
    except ClientError as exc:
        if condition_failed(exc):
            return 0  # deleted, or moved by an append meanwhile (it has its keys)
        raise
    return 1
