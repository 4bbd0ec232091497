"""A request body must be recordable: the log's line limits (semantics.md §1), checked before
anything is written, answered `invalid_request` naming the body field.

Two steps, one mechanism for every route:

1. `parse_body`: a strict parse. Strict JSON (orjson: UTF-8, no lone surrogates, no NaN), no
   duplicate keys, integers within ±(2^53-1), finite numbers, and at most 64 levels of nesting with
   the body itself as level 1 (a body nests inside its event, the line object being level 1, so
   a deeper body can never be recorded). No parser recurses on a body that is too deep: the
   bracket count bounds the depth before anything walks it, and orjson stops at 1024 levels.
2. `blame`: a body that passes but becomes an event too large (over 1 MiB) or too deep for a line
   is refused by the writer, which builds and admits every line before it commits anything
   (`invalid_line`). The HTTP layer (`http.dispatch`) hands that refusal to `blame`, which names
   the body field that caused it; a refusal the body cannot explain stays what it was.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from ..core.canonical import MAX_DEPTH, MAX_INT, MAX_LINE_BYTES
from ..core.errors import LogError
from .errors import ApiError, invalid

_SHOWN = 6  # path segments shown before "…" when naming a deep field


class _Refused(ValueError):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise _Refused(f"has the key {k[:64]!r} twice in one object (duplicate keys are refused)")
            seen.add(k)
    return out


def _int(token: str) -> int:
    value = int(token)
    if abs(value) > MAX_INT:
        raise _Refused(f"has the integer {token[:24]}{'…' if len(token) > 24 else ''}, beyond ±(2^53-1)")
    return value


def _float(token: str) -> float:
    value = float(token)
    # JCS writes an integral number as its digits (2.5e16 is 25000000000000000): beyond 2^53-1
    # the line would carry an unsafe integer.
    if value.is_integer() and abs(value) > MAX_INT:
        raise _Refused(f"has the number {token[:24]}, an integer beyond ±(2^53-1) as JCS writes it")
    return value


def parse_body(raw: bytes) -> Any:
    """The body as a JSON value, or `invalid_request` naming what breaks the rules above."""
    try:
        orjson.loads(raw)  # strict syntax, UTF-8, no surrogates, NaN or infinity; stops at 1024 levels
    except orjson.JSONDecodeError as exc:
        if "depth" in str(exc):
            raise invalid(f"body nests deeper than {MAX_DEPTH} levels") from None
        raise invalid(f"body is not valid JSON: {exc}") from None
    deep = raw.count(b"[") + raw.count(b"{") > MAX_DEPTH
    try:
        # The stdlib parser sees the tokens orjson hides: duplicate keys and integer literals
        # (orjson turns those beyond 2^64 into floats).
        value = json.loads(raw, object_pairs_hook=_pairs, parse_int=_int, parse_float=_float)
    except _Refused as exc:
        raise invalid(f"body {exc}") from None
    except RecursionError:
        raise invalid(f"body nests deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # pragma: no cover - orjson accepted it: the grammars agree
        raise invalid(f"body is not valid JSON: {exc}") from None
    if deep:
        path = _deepest(value)
        if len(path) >= MAX_DEPTH:  # the body is level 1: a path of n keys is n+1 levels
            raise invalid(f"{_name(path)} nests deeper than {MAX_DEPTH} levels (the body is level 1)")
    return value


# ---------------------------------------------------------------- blame


def blame(body: Any, exc: LogError) -> ApiError | None:
    """`invalid_request` naming the body field that made the writer refuse a line, or None when
    the body cannot be the cause (the refusal then stays an error of its own)."""
    if exc.code != "invalid_line" or not isinstance(body, (dict, list)):
        return None
    message = exc.message
    if "longer than 1 MiB" in message:
        size = len(orjson.dumps(body))
        if size < MAX_LINE_BYTES // 2:  # the event is mostly the body, or the body isn't it
            return None
        path = _largest(body)
        return invalid(
            f"{_name(path)} is too large to record: the event it becomes would be a line over 1 MiB "
            "(semantics.md §1); put large content in an artifact"
        )
    if "nesting" in message:
        path = _deepest(body)
        if len(path) + 1 < MAX_DEPTH // 2:
            return None
        return invalid(
            f"{_name(path)} nests too deep to record: the event it becomes would nest deeper than "
            f"{MAX_DEPTH} levels (semantics.md §1)"
        )
    return None


def _children(node: Any) -> list[tuple[str | int, Any]]:
    if isinstance(node, dict):
        return list(node.items())
    if isinstance(node, list):
        return list(enumerate(node))
    return []


def _deepest(value: Any) -> list[str | int]:
    """The path (keys and indexes) to the most deeply nested container, iteratively."""
    best: list[str | int] = []
    stack: list[tuple[Any, list[str | int]]] = [(value, [])]
    while stack:
        node, path = stack.pop()
        if len(path) > len(best):
            best = path
        stack.extend((v, [*path, k]) for k, v in _children(node) if isinstance(v, (dict, list)))
    return best


def _largest(value: Any) -> list[str | int]:
    """The path to the field that holds most of the body's bytes: descend while one child holds
    more than half of its parent."""
    path: list[str | int] = []
    node, size = value, len(orjson.dumps(value))
    while True:
        sized = [(len(orjson.dumps(v)), k, v) for k, v in _children(node)]
        if not sized:
            return path
        child_size, key, child = max(sized, key=lambda t: t[0])
        if child_size * 2 < size:
            return path
        path.append(key)
        node, size = child, child_size


def _name(path: list[str | int]) -> str:
    shown = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in path[:_SHOWN])
    return "body" + shown + ("…" if len(path) > _SHOWN else "")
