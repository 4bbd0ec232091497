"""Bounds on a webhook body, checked on the raw bytes before anything parses them.

The adapters parse the unverified body to learn which installation's secret to try
(`claimed_installations`), so a body that no provider would send must be refused before that
parse: Python's `json` recurses per nesting level, and a few thousand ``[`` raise
`RecursionError` (a function error, a 502 and an alarm per request). Real deliveries are far
inside both bounds: Slack's payloads are kilobytes and nest a dozen levels (blocks inside
rich text); Meta documents WhatsApp batches of up to ~3 MB.

The depth is counted by a scan that skips JSON strings (a bracket inside a string is text), on
the raw bytes and, for a form body (Slack interactivity sends ``payload=<url-encoded JSON>``),
on its url-decoded bytes too. The scan only over-counts (stray brackets outside any JSON), never
under-counts what `json.loads` would recurse into.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_to_bytes

MAX_BODY_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 64

# A JSON string (escapes included) is one token; otherwise only the structural brackets matter.
_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"?|[\[\]{}]', re.DOTALL)
_OPEN = frozenset(b"[{")


def depth(data: bytes) -> int:
    """The deepest bracket nesting of `data` outside JSON strings."""
    level = deepest = 0
    for m in _TOKENS.finditer(data):
        c = data[m.start()]
        if c in _OPEN:
            level += 1
            deepest = max(deepest, level)
        elif c != 0x22:  # a closing bracket ('"' starts a string token)
            level = max(0, level - 1)
    return deepest


def refusal(body: bytes) -> str | None:
    """Why this body cannot be a provider's delivery (too large or too deep), or None."""
    if len(body) > MAX_BODY_BYTES:
        return f"body of {len(body)} bytes is over the {MAX_BODY_BYTES}-byte bound of a webhook"
    deepest = depth(body)
    if b"%" in body:  # a url-encoded form: its values nest as they decode
        deepest = max(deepest, depth(unquote_to_bytes(body.replace(b"+", b" "))))
    if deepest > MAX_DEPTH:
        return f"body nests {deepest} levels, over the {MAX_DEPTH}-level bound of a webhook"
    return None
