"""RFC 8785 (JCS) bytes, strict line admission, hashes and ids.

Admission decides whether raw bytes are one canonical JSON object. The fast path parses and
re-encodes with orjson (C), whose sorted compact output equals JCS byte for byte for values
without floats, with integers in the safe range (OPT_STRICT_INTEGER), and with keys inside the
Basic Multilingual Plane (fuzzed against `rfc8785` in the tests). Anything else, and every
refusal, takes the exact `rfc8785` path, which also names the failure. Duplicate keys need no
separate check: the parsed dict keeps one of them, so its re-encoding never equals the input.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import orjson
import rfc8785

MAX_LINE_BYTES = 1 << 20
MAX_DEPTH = 64
MAX_INT = (1 << 53) - 1

_orjson_dumps = orjson.dumps
_orjson_loads = orjson.loads
_FAST = orjson.OPT_SORT_KEYS | orjson.OPT_STRICT_INTEGER


class NotCanonical(ValueError):
    """The bytes are not one admissible canonical JSON object. `value` is the parsed object
    when the bytes were JSON at all (so a reader can still name the line by its seq)."""

    def __init__(self, message: str, value: Any = None) -> None:
        super().__init__(message)
        self.value = value


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def canonical_bytes(value: Any) -> bytes:
    """JCS bytes of a JSON value (raises NotCanonical for values JCS cannot represent)."""
    try:
        return rfc8785.dumps(value)
    except Exception as exc:  # rfc8785 raises several domain errors
        raise NotCanonical(str(exc)) from exc


def canonical_hash(value: Any) -> str:
    return sha256_hex(canonical_bytes(value))


def new_uuid7() -> str:
    """An RFC 9562 UUIDv7 from the `uuid6` package (the user's choice of library): 48-bit Unix
    milliseconds, strictly increasing within a process, so ids made here sort in creation order.
    Imported on first use: `uuid6` reads its own version through importlib.metadata at import,
    which would put importlib.metadata, email and zipfile into every handler's cold start; a
    handler mints its first id while serving a request, not while loading."""
    global _uuid7
    if _uuid7 is None:
        from uuid6 import uuid7

        _uuid7 = uuid7
    return str(_uuid7())


_uuid7: Any = None


def _depth_ok(value: Any, limit: int = MAX_DEPTH) -> bool:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return False
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values() if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node if isinstance(v, (dict, list)))
    return True


def _ints_ok(value: Any) -> bool:
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, int) and not isinstance(node, bool) and abs(node) > MAX_INT:
            return False
    return True


def admit(raw: bytes) -> dict[str, Any]:
    """Parse one line (without its newline) and require it to be canonical JCS.

    Raises NotCanonical for anything a strict reader refuses: bad UTF-8, bad JSON, a non-object,
    nesting deeper than 64, integers outside the safe range, or bytes that differ from JCS.
    """
    value = admit_fast(raw)
    return _admit_exact(raw) if value is None else value


def admit_fast(raw: bytes) -> dict[str, Any] | None:
    """The parsed line when the fast path proves it canonical, else None (then `admit` decides
    and names the failure). Only C calls: the importer runs this once per line."""
    # Counting brackets over-approximates depth: only a line that could be too deep is walked,
    # and no parser ever recurses on one that is. Keys with non-BMP characters (UTF-8 lead byte
    # >= 0xF0) sort by UTF-16 units in JCS but by code points in orjson: any such byte is exact.
    if (
        len(raw) > MAX_LINE_BYTES
        or raw.count(b"[") + raw.count(b"{") > MAX_DEPTH
        or not (raw.isascii() or max(raw) < 0xF0)
    ):
        return None
    try:
        value = _orjson_loads(raw)
        if type(value) is not dict or _orjson_dumps(value, option=_FAST) != raw:
            return None
    except (orjson.JSONDecodeError, orjson.JSONEncodeError):
        return None
    # orjson writes some floats unlike JCS (1000.0, 1e+16): a line with a float takes the exact
    # path. The bytes equal orjson's compact output, so a float token there holds `.` and a
    # digit, or is `[:,[]-?De±N` (one digit before the exponent). Each search starts at a
    # single literal byte (re's fast scan: cheaper than walking the parsed value); a match
    # inside a string ("3.11") only costs the walk.
    if (
        _DOT_DIGIT(raw) is not None or _EXP_PLUS(raw) is not None or _EXP_MINUS(raw) is not None
    ) and _has_float(value):
        return None
    return value


_DOT_DIGIT = re.compile(rb"\.[0-9]").search
_EXP_PLUS = re.compile(rb"\+(?:(?<=[:,\[][0-9]e\+)|(?<=[:,\[]-[0-9]e\+))").search
_EXP_MINUS = re.compile(rb"-(?<=e-)(?:(?<=[:,\[][0-9]e-)|(?<=[:,\[]-[0-9]e-))").search


def _has_float(value: dict[str, Any]) -> bool:
    stack: list[Any] = [value]
    while stack:
        node = stack.pop()
        for child in node.values() if type(node) is dict else node:
            kind = type(child)
            if kind is dict or kind is list:
                stack.append(child)
            elif kind is float:
                return True
    return False


def _admit_exact(raw: bytes) -> dict[str, Any]:
    if len(raw) > MAX_LINE_BYTES:  # admit_fast declines these: the rule is enforced here
        raise NotCanonical("line longer than 1 MiB")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotCanonical("not UTF-8") from exc
    deep_suspect = raw.count(b"[") + raw.count(b"{") > MAX_DEPTH
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except RecursionError as exc:
        raise NotCanonical("nesting too deep") from exc
    except ValueError as exc:
        raise NotCanonical(f"not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise NotCanonical("a line is one JSON object")
    if deep_suspect and not _depth_ok(value):
        raise NotCanonical("nesting deeper than 64")  # its seq is deliberately not read
    if not _ints_ok(value):
        raise NotCanonical("integer outside the safe range", value)
    try:
        again = canonical_bytes(value)
    except NotCanonical as exc:
        raise NotCanonical(str(exc), value) from exc
    if again != raw:
        raise NotCanonical("bytes differ from their RFC 8785 form", value)
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
