"""The framing both stream mappers share: inputs, output groups, cursors and resume.

Inputs, in the order the run subscription has them (semantics §5):
- `{kind: event, event}` — a committed log event (the parsed envelope, with `seq`);
- `{kind: delta, request_event_id, text}` — a text chunk of the model request in flight; the
  mapper also takes `thinking: true` (a reasoning chunk) and `offset` (the chunk's position in
  the request's streamed text, which lets it drop a repeat and stop at a gap) — both are the
  worker→stream channel's, not the public SSE message's;
- `{kind: status, status: retry_wait, until}`;
- `{kind: result, run_id, result: RunOutcome}`.

Outputs: each committed event yields one *group*. An output is *stable* when it is a function of
the committed log alone (a mapper rebuilt from the log emits it again, identically numbered);
outputs that depend on what this stream saw live (the catch-up of text the deltas did not cover,
closing a message the deltas opened) are unstable. Ids, assigned per group:
- the group's last output carries `str(seq)` when the group has any stable output;
- every earlier stable output carries `"<seq>.<k>"`, k its index among the group's stable outputs;
- other outputs, and every transient output, carry none (they are never replayed).
A cursor `"17"` therefore means "all of seq 17's group", `"17.1"` "its stable outputs 0..1 and
everything sent before them". The plain-seq form is the native stream's `id:`, so a client can
resume across formats, or with `after_seq`.

Resume: `Mapper.resumed(events, cursor)` feeds the events up to the cursor silently (state is
rebuilt from the log, never from deltas: a stream never replays a delta), drops what the cursor
covers of a partial group, and returns the rest, preceded by the mapper's `preamble` (AG-UI
reopens the run a new connection must start with; craze needs none).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

JsonObj = dict[str, Any]
_CURSOR = re.compile(r"([0-9]{1,16})(?:\.([0-9]{1,9}))?")
MAX_SEQ = 2**53 - 1


@dataclass(frozen=True, slots=True)
class Out:
    """One output event: `data` is the craze / AG-UI event; `id` its SSE id (None: none)."""

    data: JsonObj
    seq: int | None = None  # the committed event it came from; None for a transient output
    stable: bool = False
    id: str | None = None


@dataclass(frozen=True, slots=True)
class Cursor:
    """After seq `seq`'s whole group (`index` None) or after its stable output `index`."""

    seq: int
    index: int | None = None

    def __str__(self) -> str:
        return str(self.seq) if self.index is None else f"{self.seq}.{self.index}"


def parse_cursor(raw: str | int | Cursor | None) -> Cursor | None:
    """`"17"`, `"17.2"`, 17 or a Cursor; anything else is None (replay from the start, as the
    native route treats a malformed `Last-Event-ID`)."""
    if raw is None or isinstance(raw, Cursor):
        return raw
    if isinstance(raw, int):
        return Cursor(raw) if 0 <= raw <= MAX_SEQ else None
    m = _CURSOR.fullmatch(raw.strip())
    if m is None or int(m.group(1)) > MAX_SEQ:
        return None
    return Cursor(int(m.group(1)), None if m.group(2) is None else int(m.group(2)))


