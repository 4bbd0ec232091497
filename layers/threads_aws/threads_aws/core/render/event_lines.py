"""The bytes of each rendered event's line (semantics §7 "Per-event lines").

Which events render, and as which role, is the walk's decision (`renderer.Renderer`); this module
only maps one (role, event) to its line. The walk's state that changes a line's bytes comes in as
arguments: the response parts left after an ``omit_prior`` change, and a result's
``context_edited`` clear or redact spans.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import LogError
from ._events import INPUTS, RESPONSES, RESULTS, GetArtifact
from .artifacts import artifact_text, verify_part_refs
from .jcs import line
from .prefix import render_tool
from .redaction import redact_text
from .texts import CLEARED_RESULT_TEXT, SUMMARY_SOURCE, heartbeat_text, text_line, wrap_reference

#: Redact spans of one result line: part index -> [(start, end, seq of the context_edited)].
Redactions = Mapping[int, list[tuple[int, int, int]]]


def event_line(
    role: str,
    ev: dict[str, Any],
    get_artifact: GetArtifact,
    *,
    parts: list[dict[str, Any]] | None = None,
    cleared: bool = False,
    redactions: Redactions | None = None,
) -> bytes:
    """The line of `ev` rendered as `role` ("summary" for a `compacted` event's range).

    `parts` are a response's parts as they render (default: as recorded); `cleared` and
    `redactions` are a result line's context edits.
    """
    t = ev["type"]
    data = ev["data"]
    seq = ev["seq"]
    if role == "summary":
        text = artifact_text(get_artifact, data["summary_ref"], seq)
        return text_line(wrap_reference(SUMMARY_SOURCE, ev["event_id"], text, trusted=False))
    if t in INPUTS:
        if "content" in data:
            verify_part_refs(get_artifact, data["content"], seq)
            return line({"content": data["content"], "role": "user"})
        return text_line(data["text"])
    if t == "injected":
        text = data["text"] if "text" in data else artifact_text(get_artifact, data["ref"], seq)
        trusted = data["trust"] == "trusted_instruction"
        return text_line(wrap_reference(data["source"], data["origin"]["id"], text, trusted=trusted))
    if t == "heartbeat":
        return text_line(heartbeat_text(data["running_call_ids"]))
    if t in RESPONSES:
        shown = data.get("content", []) if parts is None else parts
        verify_part_refs(get_artifact, shown, seq)
        return line({"content": shown, "role": "assistant"})
    if t in RESULTS:
        return line(result_value(ev, get_artifact, cleared=cleared, redactions=redactions or {}))
    if t == "tools_changed":
        return line({"role": "tools", "tools": [render_tool(s) for s in data["tools"]]})
    raise AssertionError(f"no line for {t}")  # pragma: no cover - the walk's roles filter


def result_value(
    ev: dict[str, Any], get_artifact: GetArtifact, *, cleared: bool, redactions: Redactions
) -> dict[str, Any]:
    """A tool result line's value: the preview as one text part or the recorded content, after a
    clear (the fixed placeholder) or the merged redactions; `late` for `tool_result_late`."""
    data = ev["data"]
    if cleared:
        content: list[dict[str, Any]] = [{"text": CLEARED_RESULT_TEXT, "type": "text"}]
    else:
        content = list(data["content"]) if "content" in data else [{"text": data["preview"], "type": "text"}]
        for idx, spans in sorted(redactions.items()):
            edit_seq = max(s[2] for s in spans)
            if idx >= len(content) or content[idx].get("type") != "text":
                raise LogError("invalid_transition", edit_seq, "redact names no text part")
            text = redact_text(content[idx]["text"], [(s, e) for s, e, _ in spans], edit_seq)
            content[idx] = {**content[idx], "text": text}
        verify_part_refs(get_artifact, content, ev["seq"])
    value: dict[str, Any] = {
        "call_id": data["call_id"],
        "content": content,
        "is_error": data["is_error"],
        "role": "tool",
    }
    if ev["type"] == "tool_result_late":
        value["late"] = True
    return value
