"""A model answer too large for one log line (semantics §1: max line 1 MiB, bigger content goes
into artifacts).

The contract's `OutputPart` has no by-reference text part, so an answer whose `model_response`
line would pass the limit cannot be recorded as it came. Refusing the append would leave the
request unanswered, and recovery would re-send it: a billed request per attempt, for an answer
that was already received. Instead:

1. the whole answer (the adapter's content, canonical JSON) is stored as an artifact first —
   durable before anything names it, as every artifact;
2. the response records a preview: text parts cut from the largest down until the line fits,
   each cut part ending with a marker that names the artifact's sha256 and size; when the text
   alone cannot make room (a huge tool input), the content becomes one marker text part and the
   stop reason `other`, so the turn ends `error` instead of dispatching a call it cannot record;
3. `completeness` is `partial`: the recorded content is part of the answer.

The request is never re-sent. Render v1 renders the preview, so the model sees its own answer
was cut and where the whole of it lies.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from ..core.canonical import MAX_LINE_BYTES, canonical_bytes

# The envelope (ids, hashes, actor, timestamps) and the event's other fields take a few hundred
# bytes; the margin keeps the line under the limit whatever they hold.
DATA_BUDGET = MAX_LINE_BYTES - 16 * 1024
MEDIA_TYPE = "application/json"

Put = Callable[[bytes, str], dict[str, Any]]


def fits(response: dict[str, Any]) -> bool:
    # Every answer passes here, and `rfc8785` is pure Python: measure exactly only near the
    # limit. orjson's compact form differs from JCS only in number spelling (JCS adds at most
    # the "+" of an exponent, never doubling a number's length), so twice its size bounds JCS's.
    try:
        if 2 * len(orjson.dumps(response, option=orjson.OPT_STRICT_INTEGER)) <= DATA_BUDGET:
            return True
    except (TypeError, orjson.JSONEncodeError):
        pass  # an integer past 2^53: the exact measure refuses it, as before
    return len(canonical_bytes(response)) <= DATA_BUDGET


def marker(ref: dict[str, Any]) -> str:
    return (
        f"\n\n[answer cut to fit the log's 1 MiB line: the whole answer, {ref['bytes']} bytes, "
        f"is artifact sha256:{ref['sha256']}]"
    )


def fit(response: dict[str, Any], put: Put) -> dict[str, Any]:
    """`response` as it is when it fits, else its preview with the whole answer stored by `put`."""
    if fits(response):
        return response
    whole = canonical_bytes(response["content"])
    ref = put(whole, MEDIA_TYPE)
    note = marker(ref)
    cut = {**response, "completeness": "partial", "content": [dict(p) for p in response["content"]]}
    excess = len(canonical_bytes(cut)) - DATA_BUDGET
    texts = sorted(
        (i for i, p in enumerate(cut["content"]) if p.get("type") == "text"),
        key=lambda i: -len(cut["content"][i]["text"]),
    )
    for i in texts:
        if excess <= 0:
            break
        part = cut["content"][i]
        text = part["text"]
        keep = _prefix_within(text, max(0, _utf8_len(text) - excess - _utf8_len(note) - 64))
        part["text"] = keep + note
        excess = len(canonical_bytes(cut)) - DATA_BUDGET
    if excess <= 0:
        return cut
    only = [{"type": "text", "text": note.strip()}]
    return {**response, "completeness": "partial", "stop_reason": "other", "content": only}


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


def _prefix_within(text: str, limit: int) -> str:
    """The longest prefix of `text` whose UTF-8 encoding is at most `limit` bytes (JSON escapes
    can make the line longer than the bytes; the loop in `fit` measures again)."""
    raw = text.encode("utf-8")[:limit]
    return raw.decode("utf-8", errors="ignore")
