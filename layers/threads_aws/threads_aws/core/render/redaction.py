"""`context_edited` redact (semantics §7, rule 19): merged UTF-8 byte spans become [redacted]."""

from __future__ import annotations

from ..errors import LogError
from .texts import REDACTED_TEXT


def merge_spans(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sort and merge overlapping or touching spans; empty spans redact nothing."""
    out: list[list[int]] = []
    for start, end in sorted(s for s in spans if s[1] > s[0]):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(s, e) for s, e in out]


def redact_text(text: str, spans: list[tuple[int, int]], seq: int | None = None) -> str:
    """Replace each merged UTF-8 byte span of `text` with [redacted].

    Spans off the text or off a character boundary break rule 19: `invalid_transition` at `seq`.
    """
    raw = text.encode("utf-8")
    pieces: list[bytes] = []
    pos = 0
    for start, end in merge_spans(spans):
        if end > len(raw):
            raise LogError("invalid_transition", seq, "redact span past the end of the text part")
        pieces.append(raw[pos:start])
        pieces.append(REDACTED_TEXT.encode("utf-8"))
        pos = end
    pieces.append(raw[pos:])
    try:
        # Each kept slice must itself be valid UTF-8 iff every span edge is a character boundary.
        return "".join(p.decode("utf-8") for p in pieces)
    except UnicodeDecodeError as exc:
        raise LogError("invalid_transition", seq, "redact span off a character boundary") from exc
