"""Live delta rows: the text a model request has streamed so far, for run subscriptions to show
before its `model_response` commits. Never part of the log: a lost or stale row only means a
subscriber sees the text when the response commits instead of as it streams.

Item: pk ``DELTA#<branch_id>``, sk ``<request_event_id>`` (the `model_request` the worker is
answering): kind "delta", ``text`` / ``thinking`` (S: the *tail* of the request's streamed text
and reasoning), ``text_at`` / ``thinking_at`` (N: the tail's position in the whole streamed text,
in code points), ``version`` (N, grows with every write), ``updated_at`` (N, ms) and ``ttl``
(N, epoch s: DynamoDB deletes the row about TTL_S after its last write, free of charge).

Ordering and fencing: only the worker holding the branch's lease calls the model for a request,
and C2 makes the `model_request` durable before the call, so a row names a request already in
the log. A write never replaces a newer one (``version`` condition). Each tail is kept under
TAIL_BYTES of UTF-8 so the row stays under 4 KB (one read unit, at most four write units) however
long the answer grows; a subscriber that falls further behind than a tail sees a gap (`text_at`
past what it showed) and leaves that request's remaining text to the committed response.

A subscriber reads its run's branch head and the rows of the requests it knows to be in flight
in one strongly consistent BatchGetItem (`head_and_rows`): one request per poll for both.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from .branches import BranchRecord, branch_key
from .dynamo import N, S, condition_failed, n_of, s_of
from .records import Clock, Item, wall_ms

TAIL_BYTES = 1536  # per text kind: two tails and the keys stay under one 4 KB read unit
TTL_S = 3600
MAX_KEYS = 99  # BatchGetItem takes 100 keys; one is the head


def delta_key(branch_id: str, request_event_id: str) -> Item:
    return {"pk": S(f"DELTA#{branch_id}"), "sk": S(request_event_id)}


def tail(text: str, limit: int = TAIL_BYTES) -> tuple[str, int]:
    """The longest suffix of `text` within `limit` bytes of UTF-8, and its position in `text`."""
    piece = text[-limit:]  # a code point is at least one byte: never fewer than needed
    raw = piece.encode("utf-8")
    if len(raw) > limit:
        piece = raw[-limit:].decode("utf-8", "ignore")  # drops a code point cut in half
    return piece, len(text) - len(piece)


@dataclass(frozen=True, slots=True)
class DeltaRow:
    branch_id: str
    request_event_id: str
    text: str = ""
    text_at: int = 0
    thinking: str = ""
    thinking_at: int = 0
    version: int = 0
    updated_at: int = 0

    @classmethod
    def from_item(cls, item: Item) -> DeltaRow:
        return cls(
            branch_id=item["pk"]["S"].removeprefix("DELTA#"),
            request_event_id=item["sk"]["S"],
            text=s_of(item, "text") or "",
            text_at=n_of(item, "text_at") or 0,
            thinking=s_of(item, "thinking") or "",
            thinking_at=n_of(item, "thinking_at") or 0,
            version=n_of(item, "version") or 0,
            updated_at=n_of(item, "updated_at") or 0,
        )

    def item(self, ttl_s: int) -> Item:
        return {
            **delta_key(self.branch_id, self.request_event_id),
            "kind": S("delta"),
            "text": S(self.text),
            "text_at": N(self.text_at),
            "thinking": S(self.thinking),
            "thinking_at": N(self.thinking_at),
            "version": N(self.version),
            "updated_at": N(self.updated_at),
            "ttl": N(self.updated_at // 1000 + ttl_s),
        }

    def part(self, thinking: bool) -> tuple[str, int]:
        """(tail, its position) of the text or the reasoning."""
        return (self.thinking, self.thinking_at) if thinking else (self.text, self.text_at)


class DeltaRows:
    def __init__(self, ddb: Any, state_table: str, *, clock: Clock = wall_ms, ttl_s: int = TTL_S) -> None:
        self.ddb = ddb
        self.table = state_table
        self.clock = clock
        self.ttl_s = ttl_s

    def put(self, row: DeltaRow) -> bool:
        """Write `row` unless a row of a higher version is stored; False when one is."""
        try:
            self.ddb.put_item(
                TableName=self.table,
                Item=row.item(self.ttl_s),
                ConditionExpression="attribute_not_exists(pk) OR version < :v",
                ExpressionAttributeValues={":v": N(row.version)},
            )
        except ClientError as exc:
            if condition_failed(exc):
                return False
            raise
        return True

    def head_and_rows(
        self, branch_id: str, request_event_ids: Sequence[str] = ()
    ) -> tuple[BranchRecord | None, dict[str, DeltaRow]]:
        """The branch head and the stored rows of these requests, strongly consistent, in one
        BatchGetItem (a request without a row is simply absent)."""
        keys = [branch_key(branch_id)] + [delta_key(branch_id, r) for r in request_event_ids[:MAX_KEYS]]
        request: dict[str, Any] = {self.table: {"Keys": keys, "ConsistentRead": True}}
        head_pk = keys[0]["pk"]
        head: BranchRecord | None = None
        rows: dict[str, DeltaRow] = {}
        delay = 0.01
        while request:
            out = self.ddb.batch_get_item(RequestItems=request)
            for item in out.get("Responses", {}).get(self.table, []):
                if item["pk"] == head_pk:
                    head = BranchRecord.from_item(item)
                else:
                    row = DeltaRow.from_item(item)
                    rows[row.request_event_id] = row
            request = out.get("UnprocessedKeys") or {}
            if request:  # throttled: BatchGetItem hands back what it did not read
                time.sleep(delay)
                delay = min(delay * 2, 0.2)
        return head, rows
