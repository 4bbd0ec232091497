"""What a stream showed of a model request's text: the live deltas it forwarded, and what of the
committed `model_response` still has to be sent.

A request's deltas are forwarded only while they are contiguous: a chunk that carries an
`offset` (its position, in characters, in the request's streamed text or thinking) is trimmed
where it repeats what was shown and stops the stream at a gap (everything after a gap arrives
with the committed response instead). Without offsets chunks are taken as contiguous.

When the response commits, each of its text parts is sent minus the prefix the deltas already
showed (`remainders`); a client that connected after the deltas, or resumed, never saw them,
so it gets the whole text. If what was shown is not a prefix of the committed text (a delta the
stream lost, or deltas of another attempt), the whole committed text is sent again: a chunk
stream cannot take text back, and dropping the committed text would lose it.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_PENDING_CHARS = 1 << 20  # deltas held for a request the stream has not seen yet


@dataclass
class Shown:
    """One request's forwarded deltas (`text`) and reasoning deltas (`thinking`)."""

    text: str = ""
    thinking: str = ""
    text_gap: bool = False
    thinking_gap: bool = False

    def take(self, chunk: str, offset: int | None, thinking: bool) -> str | None:
        """The part of `chunk` to forward now (None: nothing), recording it as shown."""
        shown = self.thinking if thinking else self.text
        if self.thinking_gap if thinking else self.text_gap:
            return None
        if offset is not None:
            if offset > len(shown):
                if thinking:
                    self.thinking_gap = True
                else:
                    self.text_gap = True
                return None
            chunk = chunk[len(shown) - offset :]
        if not chunk:
            return None
        if thinking:
            self.thinking += chunk
        else:
            self.text += chunk
        return chunk


def remainders(parts: list[str], shown: str) -> list[str]:
    """Each committed part minus what `shown` already covered (in part order)."""
    if not "".join(parts).startswith(shown):
        return list(parts)
    out = []
    left = len(shown)
    for p in parts:
        covered = min(left, len(p))
        out.append(p[covered:])
        left -= covered
    return out


class Deltas:
    """The delta gate of one stream: which requests are in flight (a delta of a request already
    answered or abandoned is dropped; one that raced ahead of its `model_request` is held until
    the request is seen, within MAX_PENDING_CHARS), and what each showed."""

    def __init__(self) -> None:
        self.purpose: dict[str, str] = {}  # request event id → turn | compaction
        self.closed: set[str] = set()
        self.shown: dict[str, Shown] = {}
        self.pending: dict[str, list[tuple[str, int | None, bool]]] = {}
        self.pending_chars = 0

    def request(self, rid: str, purpose: str) -> list[tuple[str, int | None, bool]]:
        """Record a model_request; returns the deltas held for it, to be fed again."""
        self.purpose[rid] = purpose
        held = self.pending.pop(rid, [])
        self.pending_chars -= sum(len(x[0]) for x in held)
        return held

    def take(self, rid: str, text: str, offset: int | None, thinking: bool) -> str | None:
        """The chunk to forward now, or None (dropped, held, or nothing new)."""
        if rid in self.closed:
            return None
        if rid not in self.purpose:
            if self.pending_chars + len(text) <= MAX_PENDING_CHARS:
                self.pending.setdefault(rid, []).append((text, offset, thinking))
                self.pending_chars += len(text)
            return None
        if self.purpose[rid] != "turn":
            return None
        return self.shown.setdefault(rid, Shown()).take(text, offset, thinking)

    def close(self, rid: str) -> Shown:
        """The request got its answer (or was abandoned): what its deltas showed."""
        self.closed.add(rid)
        return self.shown.pop(rid, Shown())

    def is_turn(self, rid: str) -> bool:
        return self.purpose.get(rid, "turn") == "turn"