def rfc3339(ms: Any) -> str | None:
    """Epoch ms as RFC 3339 UTC, Go's RFC3339Nano spelling (trailing fractional zeros trimmed)."""
    if not isinstance(ms, int) or isinstance(ms, bool) or ms <= 0:
        return None
    try:
        t = datetime.fromtimestamp(ms // 1000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None
    if not 1 <= t.year <= 9999:
        return None
    frac = f"{ms % 1000:03d}".rstrip("0")
    return t.strftime("%Y-%m-%dT%H:%M:%S") + (f".{frac}" if frac else "") + "Z"


class Mapper:
    """Base of the stream mappers: input dispatch, group framing, duplicate suppression and
    resume. Subclasses implement `_on_event`, `_on_delta`, `_on_status`, `_on_result` by calling
    `_emit`, and may override `preamble`."""

    def __init__(self) -> None:
        self.last_seq = 0
        self._group: list[Out] = []
        self._seq: int | None = None
        self._delta_time: int | None = None  # a live delta's `time` (ms), when its feeder stamps it

    # ------------------------------------------------------------------ inputs
    def feed(self, msg: Mapping[str, Any]) -> list[Out]:
        """One run-subscription message (see the module docstring)."""
        kind = msg.get("kind")
        if kind == "event":
            return self.event(msg["event"])
        if kind == "delta":
            at = msg.get("time")
            self._delta_time = at if isinstance(at, int) and not isinstance(at, bool) else None
            return self.delta(
                str(msg["request_event_id"]),
                str(msg.get("text", "")),
                offset=msg.get("offset"),
                thinking=bool(msg.get("thinking")),
            )
        if kind == "status":
            return self.status(msg.get("status", ""), msg.get("until"))
        if kind == "result":
            return self.result(str(msg.get("run_id", "")), msg.get("result") or {})
        return []

    def event(self, ev: Mapping[str, Any]) -> list[Out]:
        seq = ev.get("seq")
        if not isinstance(seq, int) or seq <= self.last_seq:
            return []  # already mapped (an overlapping re-read): never twice
        self.last_seq = seq
        self._seq = seq
        self._group = []
        try:
            self._on_event(ev)
        finally:
            self._seq = None
        return _frame(self._group, seq)

    def delta(
        self, request_event_id: str, text: str, *, offset: Any = None, thinking: bool = False
    ) -> list[Out]:
        self._group = []
        self._on_delta(request_event_id, text, offset if isinstance(offset, int) else None, thinking)
        return self._group

    def status(self, status: str, until: Any) -> list[Out]:
        self._group = []
        self._on_status(status, until)
        return self._group

    def result(self, run_id: str, outcome: Mapping[str, Any]) -> list[Out]:
        self._group = []
        self._on_result(run_id, outcome)
        return self._group

    # ------------------------------------------------------------------ resume
    @classmethod
    def resumed(
        cls, events: Iterable[Mapping[str, Any]], cursor: str | int | Cursor | None, **kw: Any
    ) -> tuple[Any, list[Out]]:
        """A mapper rebuilt from `events` (the run's committed events, in order) with the outputs
        that follow `cursor`; the caller goes on feeding live messages to the mapper."""
        mapper = cls(**kw)
        at = parse_cursor(cursor)
        seen: list[Out] = []  # everything the client already has (for the preamble)
        out: list[Out] = []
        resumed_point = False
        for ev in events:
            group = mapper.event(ev)
            seq = ev.get("seq")
            if at is None or not isinstance(seq, int) or seq > at.seq:
                if not resumed_point:
                    out.extend(mapper.preamble(seen))
                    resumed_point = True
                out.extend(group)
            elif seq < at.seq or at.index is None:
                seen.extend(group)
            else:
                cut = _cut(group, at.index)
                seen.extend(group[:cut])
                out.extend(mapper.preamble(seen))
                resumed_point = True
                out.extend(group[cut:])
        if not resumed_point:
            out.extend(mapper.preamble(seen))
        return mapper, out

    def preamble(self, seen: list[Out]) -> list[Out]:
        """What a resumed connection must send before the rest (none by default)."""
        return []

    # ------------------------------------------------------------------ subclass API
    def _emit(self, data: JsonObj, *, stable: bool = True) -> None:
        """Append an output to the current group; outside a committed event it is transient."""
        if self._seq is None:
            self._group.append(Out(data))
        else:
            self._group.append(Out(data, self._seq, stable))

    def _on_event(self, ev: Mapping[str, Any]) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _on_delta(self, request_event_id: str, text: str, offset: int | None, thinking: bool) -> None:
        pass

    def _on_status(self, status: str, until: Any) -> None:
        pass

    def _on_result(self, run_id: str, outcome: Mapping[str, Any]) -> None:
        pass


def _frame(group: list[Out], seq: int) -> list[Out]:
    """Assign the group's ids (see the module docstring)."""
    if not any(o.stable for o in group):
        return group
    out: list[Out] = []
    k = 0
    last = len(group) - 1
    for i, o in enumerate(group):
        if i == last:
            out.append(Out(o.data, seq, o.stable, str(seq)))
        elif o.stable:
            out.append(Out(o.data, seq, True, f"{seq}.{k}"))
        else:
            out.append(o)
        k += o.stable
    return out


def _cut(group: list[Out], index: int) -> int:
    """The position after stable output `index` of the group (all of it if there is none)."""
    k = -1
    for i, o in enumerate(group):
        if o.stable:
            k += 1
            if k == index:
                return i + 1
    return len(group)
