"""AWS event-stream framing (`application/vnd.amazon.eventstream`), the binary framing of
Bedrock's ConverseStream response: per message a prelude (total length, headers length, CRC32 of
those 8 bytes), the headers, the payload, and a CRC32 of everything before it. Header values
here are strings (type 7): `:message-type` (event|exception), `:event-type` or
`:exception-type`, `:content-type`. Written from the public framing description; botocore's
`EventStreamBuffer` is the reader that tests check it against."""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any


def _headers(headers: dict[str, str]) -> bytes:
    out = b""
    for name, value in headers.items():
        n, v = name.encode(), value.encode()
        out += struct.pack("!B", len(n)) + n + b"\x07" + struct.pack("!H", len(v)) + v
    return out


def frame(headers: dict[str, str], payload: bytes) -> bytes:
    h = _headers(headers)
    total = 12 + len(h) + len(payload) + 4
    prelude = struct.pack("!II", total, len(h))
    head = prelude + struct.pack("!I", zlib.crc32(prelude)) + h + payload
    return head + struct.pack("!I", zlib.crc32(head))


def event(event_type: str, body: dict[str, Any]) -> bytes:
    return frame(
        {":event-type": event_type, ":content-type": "application/json", ":message-type": "event"},
        json.dumps(body).encode(),
    )


def exception(exception_type: str, message: str) -> bytes:
    return frame(
        {
            ":exception-type": exception_type,
            ":content-type": "application/json",
            ":message-type": "exception",
        },
        json.dumps({"message": message}).encode(),
    )
