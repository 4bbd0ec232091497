"""Stored lines: the EventsTable, one item per line, PK ``branch_id`` / SK ``seq`` (the header is
seq 0), and the resolved chain read from them.

An item holds ``line`` (B, the exact bytes without ``\\n``), ``hash``, ``event_id``, ``type``,
``type_version``, ``epoch``, ``critical`` (and ``stage`` while a split batch is staged above the
head; `store.append`). A line longer than ``spill_threshold`` (~300 KB; a DynamoDB item holds
400 KB) is stored in the ArtifactStore by its sha256 ("spill"), and the item keeps
``spill_sha256`` + ``spill_len`` instead of ``line``; reads fetch it and verify length and hash.

Readers never look above a branch's head: every read here is bounded by the caller's head seq
(the commit rule: a line is committed iff its seq <= head_seq), so staged or orphaned items above
it are invisible whatever they hold.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from ..core.canonical import sha256_hex
from ..core.errors import LogError
from ..core.lines import StoredLine
from .artifacts import ArtifactStore
from .dynamo import N, S
from .records import Item

SPILL_THRESHOLD = 300 * 1024
LINE_MEDIA_TYPE = "application/x-ndjson"
ALL_SEQS = (1 << 53) - 1


def line_key(branch_id: str, seq: int) -> Item:
    return {"branch_id": S(branch_id), "seq": N(seq)}


class Lines:
    def __init__(
        self,
        ddb: Any,
        events_table: str,
        artifacts: ArtifactStore | None,
        *,
        spill_threshold: int = SPILL_THRESHOLD,
    ) -> None:
        self.ddb = ddb
        self.table = events_table
        self.artifacts = artifacts
        self.spill_threshold = spill_threshold

    # ------------------------------------------------------------ items
    def spills(self, line: StoredLine) -> bool:
        return len(line.raw) > self.spill_threshold

    def item(self, branch_id: str, line: StoredLine, stage: str | None = None) -> Item:
        """The line's item; a spilled line's bytes are put to S3 first (content-addressed, so an
        orphan of a transaction that then fails is harmless)."""
        item: Item = {
            **line_key(branch_id, line.seq),
            "hash": S(line.hash),
            "epoch": N(line.epoch),
            "critical": {"BOOL": bool(line.critical)},
        }
        if line.event_id is not None:
            item["event_id"] = S(line.event_id)
        if line.type is not None:
            item["type"] = S(line.type)
        if line.event is not None and isinstance(line.event.get("type_version"), int):
            item["type_version"] = N(line.event["type_version"])
        if self.spills(line):
            if self.artifacts is None:
                raise ValueError(f"line seq {line.seq} needs a spill but the store has no ArtifactStore")
            ref = self.artifacts.put(line.raw, LINE_MEDIA_TYPE)
            item["spill_sha256"] = S(ref["sha256"])
            item["spill_len"] = N(ref["bytes"])
        else:
            item["line"] = {"B": line.raw}
        if stage is not None:
            item["stage"] = S(stage)
        return item

    def put_new(self, branch_id: str, line: StoredLine) -> Item:
        """A Put of a line that must not exist yet (branch creation)."""
        return {
            "Put": {
                "TableName": self.table,
                "Item": self.item(branch_id, line),
                "ConditionExpression": "attribute_not_exists(#seq)",
                "ExpressionAttributeNames": {"#seq": "seq"},
            }
        }

    def put_above_head(self, branch_id: str, line: StoredLine, stage: str | None) -> Item:
        """A Put of an appended line: it may overwrite only staged garbage (`store.append`)."""
        return {
            "Put": {
                "TableName": self.table,
                "Item": self.item(branch_id, line, stage=stage),
                "ConditionExpression": "attribute_not_exists(#seq) OR attribute_exists(#stage)",
                "ExpressionAttributeNames": {"#seq": "seq", "#stage": "stage"},
            }
        }

    def delete(self, branch_id: str, seq: int) -> Item:
        return {"Delete": {"TableName": self.table, "Key": line_key(branch_id, seq)}}

    def delete_all(self, branch_id: str) -> None:
        """Delete every event item of a branch (after its head is gone: nobody reads them)."""
        keys = [
            {"branch_id": item["branch_id"], "seq": item["seq"]}
            for item in self.query(branch_id, 1, ALL_SEQS, projection="branch_id, seq")
        ]
        for i in range(0, len(keys), 25):
            request: dict[str, Any] = {self.table: [{"DeleteRequest": {"Key": k}} for k in keys[i : i + 25]]}
            while request:
                out = self.ddb.batch_write_item(RequestItems=request)
                request = out.get("UnprocessedItems") or {}
                if request:
                    time.sleep(0.05)

    # ------------------------------------------------------------ reads
    def decode(self, item: Item) -> StoredLine:
        seq = int(item["seq"]["N"])
        if "line" in item:
            raw = bytes(item["line"]["B"])
        else:
            if self.artifacts is None:
                raise ValueError("a spilled line needs an ArtifactStore")
            raw = self.artifacts.get(item["spill_sha256"]["S"], int(item["spill_len"]["N"]))
        return StoredLine(
            seq=seq,
            raw=raw,
            hash=sha256_hex(raw),
            event_id=item["event_id"]["S"] if "event_id" in item else None,
            type=item["type"]["S"] if "type" in item else None,
            epoch=int(item["epoch"]["N"]) if "epoch" in item else 0,
            critical=bool(item["critical"]["BOOL"]) if "critical" in item else True,
        )

    def query(
        self, branch_id: str, lo: int, hi: int, limit: int | None = None, projection: str | None = None
    ) -> Iterable[Item]:
        """The items lo..hi (inclusive) of one branch, in seq order."""
        if lo > hi:
            return
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "#b = :b AND #s BETWEEN :lo AND :hi",
            "ExpressionAttributeNames": {"#b": "branch_id", "#s": "seq"},
            "ExpressionAttributeValues": {":b": S(branch_id), ":lo": N(lo), ":hi": N(hi)},
            "ConsistentRead": True,
        }
        if projection:
            kwargs["ProjectionExpression"] = projection.replace("branch_id", "#b").replace("seq", "#s")
        left = limit
        while True:
            if left is not None:
                kwargs["Limit"] = max(1, left)
            out = self.ddb.query(**kwargs)
            for item in out.get("Items", []):
                yield item
                if left is not None:
                    left -= 1
                    if left <= 0:
                        return
            lek = out.get("LastEvaluatedKey")
            if not lek:
                return
            kwargs["ExclusiveStartKey"] = lek

    def segment(self, branch_id: str, lo: int, hi: int) -> list[StoredLine]:
        """Lines lo..hi of one segment, all present (a gap is log_corrupt)."""
        out = [self.decode(item) for item in self.query(branch_id, lo, hi)]
        for i, line in enumerate(out):
            if line.seq != lo + i:
                raise LogError("log_corrupt", lo + i, f"line missing from branch {branch_id}")
        if lo <= hi and len(out) != hi - lo + 1:
            raise LogError("log_corrupt", lo + len(out), f"line missing from branch {branch_id}")
        return out

    def page(
        self, segments: list[tuple[str, int, int]], after_seq: int = 0, limit: int | None = None
    ) -> list[tuple[str, StoredLine]]:
        """A page of the resolved chain whose `segments` (root first) are given: the events with
        seq > after_seq (at most ``limit``), each segment's header riding with its segment: it is
        included iff after_seq is below the segment's first event seq. Headers don't count toward
        ``limit``; a page never ends with a header that precedes further lines of the page, so the
        next page (after_seq = last seq returned) neither skips nor repeats one."""
        out: list[tuple[str, StoredLine]] = []
        left = limit
        for seg, lo, hi in segments:
            if left is not None and left <= 0:
                break
            want_header = after_seq < lo
            start = max(lo, after_seq + 1)
            if not want_header and start > hi:
                continue
            end = hi if left is None else min(hi, start + left - 1)
            q_lo = 0 if want_header else start
            items = [self.decode(item) for item in self.query(seg, q_lo, end)]
            expect = ([0] if want_header else []) + list(range(start, end + 1))
            got = [line.seq for line in items]
            if got != expect:
                missing = next((s for i, s in enumerate(expect) if i >= len(got) or got[i] != s), None)
                raise LogError("log_corrupt", missing, f"line missing from branch {seg}")
            out.extend((seg, line) for line in items)
            if left is not None:
                left -= max(0, end - start + 1)
        return out
