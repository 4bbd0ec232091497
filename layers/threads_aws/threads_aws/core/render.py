"""Render v1 (semantics §7): the exact request bytes a model sees, derived from the log alone.

A request is JSONL: line 0 (`{adapter, model, params, system, tools}` of the current settings
epoch) and then one line per rendering event, each line RFC 8785 bytes plus ``\\n``. The same
walk yields the ReducedState ``transcript``, so the two can never disagree.

Everything here is a pure function of parsed events (dicts as parsed from the JSONL lines, in seq
order). Header and head-checkpoint lines, and events of unknown type, are ignored.

`Renderer` is the incremental form used by `verify_requests` and by an agent loop that renders on
every step: feeding an event that only appends a line costs O(1); an event that changes how
earlier events render (compacted, context_edited, a denying before_input hook, an omit_prior
settings change, a memory whose visibility flips, a result seen before its tool_use) marks the
walk dirty and the next render rebuilds it once, in linear time.

Strings the spec does not pin are named constants below; keep them in lockstep with every other
implementation that must produce the same bytes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any

from .canonical import canonical_bytes, sha256_hex
from .errors import LogError
from .fold import epoch_settings

GetArtifact = Callable[[dict[str, Any]], bytes]

# -- Exact strings the spec leaves open (one place each) ------------------------------------

#: `context_edited` clear: the text of the single text part that replaces a cleared result's
#: content (§7 "a fixed placeholder"; the spec does not give the string).
CLEARED_RESULT_TEXT = "[tool result cleared]"

#: `context_edited` redact: each merged span is replaced by this (pinned by §7).
REDACTED_TEXT = "[redacted]"

#: The instruction line appended to a `purpose: compaction` side request (the spec names "the
#: instruction line" but not its text). Rendered as a user line with one text part.
COMPACTION_INSTRUCTION = (
    "Summarize the conversation above for your own later use. Keep every fact, decision, "
    "open task, file path and identifier needed to continue the work. "
    "Reply with the summary only."
)

#: Wrapper source of the line that replaces a compacted range (pinned by §7). Its `id` attribute
#: is the `compacted` event's event_id (our choice; the transcript names that event too).
SUMMARY_SOURCE = "summary"

#: Separator between running call ids in a heartbeat body ("running: ids"; separator is ours).
HEARTBEAT_ID_SEPARATOR = ", "

#: Entity for `'` (the spec pins escaping `&` first, then `< > " '`, not the entity spellings).
_ESCAPES = (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ('"', "&quot;"), ("'", "&#39;"))

_RESPONSES = frozenset({"model_response", "model_response_recovered"})
_RESULTS = frozenset({"tool_result", "tool_result_late"})
_INPUTS = frozenset({"user_input", "steer"})
_CANDIDATES = _RESPONSES | _RESULTS | _INPUTS | {"injected", "heartbeat", "tools_changed"}
#: Output parts an omit_prior settings change drops from earlier responses (ModelSettings).
_OMITTABLE_PARTS = frozenset({"reasoning", "hosted_tool"})
_DENYING = frozenset({"deny", "failed"})

# -- JCS lines -------------------------------------------------------------------------------

_fast_dumps = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False
).encode
_FLOATISH = re.compile(r"[0-9][.eE]")
_LONG_DIGITS = re.compile(r"\d{16,}")


def _jcs(value: Any) -> bytes:
    """RFC 8785 bytes. The C encoder is exact for ASCII output without floats or long integers
    (key order and escapes coincide there); anything else takes the exact rfc8785 path."""
    text = _fast_dumps(value)
    if text.isascii() and not _FLOATISH.search(text) and not _LONG_DIGITS.search(text):
        return text.encode("ascii")
    return canonical_bytes(value)


def _line(value: Any) -> bytes:
    return _jcs(value) + b"\n"


def escape(text: str) -> str:
    """Wrapper escaping (§7): `&` first, then `<`, `>`, `"`, `'`."""
    for raw, entity in _ESCAPES:
        text = text.replace(raw, entity)
    return text


def _text_line(text: str) -> bytes:
    return _line({"content": [{"text": text, "type": "text"}], "role": "user"})


def compaction_instruction_line() -> bytes:
    return _text_line(COMPACTION_INSTRUCTION)


# -- Artifacts -------------------------------------------------------------------------------


def fetch_artifact(get_artifact: GetArtifact, ref: dict[str, Any], seq: int | None) -> bytes:
    """Verified bytes of `ref`; any failure is a LogError at `seq` (the event carrying the ref).

    The length and sha256 are re-checked here, so a lenient `get_artifact` can't substitute bytes.
    """
    try:
        data = get_artifact(ref)
    except LogError as exc:
        raise LogError(exc.code, seq, exc.message) from exc
    except (KeyError, FileNotFoundError) as exc:
        raise LogError("artifact_missing", seq, f"artifact {ref.get('sha256')} missing") from exc
    if data is None:
        raise LogError("artifact_missing", seq, f"artifact {ref.get('sha256')} missing")
    if len(data) != ref.get("bytes") or sha256_hex(data) != ref.get("sha256"):
        raise LogError("artifact_corrupt", seq, f"artifact {ref.get('sha256')} does not verify")
    return data


def _artifact_text(get_artifact: GetArtifact, ref: dict[str, Any], seq: int) -> str:
    data = fetch_artifact(get_artifact, ref, seq)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LogError("artifact_corrupt", seq, "artifact text is not UTF-8") from exc


def _verify_part_refs(get_artifact: GetArtifact, parts: Iterable[dict[str, Any]], seq: int) -> None:
    # Parts render as recorded (the ref, never the bytes), but every referenced artifact must
    # exist and verify before the request may be sent.
    for part in parts:
        ref = part.get("ref")
        if isinstance(ref, dict):
            fetch_artifact(get_artifact, ref, seq)


# -- Line 0 ----------------------------------------------------------------------------------


def render_tool(spec: dict[str, Any]) -> dict[str, Any]:
    """A ToolSpec as the model sees it; execution metadata (effect_class, ...) is not rendered."""
    if spec.get("defer_loading") is True:
        return {"deferred": True, "description": spec["description"], "name": spec["name"]}
    return {"description": spec["description"], "input_schema": spec["input_schema"], "name": spec["name"]}


def _line0_value(started: dict[str, Any], settings: dict[str, Any] | None) -> dict[str, Any]:
    src = settings if settings is not None else started
    return {
        "adapter": src["adapter"],
        "model": src["model"],
        "params": src["model_params"],
        "system": started["instructions"],
        "tools": [render_tool(t) for t in started["tools"]],
    }


def _principal_key(actor: Any) -> tuple[str, str, str] | None:
    if not isinstance(actor, dict):
        return None
    p = actor.get("principal")
    if not isinstance(p, dict):
        return None
    return (p.get("issuer", ""), p.get("tenant", ""), p.get("subject", ""))


def _is_event(ev: Any) -> bool:
    return isinstance(ev, dict) and "type" in ev and "seq" in ev and isinstance(ev.get("data"), dict)


# -- Redaction ---------------------------------------------------------------------------------


def _merge_spans(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
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
    for start, end in _merge_spans(spans):
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


# -- The walk ----------------------------------------------------------------------------------


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
        if not _is_event(ev):
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
        elif t in _RESPONSES:
            if data.get("request_event_id") not in self._compaction_requests:
                for part in data.get("content", ()):
                    if part.get("type") == "tool_use":
                        cid = part.get("call_id")
                        self._model_calls.add(cid)
                        if cid in self._results:  # a result seen before its tool_use
                            self._dirty = True
        elif t in _RESULTS:
            self._results.setdefault(data["call_id"], []).append(ev)
        elif t in _INPUTS:
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
                and data.get("decision") in _DENYING
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
        if t in _CANDIDATES:
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
        if t in _INPUTS:
            return None if ev["event_id"] in self._denied else "user"
        if t == "injected":
            return None if self._memory_hidden(ev) else "context"
        if t == "heartbeat":
            return "context"
        if t in _RESPONSES:
            if data.get("request_event_id") in self._compaction_requests:
                return None
            return "assistant" if self._response_parts(ev) else None
        if t in _RESULTS:
            return "tool" if data["call_id"] in self._model_calls else None
        if t == "tools_changed":
            return "tools"
        return None

    def _memory_hidden(self, ev: dict[str, Any]) -> bool:
        owner = self._memory_for.get(ev["event_id"])
        return owner is not None and self._principal is not None and owner != self._principal

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
            parts = [p for p in parts if p.get("type") not in _OMITTABLE_PARTS]
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
            self._line0 = _line(_line0_value(self._started, self._settings))
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
        t = ev["type"]
        data = ev["data"]
        seq = ev["seq"]
        if role == "summary":
            text = _artifact_text(get_artifact, data["summary_ref"], seq)
            return _text_line(wrap_reference(SUMMARY_SOURCE, ev["event_id"], text, trusted=False))
        if t in _INPUTS:
            if "content" in data:
                _verify_part_refs(get_artifact, data["content"], seq)
                return _line({"content": data["content"], "role": "user"})
            return _text_line(data["text"])
        if t == "injected":
            text = data["text"] if "text" in data else _artifact_text(get_artifact, data["ref"], seq)
            trusted = data["trust"] == "trusted_instruction"
            return _text_line(wrap_reference(data["source"], data["origin"]["id"], text, trusted=trusted))
        if t == "heartbeat":
            return _text_line(heartbeat_text(data["running_call_ids"]))
        if t in _RESPONSES:
            parts = self._response_parts(ev)
            _verify_part_refs(get_artifact, parts, seq)
            return _line({"content": parts, "role": "assistant"})
        if t in _RESULTS:
            return _line(self._result_value(ev, get_artifact))
        if t == "tools_changed":
            return _line({"role": "tools", "tools": [render_tool(s) for s in data["tools"]]})
        raise AssertionError(f"no line for {t}")  # pragma: no cover - _role filters

    def _result_value(self, ev: dict[str, Any], get_artifact: GetArtifact) -> dict[str, Any]:
        data = ev["data"]
        eid = ev["event_id"]
        if eid in self._cleared:
            content: list[dict[str, Any]] = [{"text": CLEARED_RESULT_TEXT, "type": "text"}]
        else:
            content = (
                list(data["content"]) if "content" in data else [{"text": data["preview"], "type": "text"}]
            )
            for idx, spans in sorted(self._redactions.get(eid, {}).items()):
                edit_seq = max(s[2] for s in spans)
                if idx >= len(content) or content[idx].get("type") != "text":
                    raise LogError("invalid_transition", edit_seq, "redact names no text part")
                text = redact_text(content[idx]["text"], [(s, e) for s, e, _ in spans], edit_seq)
                content[idx] = {**content[idx], "text": text}
            _verify_part_refs(get_artifact, content, ev["seq"])
        value: dict[str, Any] = {
            "call_id": data["call_id"],
            "content": content,
            "is_error": data["is_error"],
            "role": "tool",
        }
        if ev["type"] == "tool_result_late":
            value["late"] = True
        return value


def wrap_reference(source: str, ident: str, body: str, *, trusted: bool) -> str:
    """`<reference source id untrusted="true">` for untrusted text, `<context source id>` for
    trusted instructions; attributes in that order, attributes and body escaped."""
    attrs = f'source="{escape(source)}" id="{escape(ident)}"'
    if trusted:
        return f"<context {attrs}>\n{escape(body)}\n</context>"
    return f'<reference {attrs} untrusted="true">\n{escape(body)}\n</reference>'


def heartbeat_text(call_ids: Iterable[str]) -> str:
    return f"<heartbeat>\nrunning: {escape(HEARTBEAT_ID_SEPARATOR.join(call_ids))}\n</heartbeat>"


# -- Public API ------------------------------------------------------------------------------


def line0(events: Iterable[dict[str, Any]]) -> bytes:
    """Render v1 line 0 (with its newline) of the settings epoch current after `events`."""
    started: dict[str, Any] | None = None
    settings: dict[str, Any] | None = None
    for ev in events:
        if not _is_event(ev):
            continue
        settings = epoch_settings(ev) or settings
        if ev["type"] == "thread_started":
            started = ev["data"]
    if started is None:
        raise LogError("invalid_transition", None, "no thread_started: nothing pins line 0")
    return _line(_line0_value(started, settings))


def declared_prefix(events: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """`{bytes, sha256}` of line 0, as a model_request declares it."""
    data = line0(events)
    return {"bytes": len(data), "sha256": sha256_hex(data)}


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


def verify_requests(events: Iterable[dict[str, Any]], get_artifact: GetArtifact) -> int:
    """Check every model_request in seq order (first failure wins, as LogError):

    1. C7: declared_prefix equals line 0 of its own settings epoch → `prefix_changed`;
    2. its request_ref artifact exists and verifies → `artifact_missing`/`artifact_corrupt`;
    3. the bytes equal Render v1 of the events before it (plus the instruction line for
       `purpose: compaction`) → `request_hash_mismatch`; artifacts of rendered parts fail at the
       seq of the event carrying them.

    Returns the number of requests checked.
    """
    r = Renderer()
    checked = 0
    for ev in events:
        if _is_event(ev) and ev["type"] == "model_request":
            seq = ev["seq"]
            data = ev["data"]
            head = r.line0()
            dp = data["declared_prefix"]
            if dp.get("bytes") != len(head) or dp.get("sha256") != sha256_hex(head):
                raise LogError(
                    "prefix_changed", seq, "declared_prefix differs from line 0 of its settings epoch"
                )
            recorded = fetch_artifact(get_artifact, data["request_ref"], seq)
            body = r.request(get_artifact, purpose=data.get("purpose", "turn"))
            if body != recorded:
                raise LogError(
                    "request_hash_mismatch", seq, "request bytes differ from Render v1 of the prior events"
                )
            checked += 1
        r.feed(ev)
    return checked


def history_prefix_violation(
    events: Iterable[dict[str, Any]], get_artifact: GetArtifact
) -> tuple[int, int] | None:
    """The first pair `(seq_a, seq_b)` of consecutive turn requests where the recorded bytes of a
    are not a byte prefix of b's although nothing excuses it, else None.

    Excuses between the two: `compacted`, `context_edited`, `settings_changed`, a denying
    (`deny`/`failed`) `before_input` hook_decision, or a memory injection whose visibility
    changed. Compaction requests are skipped.
    """
    r = Renderer()
    prev: tuple[int, bytes, frozenset[str], frozenset[str]] | None = None
    excused = False
    for ev in events:
        if not _is_event(ev):
            continue
        t = ev["type"]
        data = ev["data"]
        if t in ("compacted", "context_edited", "settings_changed"):
            excused = True
        elif t == "hook_decision" and data.get("hook") == "before_input" and data.get("decision") in _DENYING:
            excused = True
        elif t == "model_request" and data.get("purpose", "turn") == "turn":
            body = fetch_artifact(get_artifact, data["request_ref"], ev["seq"])
            memories = frozenset(r._memory_for)
            hidden = r.hidden_memories()
            if prev is not None and not excused and not body.startswith(prev[1]):
                memory_flip = (hidden & prev[2]) != prev[3]
                if not memory_flip:
                    return (prev[0], ev["seq"])
            prev = (ev["seq"], body, memories, hidden)
            excused = False
        r.feed(ev)
    return None


def history_prefix_holds(events: Iterable[dict[str, Any]], get_artifact: GetArtifact) -> bool:
    return history_prefix_violation(events, get_artifact) is None
