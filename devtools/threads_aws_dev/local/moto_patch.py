"""A semantics-preserving speed-up of moto's DynamoDB TransactWriteItems (tests and `threads-aws
dev` both run on moto).

moto's TransactWriteItems deep-copies every touched *table* once per TransactItem so it can roll
back, which is O(items in table x items in transaction): a 5,000-event branch took ~8 minutes.
The replacement does an equivalent per-key rollback: snapshot only the partitions the transaction
touches (shallow) and the items it updates in place (deep), and restore them if moto raises.
Semantics are unchanged; if moto's internals differ, it stays unpatched (slow but right).
"""

from __future__ import annotations

from typing import Any, Protocol


class _Setattr(Protocol):
    def setattr(self, target: Any, name: str, value: Any, raising: bool = ...) -> None: ...


def speed_up_moto_transactions(monkeypatch: _Setattr | None = None) -> bool:
    """Patch moto's DynamoDBBackend.transact_write_items; True if patched.

    With a pytest ``monkeypatch`` the patch is undone after the test; without one it lasts for
    the process (the dev server). Patching twice is harmless (the second call is a no-op)."""
    import copy

    try:
        from moto.dynamodb import models as m
        from moto.dynamodb.models.dynamo_type import DynamoType
        from moto.dynamodb.models.table import Table

        original = m.DynamoDBBackend.transact_write_items
        assert m.copy is copy
    except Exception:  # pragma: no cover - a moto version we don't know: stay slow but right
        return False
    if getattr(original, "_threads_fast", False):
        return True

    class _NoTableCopy:
        @staticmethod
        def deepcopy(x: Any, memo: Any = None) -> Any:
            return x if isinstance(x, Table) else copy.deepcopy(x, memo)

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        saved: dict[tuple[int, Any], tuple[Any, Any, Any]] = {}
        for entry in transact_items:
            op_type, op = next(iter(entry.items()))
            table = self.tables.get(op.get("TableName"))
            src = op.get("Item") if op_type == "Put" else op.get("Key")
            if table is None or not src or table.hash_key_attr not in src:
                continue
            h = DynamoType(src[table.hash_key_attr])
            if (id(table), h) not in saved:
                part = table.items.get(h) if h in table.items else None
                snap = dict(part) if (part is not None and table.range_key_attr) else copy.deepcopy(part)
                saved[(id(table), h)] = (table, h, snap)
            if op_type == "Update" and table.range_key_attr and table.range_key_attr in src:
                snap = saved[(id(table), h)][2]
                r = DynamoType(src[table.range_key_attr])
                if snap is not None and r in snap:
                    snap[r] = copy.deepcopy(snap[r])
        m.copy = _NoTableCopy  # type: ignore[assignment]
        try:
            return original(self, transact_items)
        except Exception:
            for table, h, snap in saved.values():
                if snap is None:
                    table.items.pop(h, None)
                else:
                    table.items[h] = snap
            raise
        finally:
            m.copy = copy

    transact_write_items._threads_fast = True  # type: ignore[attr-defined]
    if monkeypatch is not None:
        monkeypatch.setattr(m.DynamoDBBackend, "transact_write_items", transact_write_items)
    else:
        m.DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
    return True


def serialize_dynamodb(monkeypatch: _Setattr | None = None) -> bool:
    """Run moto's DynamoDB operations one at a time; True if patched.

    moto checks a ConditionExpression and then writes without a lock, so two threads (of the
    threaded moto server, or of a test under `mock_aws`) can both pass the same condition: two
    writers would win one head. Real DynamoDB makes each conditional write and transaction
    atomic, and the fenced appends rely on it, so every DynamoDB backend call is serialized
    (reads too: a transaction is applied item by item, and a read must not see half of it).
    With a pytest ``monkeypatch`` the patch is undone after the test; without one it lasts for
    the process (the dev server)."""
    import functools
    import threading

    try:
        from moto.dynamodb.models import DynamoDBBackend
    except Exception:  # pragma: no cover
        return False
    if getattr(DynamoDBBackend, "_threads_serialized", False):
        return True
    lock = threading.RLock()
    setter = monkeypatch.setattr if monkeypatch is not None else setattr
    for name, fn in list(vars(DynamoDBBackend).items()):
        if name.startswith("_") or not callable(fn) or isinstance(fn, (staticmethod, classmethod)):
            continue

        def locked(*args: Any, __fn: Any = fn, **kwargs: Any) -> Any:
            with lock:
                return __fn(*args, **kwargs)

        setter(DynamoDBBackend, name, functools.wraps(fn)(locked))
    if monkeypatch is not None:
        monkeypatch.setattr(DynamoDBBackend, "_threads_serialized", True, raising=False)
    else:
        DynamoDBBackend._threads_serialized = True  # type: ignore[attr-defined]
    return True
