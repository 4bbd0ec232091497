"""Effect records of `threads-aws dev`'s journal (see `persist_moto` for when they are written):
what a request changed, not the request, for the two services where replaying the request
would not give the same state.

- DynamoDB item writes: the after-images of the items touched (None: deleted), read from moto
  under the apply lock right after the request; one record per request, so a transaction is all
  or nothing in the journal too. Replay puts or deletes the images: no condition is evaluated
  again, so replay cannot decide differently.
- SQS: a message added (id, body, attributes, group, dedup id, sequence number, sent time and
  delay; a deduplicated send adds nothing), messages deleted (by id: receipt handles are
  resolved when the delete runs) and purges. Replay rebuilds the messages in their order, all
  visible: receives are not journaled.
- Snapshots (compaction) are written in the same kinds, plus one S3 object record per object.

moto internals used here (Queue._messages, Message fields, backend put_item/get_item/
put_object) are checked by tests/test_dev_persist.py against the pinned moto.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Callable, Iterator
from typing import Any

_ctx = threading.local()  # .records: list of effect records while a journaled SQS request runs


def collect() -> None:
    """Start recording SQS effects of the request running on this thread."""
    _ctx.records = []


def collected() -> list[dict[str, Any]]:
    """Stop recording; the effects recorded since `collect`."""
    records = getattr(_ctx, "records", None) or []
    _ctx.records = None
    return records


def _jsonable(v: Any) -> Any:
    if isinstance(v, bytes):
        return {"$b64": base64.b64encode(v).decode("ascii")}
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_jsonable(x) for x in v]
    return v


def _unjson(v: Any) -> Any:
    if isinstance(v, dict):
        if set(v) == {"$b64"}:
            return base64.b64decode(v["$b64"])
        return {k: _unjson(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_unjson(x) for x in v]
    return v


def _where(queue: Any) -> dict[str, Any]:
    return {"acct": queue.account_id, "region": queue.region, "queue": queue.name}


def message_record(queue: Any, m: Any) -> dict[str, Any]:
    return {
        "k": "sqs.add",
        **_where(queue),
        "msg": {
            "id": m.id,
            "body": m.body,
            "attrs": _jsonable(m.message_attributes),
            "system": _jsonable(m.system_attributes),
            "sender": m.sender_id,
            "sent": m.sent_timestamp,
            "dedup": m.deduplication_id,
            "group": m.group_id,
            "seq": m.sequence_number,
            "delayed_until": m.delayed_until,
        },
    }


def install_sqs_hooks(setter: Callable[[Any, str, Any], None] = setattr) -> None:
    """Record SQS effects of journaled requests (pass a pytest monkeypatch.setattr to undo).
    Outside a journaled request (a receive moving a message to its DLQ) nothing is recorded."""
    from moto.sqs.models import Queue, SQSBackend

    if getattr(Queue.add_message, "_threads_journal", False):
        return
    add, delete, purge = Queue.add_message, Queue.delete_message, SQSBackend.purge_queue

    def add_message(self: Any, message: Any) -> None:
        add(self, message)
        records = getattr(_ctx, "records", None)
        if records is not None and any(m is message for m in reversed(self._messages)):
            records.append(message_record(self, message))  # not deduplicated away

    def delete_message(self: Any, receipt_handle: str) -> None:
        records = getattr(_ctx, "records", None)
        ids = (
            [m.id for m in self._messages if m.had_receipt_handle(receipt_handle)]
            if records is not None
            else []
        )
        delete(self, receipt_handle)
        if records is not None and ids:
            records.append({"k": "sqs.del", **_where(self), "ids": ids})

    def purge_queue(self: Any, queue_name: str) -> None:
        purge(self, queue_name)
        records = getattr(_ctx, "records", None)
        if records is not None:
            records.append({"k": "sqs.purge", **_where(self.get_queue(queue_name))})

    for fn in (add_message, delete_message, purge_queue):
        setattr(fn, "_threads_journal", True)  # noqa: B010 - a marker on a function
    setter(Queue, "add_message", add_message)
    setter(Queue, "delete_message", delete_message)
    setter(SQSBackend, "purge_queue", purge_queue)


# ---------------------------------------------------------------- DynamoDB effects


def _wire(v: Any) -> Any:
    """An item as DynamoDB's JSON wire format has it: moto's to_json() hands nested binary
    values back as bytes, the wire (and so moto's state after a request) as base64 text."""
    if isinstance(v, bytes):
        return base64.b64encode(v).decode("ascii")
    if isinstance(v, dict):
        return {k: _wire(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_wire(x) for x in v]
    return v


def item_image(item: Any) -> dict[str, Any]:
    return _wire(item.to_json()["Attributes"])  # type: ignore[no-any-return]


def _touched(action: str, req: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(table, item-or-key) of every item a successful write request may have changed."""
    if action in ("PutItem", "UpdateItem", "DeleteItem"):
        return [(req["TableName"], req.get("Item") or req["Key"])]
    out: list[tuple[str, dict[str, Any]]] = []
    if action == "BatchWriteItem":
        for table, writes in req.get("RequestItems", {}).items():
            for w in writes:
                if "PutRequest" in w:
                    out.append((table, w["PutRequest"]["Item"]))
                elif "DeleteRequest" in w:
                    out.append((table, w["DeleteRequest"]["Key"]))
    elif action == "TransactWriteItems":
        for entry in req.get("TransactItems", []):
            for op in ("Put", "Update", "Delete"):
                if op in entry:
                    out.append((entry[op]["TableName"], entry[op].get("Item") or entry[op]["Key"]))
    return out


def ddb_effect(action: str, region: str, body: bytes) -> dict[str, Any]:
    """The after-images of the items a successful write changed, read from moto under the apply
    lock: one record per request (a transaction is all or nothing in the journal too). Replay
    sets them without re-evaluating any condition: exact and cheap."""
    import orjson
    from moto.dynamodb.models import dynamodb_backends

    sets = []
    seen: set[tuple[str, str, bytes]] = set()
    for name, src in _touched(action, orjson.loads(body)):
        name = name.rsplit("table/", 1)[-1] if name.startswith("arn:") else name
        acct, backend = next(
            (a, b) for a, r, b in _backends(dynamodb_backends) if r == region and name in b.tables
        )
        table = backend.tables[name]
        key = {a: src[a] for a in (table.hash_key_attr, table.range_key_attr) if a}
        ident = (acct, name, orjson.dumps(key, option=orjson.OPT_SORT_KEYS))
        if ident in seen:
            continue
        seen.add(ident)
        item = backend.get_item(name, key)
        sets.append({"acct": acct, "table": name, "key": key, "item": item_image(item) if item else None})
    return {"k": "ddb.set", "region": region, "sets": sets}


def _apply_ddb(meta: dict[str, Any]) -> None:
    from moto.dynamodb.models import dynamodb_backends

    for s in meta["sets"]:
        backend = dynamodb_backends[s["acct"]][meta["region"]]
        if s["item"] is None:
            if backend.get_item(s["table"], s["key"]) is not None:
                backend.delete_item(s["table"], s["key"])
        else:
            backend.put_item(s["table"], s["item"])


def _queue(meta: dict[str, Any]) -> Any:
    from moto.sqs.models import sqs_backends

    return sqs_backends[meta["acct"]][meta["region"]].get_queue(meta["queue"])


def _apply_sqs(meta: dict[str, Any]) -> None:
    from moto.sqs.models import Message

    queue = _queue(meta)
    kind = meta["k"]
    if kind == "sqs.add":
        d = meta["msg"]
        m = Message(d["id"], d["body"], _unjson(d.get("system")) or None)
        m.message_attributes = _unjson(d.get("attrs")) or {}
        m.sender_id = d.get("sender") or m.sender_id
        m.sent_timestamp = d.get("sent")
        m.deduplication_id = d.get("dedup")
        m.group_id = d.get("group")
        m.sequence_number = d.get("seq")
        m.delayed_until = float(d.get("delayed_until") or 0.0)
        with queue._messages_lock:
            queue._messages.append(m)
            queue._messages_lock.notify_all()
    elif kind == "sqs.del":
        ids = set(meta["ids"])
        with queue._messages_lock:
            queue._messages = [m for m in queue._messages if m.id not in ids]
    elif kind == "sqs.purge":
        with queue._messages_lock:
            queue._messages = []


def _apply_object(meta: dict[str, Any], body: bytes) -> None:
    from moto.s3.models import s3_backends

    backend = s3_backends[meta["acct"]][meta["part"]]
    key = backend.put_object(
        meta["bucket"],
        meta["key"],
        body,
        storage=meta.get("storage"),
        checksum_value=meta.get("checksum"),
        disable_notification=True,
    )
    key.set_metadata(dict(meta.get("meta") or {}))
    if meta.get("algo"):
        key.checksum_algorithm = meta["algo"]


def apply_effect(meta: dict[str, Any], body: bytes) -> bool:
    """Apply an effect or snapshot record; False if `meta` is not one (moto errors propagate)."""
    kind = meta.get("k")
    if kind in ("sqs.add", "sqs.del", "sqs.purge"):
        _apply_sqs(meta)
    elif kind == "ddb.set":
        _apply_ddb(meta)
    elif kind == "s3.object":
        _apply_object(meta, body)
    else:
        return False
    return True


def _backends(backend_dict: Any) -> Iterator[tuple[str, str, Any]]:
    """(account, region or partition, backend) of every backend moto has instantiated."""
    for acct, regions in list(backend_dict.items()):
        for region, backend in list(regions.items()):
            yield acct, region, backend


def resources() -> dict[str, set[str]]:
    """Names of the tables, buckets and queues moto holds now."""
    from moto.dynamodb.models import dynamodb_backends
    from moto.s3.models import s3_backends
    from moto.sqs.models import sqs_backends

    return {
        "table": {n for _, _, b in _backends(dynamodb_backends) for n in b.tables},
        "bucket": {n for _, _, b in _backends(s3_backends) for n in b.buckets},
        "queue": {n for _, _, b in _backends(sqs_backends) for n in b.queues},
    }


def snapshot_records() -> Iterator[tuple[dict[str, Any], bytes]]:
    """The state moto holds, as records `apply_record` rebuilds it from (into the template's
    freshly created resources): every DynamoDB item, S3 object (latest version) and SQS message
    (in-flight ones become visible, as after any restart)."""
    from moto.dynamodb.models import dynamodb_backends
    from moto.s3.models import FakeKey, s3_backends
    from moto.sqs.models import sqs_backends

    for acct, region, ddb in _backends(dynamodb_backends):
        for name, table in ddb.tables.items():
            keys = [a for a in (table.hash_key_attr, table.range_key_attr) if a]
            items = table.all_items()
            for i in range(0, len(items), 100):
                sets = []
                for item in items[i : i + 100]:
                    attrs = item_image(item)
                    sets.append(
                        {"acct": acct, "table": name, "key": {a: attrs[a] for a in keys}, "item": attrs}
                    )
                yield {"k": "ddb.set", "region": region, "sets": sets}, b""
    for acct, part, s3 in _backends(s3_backends):
        for bname, bucket in s3.buckets.items():
            for kname, key in bucket.keys.items():
                if not isinstance(key, FakeKey):
                    continue  # a delete marker
                meta = {
                    "k": "s3.object",
                    **{"acct": acct, "part": part, "bucket": bname, "key": kname},
                    "meta": dict(key.metadata),
                    "storage": key.storage_class,
                    "checksum": key.checksum_value,
                    "algo": key.checksum_algorithm,
                }
                yield meta, key.value
    for _, _, sqs in _backends(sqs_backends):
        for queue in sqs.queues.values():
            for m in list(queue._messages):
                yield message_record(queue, m), b""
