"""The bytes of one Render v1 line: RFC 8785 (JCS) of the value, then ``\\n``.

Every request line goes through `line`, so request bytes equal `core.canonical` bytes exactly;
the fast path only skips the exact encoder where both provably agree.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..canonical import canonical_bytes

_fast_dumps = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False
).encode
_FLOATISH = re.compile(r"[0-9][.eE]")
_LONG_DIGITS = re.compile(r"\d{16,}")


def jcs(value: Any) -> bytes:
    """RFC 8785 bytes. The C encoder is exact for ASCII output without floats or long integers
    (key order and escapes coincide there); anything else takes the exact rfc8785 path."""
    text = _fast_dumps(value)
    if text.isascii() and not _FLOATISH.search(text) and not _LONG_DIGITS.search(text):
        return text.encode("ascii")
    return canonical_bytes(value)


def line(value: Any) -> bytes:
    return jcs(value) + b"\n"
