"""DynamoDB plumbing shared by the row-kind modules: attribute encoders, the expression
placeholder builder, lazily created clients, and one transaction runner that decodes failures
by a tag per item.

Transactions
------------
Every TransactWriteItems request is built as a list of `Tagged(tag, item)`. DynamoDB answers a
cancelled transaction with one CancellationReason per item, in request order; `transact` zips
them back onto the tags, so callers ask "did the `head` condition fail? the `receipt`?" instead
of counting positions. A *companion* is a side row that must commit with an append (a run
receipt with its `user_input`, an approval row with its park, ...): a `Companion` carries the
tag and the TransactItem its row-kind module built; when its condition fails the append raises
`CompanionFailed(tag, stored_item)` and writes nothing.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from ..core.canonical import new_uuid7
from .records import Companion, CompanionFailed, Item

_PLACEHOLDER = re.compile(r"[#:][A-Za-z0-9_]+")
RETRY_REASONS = {
    "TransactionConflict",
    "ThrottlingError",
    "ProvisionedThroughputExceeded",
    "RequestLimitExceeded",
}
CONDITION_FAILED = "ConditionalCheckFailed"
MAX_TXN_ITEMS = 100


def S(v: str) -> dict[str, str]:
    return {"S": v}


def N(v: int) -> dict[str, str]:
    return {"N": str(int(v))}


def s_of(item: Item, name: str) -> str | None:
    v = item.get(name)
    return None if v is None or "NULL" in v else v["S"]


def n_of(item: Item, name: str) -> int | None:
    v = item.get(name)
    return None if v is None or "NULL" in v else int(v["N"])


def b_of(item: Item, name: str, default: bool = False) -> bool:
    v = item.get(name)
    return default if v is None or "NULL" in v else bool(v["BOOL"])


def each_item(
    call: Callable[..., Any], kwargs: dict[str, Any], on_page: Callable[[], None] | None = None
) -> Iterator[Item]:
    """Every item of a Query or Scan (`call`: the client's `query` or `scan`), page after page;
    `on_page` is told of each request (the callers that count their AWS calls)."""
    kwargs = dict(kwargs)
    while True:
        if on_page is not None:
            on_page()
        page = call(**kwargs)
        yield from page.get("Items", [])
        last = page.get("LastEvaluatedKey")
        if not last:
            return
        kwargs["ExclusiveStartKey"] = last


def condition_failed(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"


class Expr:
    """Collects #name/:value placeholders for one expression-bearing request."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.values: dict[str, Any] = {}

    def n(self, name: str) -> str:
        self.names["#" + name] = name
        return "#" + name

    def v(self, value: Any) -> str:
        key = f":v{len(self.values)}"
        self.values[key] = value
        return key

    def apply(self, req: dict[str, Any]) -> dict[str, Any]:
        """Attach the placeholders the request's expressions use (DynamoDB refuses unused ones)."""
        text = " ".join(
            str(req.get(k, "")) for k in ("ConditionExpression", "UpdateExpression", "KeyConditionExpression")
        )
        used = set(_PLACEHOLDER.findall(text))
        names = {k: v for k, v in self.names.items() if k in used}
        values = {k: v for k, v in self.values.items() if k in used}
        if names:
            req["ExpressionAttributeNames"] = names
        if values:
            req["ExpressionAttributeValues"] = values
        return req


def put_new(table: str, item: Item, *, return_old: bool = True) -> Item:
    """A TransactWriteItems Put that never overwrites (the stored item comes back on failure)."""
    put: Item = {"TableName": table, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}
    if return_old:
        put["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    return {"Put": put}


class LazyClient:
    """A boto3 client created on first use (once per container): building a store costs nothing
    until it talks to AWS, so a handler that needs only DynamoDB never creates the S3 client."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self._factory = factory
        self._client: Any = None
        self._lock = threading.Lock()

    @property
    def client(self) -> Any:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = self._factory()
        return self._client

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


# ---------------------------------------------------------------- transactions


@dataclass(frozen=True, slots=True)
class Tagged:
    """One TransactItem and the name its failure is reported under."""

    tag: str
    item: Item


@dataclass(frozen=True, slots=True)
class Failed:
    """The items of a cancelled transaction whose conditions failed, by tag (with the stored item
    each returned, if any)."""

    reasons: dict[str, Item]

    def __contains__(self, tag: str) -> bool:
        return tag in self.reasons

    def item(self, tag: str) -> Item | None:
        reason = self.reasons.get(tag)
        return None if reason is None else reason.get("Item")

    def first(self, tags: Sequence[str]) -> str | None:
        return next((t for t in tags if t in self.reasons), None)


def transact(ddb: Any, items: Sequence[Tagged], *, max_attempts: int = 6) -> Failed | None:
    """Run one transaction: None on success, the failed conditions by tag otherwise. Conflicts and
    throttling are retried with backoff; a ClientRequestToken makes botocore's own retries
    idempotent. Any other failure is re-raised as it is (the outcome may be unknown)."""
    request = [t.item for t in items]
    delay = 0.02
    for attempt in range(max_attempts):
        try:
            ddb.transact_write_items(TransactItems=request, ClientRequestToken=new_uuid7())
            return None
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "TransactionCanceledException":
                reasons: list[Item] = list(exc.response.get("CancellationReasons") or [])  # type: ignore[arg-type]
                codes = {r.get("Code") for r in reasons}
                if CONDITION_FAILED in codes:
                    # One reason per item, in request order (a service that answers fewer leaves
                    # the rest unattributed rather than misattributed).
                    failed = {
                        t.tag: r
                        for t, r in zip(items, reasons, strict=False)
                        if r.get("Code") == CONDITION_FAILED
                    }
                    return Failed(failed)
                if codes & RETRY_REASONS and attempt + 1 < max_attempts:
                    time.sleep(delay)
                    delay *= 2
                    continue
            raise
    raise AssertionError("unreachable")


def raise_companion(failed: Failed, companions: Sequence[Companion]) -> None:
    """Raise CompanionFailed for the first companion whose condition failed (if any)."""
    for c in companions:
        if c.tag in failed:
            raise CompanionFailed(c.tag, failed.item(c.tag))


def companion_items(companions: Sequence[Companion], reserved: Sequence[str] = ()) -> list[Tagged]:
    """The companions as tagged TransactItems; their tags must be unique and not name an item of
    the store's own (the head, a line, ...)."""
    tags = [c.tag for c in companions]
    if len(set(tags)) != len(tags) or any(t in reserved or t.startswith("line:") for t in tags):
        raise ValueError(f"companion tags must be unique and not reserved: {tags}")
    return [Tagged(c.tag, c.item) for c in companions]
