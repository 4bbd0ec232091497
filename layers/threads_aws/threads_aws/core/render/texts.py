"""The text lines of Render v1 (semantics §7 "Escaping", "Per-event lines"): wrapper escaping,
the ``<reference>``/``<context>``/``<heartbeat>`` wrappers, and the strings the spec leaves open.

Strings the spec does not pin are named constants here; keep them in lockstep with every other
implementation that must produce the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterable

from .jcs import line

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


def escape(text: str) -> str:
    """Wrapper escaping (§7): `&` first, then `<`, `>`, `"`, `'`."""
    for raw, entity in _ESCAPES:
        text = text.replace(raw, entity)
    return text


def wrap_reference(source: str, ident: str, body: str, *, trusted: bool) -> str:
    """`<reference source id untrusted="true">` for untrusted text, `<context source id>` for
    trusted instructions; attributes in that order, attributes and body escaped."""
    attrs = f'source="{escape(source)}" id="{escape(ident)}"'
    if trusted:
        return f"<context {attrs}>\n{escape(body)}\n</context>"
    return f'<reference {attrs} untrusted="true">\n{escape(body)}\n</reference>'


def heartbeat_text(call_ids: Iterable[str]) -> str:
    return f"<heartbeat>\nrunning: {escape(HEARTBEAT_ID_SEPARATOR.join(call_ids))}\n</heartbeat>"


def text_line(text: str) -> bytes:
    """A user line of one text part."""
    return line({"content": [{"text": text, "type": "text"}], "role": "user"})


def compaction_instruction_line() -> bytes:
    return text_line(COMPACTION_INSTRUCTION)
