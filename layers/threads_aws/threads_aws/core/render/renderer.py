"""The Render v1 walk (semantics §7): which events render, in which order, as which role.

`Renderer` follows a seq-ordered event list and keeps the entries of the next request: one
(role, event) per rendered line, after before_input denials, hidden memories, host-originated
calls and compacted ranges (a range is replaced by its summary line plus the last
`tools_changed` in it). The same entries give the ReducedState ``transcript``, so the request
and the transcript can never disagree. Line bytes come from `event_lines`, line 0 from `prefix`.

Incremental: feeding an event that only appends a line costs O(1); an event that changes how
earlier events render (compacted, context_edited, a denying before_input hook, an omit_prior
settings change, a memory whose visibility flips, a result seen before its tool_use) marks the
walk dirty and the next render rebuilds it once, in linear time. Built lines are cached by
event_id until a change of their bytes (context_edited, omit_prior) clears the cache.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..canonical import sha256_hex
from ..errors import LogError
from ..fold import epoch_settings
from ._events import CANDIDATES, DENYING, INPUTS, OMITTABLE_PARTS, RESPONSES, RESULTS, GetArtifact, is_event
from .event_lines import event_line
from .jcs import line
from .prefix import line0_value
from .texts import compaction_instruction_line


def _principal_key(actor: Any) -> tuple[str, str, str] | None:
    if not isinstance(actor, dict):
        return None
    p = actor.get("principal")
    if not isinstance(p, dict):
        return None
    return (p.get("issuer", ""), p.get("tenant", ""), p.get("subject", ""))


class Renderer:
    """Incremental Render v1 over a growing, seq-ordered event list."""

    def __init__(self, events: Iterable[dict[str, Any]] = ()) -> None:
        self._started: dict[str, Any] | None = None
        self._settings: dict[str, Any] | None = None
        self._line0: bytes | None = None
        self._omit_seq = 0  # seq of the latest omit_prior settings change
        self._compaction_requests: set[str] = set()
        self._model_calls: set[str] = set()  # call_ids the model proposed (tool_use parts)
        self._results: dict[str, list[dict[str, Any]]] = {}  # call_id -> result events
        self._denied: set[str] = set()  # input event_ids a before_input hook denied
        self._cleared: set[str] = set()  # result event_ids a clear applies to
        self._redactions: dict[str, dict[int, list[tuple[int, int, int]]]] = {}  # ev -> part -> spans
        self._compactions: list[dict[str, Any]] = []
        self._principal: tuple[str, str, str] | None = None
        self._memory_for: dict[str, tuple[str, str, str]] = {}  # memory injected id -> principal
        self._candidates: list[dict[str, Any]] = []
        self._entries: list[tuple[str, dict[str, Any]]] = []  # (role, event) in render order
        self._cache: dict[str, bytes] = {}
        self._dirty = False
        self.last_seq = 0
        self.extend(events)

    # feeding

    def extend(self, events: Iterable[dict[str, Any]]) -> None:
        for ev in events:
            self.feed(ev)

    def feed(self, ev: dict[str, Any]) -> None:
        if not is_event(ev):
            return
        t = ev["type"]
        data = ev["data"]
        seq = ev["seq"]
        self.last_seq = seq
        if t == "thread_started":
            self._started = data
            self._settings = epoch_settings(ev)
            self._line0 = None
        elif t == "settings_changed":
            self._settings = epoch_settings(ev)
            self._line0 = None
            if data["settings"].get("reasoning_carryover") == "omit_prior":
                self._omit_seq = seq
                self._invalidate()
        elif t == "model_request":
            if data.get("purpose") == "compaction":
                self._compaction_requests.add(ev["event_id"])
        elif t in RESPONSES:
            if data.get("request_event_id") not in self._compaction_requests:
                for part in data.get("content", ()):
                    if part.get("type") == "tool_use":
                        cid = part.get("call_id")
                        self._model_calls.add(cid)
                        if cid in self._results:  # a result seen before its tool_use
                            self._dirty = True
        elif t in RESULTS:
            self._results.setdefault(data["call_id"], []).append(ev)
        elif t in INPUTS:
            key = _principal_key(ev.get("actor"))
            if key is not None and key != self._principal:
                if self._memory_for:
                    self._dirty = True  # memory visibility may flip
                self._principal = key
        elif t == "injected":
            if data.get("source") == "memory":
                key = _principal_key(ev.get("actor")) or self._principal
                if key is not None:
                    self._memory_for[ev["event_id"]] = key
        elif t == "hook_decision":
            if (
                data.get("hook") == "before_input"
                and data.get("decision") in DENYING
                and data.get("input_event_id")
            ):
                self._denied.add(data["input_event_id"])
                self._dirty = True
        elif t == "context_edited":
            self._apply_edits(ev)
            self._invalidate()
        elif t == "compacted":
            self._compactions.append(ev)
            self._dirty = True
        if t in CANDIDATES:
            self._candidates.append(ev)
            if not self._dirty:
                role = self._role(ev)
                if role is not None:
                    self._entries.append((role, ev))

    def _invalidate(self) -> None:
        self._dirty = True
        self._cache.clear()

    def _apply_edits(self, ev: dict[str, Any]) -> None:
        for edit in ev["data"]["edits"]:
            results = self._results.get(edit["call_id"], [])
            if not results:
                continue
            if edit["action"] == "clear":
                # clear: every result line of the call recorded before the edit
                self._cleared.update(r["event_id"] for r in results)
            else:
                # redact: one text part of the call's latest result line before the edit
                target = results[-1]["event_id"]
                spans = self._redactions.setdefault(target, {}).setdefault(edit["part"], [])
                spans.extend((s["start"], s["end"], ev["seq"]) for s in edit["spans"])

    # classification

    def _role(self, ev: dict[str, Any]) -> str | None:
        t = ev["type"]
        data = ev["data"]
        if t in INPUTS:
            return None if ev["event_id"] in self._denied else "user"
        if t == "injected":
            return None if self._memory_hidden(ev) else "context"
        if t == "heartbeat":
            return "context"
        if t in RESPONSES:
            if data.get("request_event_id") in self._compaction_requests:
                return None
            return "assistant" if self._response_parts(ev) else None
        if t in RESULTS:
            return "tool" if data["call_id"] in self._model_calls else None
        if t == "tools_changed":
            return "tools"
        return None

    def _memory_hidden(self, ev: dict[str, Any]) -> bool:
        owner = self._memory_for.get(ev["event_id"])
        return owner is not None and self._principal is not None and owner != self._principal

    def memory_injections(self) -> frozenset[str]:
        """event_ids of every memory injection so far (each tied to a principal)."""
        return frozenset(self._memory_for)

    def hidden_memories(self) -> frozenset[str]:
        """event_ids of memory injections hidden from the current principal."""
        return frozenset(
            eid
            for eid, owner in self._memory_for.items()
            if self._principal is not None and owner != self._principal
        )

    def _response_parts(self, ev: dict[str, Any]) -> list[dict[str, Any]]:
        parts = ev["data"].get("content", [])
        if ev["seq"] < self._omit_seq:
            parts = [p for p in parts if p.get("type") not in OMITTABLE_PARTS]
        return parts

    def _effective_ranges(self) -> list[tuple[int, int, dict[str, Any]]]:
        """Compacted ranges not inside another one, by from_seq (rule 10: no partial overlap)."""
        ordered = sorted(
            ((c["data"]["from_seq"], c["data"]["to_seq"], c) for c in self._compactions),
            key=lambda r: (r[0], -r[1], -r[2]["seq"]),
        )
        out: list[tuple[int, int, dict[str, Any]]] = []
        for rng in ordered:
            if out and rng[0] <= out[-1][1]:
                continue  # contained in (or, invalidly, overlapping) a kept range
            out.append(rng)
        return out

    def _rebuild(self) -> None:
        entries: list[tuple[str, dict[str, Any]]] = []
        ranges = self._effective_ranges()
        ri = 0
        last_tools: dict[int, dict[str, Any]] = {}

        def flush(i: int) -> None:
            entries.append(("summary", ranges[i][2]))
            if i in last_tools:
                entries.append(("tools", last_tools[i]))

        for ev in self._candidates:
            seq = ev["seq"]
            while ri < len(ranges) and ranges[ri][1] < seq:
                flush(ri)
                ri += 1
            if ri < len(ranges) and ranges[ri][0] <= seq:
                if ev["type"] == "tools_changed":
                    last_tools[ri] = ev
                continue
            role = self._role(ev)
            if role is not None:
                entries.append((role, ev))
        while ri < len(ranges):
            flush(ri)
            ri += 1
        self._entries = entries
        self._dirty = False

    def entries(self) -> list[tuple[str, dict[str, Any]]]:
        if self._dirty:
            self._rebuild()
        return self._entries

    # output

    def transcript(self) -> list[dict[str, str]]:
        return [{"role": role, "event_id": ev["event_id"]} for role, ev in self.entries() if role != "tools"]

    def line0(self) -> bytes:
        if self._line0 is None:
            if self._started is None:
                raise LogError("invalid_transition", None, "no thread_started: nothing pins line 0")
            self._line0 = line(line0_value(self._started, self._settings))
        return self._line0

    def lines(self, get_artifact: GetArtifact) -> list[bytes]:
        out = [self.line0()]
        cache = self._cache
        for role, ev in self.entries():
            key = ev["event_id"]
            line = cache.get(key)
            if line is None:
                line = self._build(role, ev, get_artifact)
                cache[key] = line
            out.append(line)
        return out

    def request(self, get_artifact: GetArtifact, *, purpose: str = "turn") -> bytes:
        lines = self.lines(get_artifact)
        if purpose == "compaction":
            lines.append(compaction_instruction_line())
        elif purpose != "turn":
            raise ValueError(f"unknown request purpose {purpose!r}")
        return b"".join(lines)

    def _build(self, role: str, ev: dict[str, Any], get_artifact: GetArtifact) -> bytes:
        eid = ev["event_id"]
        return event_line(
            role,
            ev,
            get_artifact,
            parts=self._response_parts(ev) if ev["type"] in RESPONSES else None,
            cleared=eid in self._cleared,
            redactions=self._redactions.get(eid),
        )


def render_request(
    events: Iterable[dict[str, Any]], get_artifact: GetArtifact, *, purpose: str = "turn"
) -> bytes:
    """Render v1 bytes of the next request after `events` (`purpose="compaction"` appends the
    compaction instruction line)."""
    return Renderer(events).request(get_artifact, purpose=purpose)


def transcript(events: Iterable[dict[str, Any]]) -> list[dict[str, str]]:
    """ReducedState.transcript: `{role, event_id}` per conversational line of the next request."""
    return Renderer(events).transcript()


def request_ref_for(body: bytes) -> dict[str, Any]:
    """The `request_ref` ArtifactRef of rendered request bytes."""
    return {"bytes": len(body), "media_type": "application/x-ndjson", "sha256": sha256_hex(body)}
