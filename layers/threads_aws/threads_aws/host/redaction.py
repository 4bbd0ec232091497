"""Forget a span of a tool result (ours, add-only: `POST /v1/threads/{thread_id}/redactions`):
`context_edited{reason: manual, edits: [{action: redact, call_id, part, spans}]}` (rule 19,
Render v1 "redact merges the spans and replaces each with [redacted]").

The result itself stays in the log (append-only); from the edit on, every request renders the
spans as `[redacted]` (`core.render.redaction`), so the model never sees them again. The body
names the spans as UTF-8 byte offsets (the contract's Span), or `match`: a text whose every
occurrence in the part is redacted (the host computes the spans).

Checked before anything is written, each an `invalid_request`: the call has a recorded result
on the branch, `part` (default 0: the preview when the result has no content) is a text part,
every span falls on character boundaries inside it, a `match` occurs. Any principal of the
thread's tenant (as steer/stop), one append under the writer epoch (`base._control`); the turn
need not be open, and no wake: the next request renders it.
"""

from __future__ import annotations

from typing import Any

from ..writer import Draft, View
from .base import HostBase, user
from .errors import invalid
from .principal import Principal

MAX_SPANS = 100


def spans_of(text: str, body: dict[str, Any]) -> list[dict[str, int]]:
    raw = text.encode("utf-8")
    if "match" in body:
        needle = body["match"].encode("utf-8")
        spans: list[dict[str, int]] = []
        at = raw.find(needle)
        while at != -1 and len(spans) < MAX_SPANS:
            spans.append({"end": at + len(needle), "start": at})
            at = raw.find(needle, at + len(needle))
        if not spans:
            raise invalid("match does not occur in the part")
        return spans
    spans = [{"end": int(s["end"]), "start": int(s["start"])} for s in body["spans"]]  # bytes
    for s in spans:
        if not (0 <= s["start"] <= s["end"] <= len(raw)) or not all(
            p == len(raw) or (raw[p] & 0xC0) != 0x80 for p in (s["start"], s["end"])
        ):
            raise invalid(f"span {s['start']}..{s['end']} is not on character boundaries inside the part")
    return spans


class Redactions(HostBase):
    def redact(
        self, principal: Principal, thread_id: str, branch_id: str | None, body: dict[str, Any]
    ) -> dict[str, str]:
        rec = self._branch(principal, thread_id, branch_id)
        call_id, part = body["call_id"], int(body.get("part", 0))

        def decide(view: View) -> Any:
            f = view.fold
            call = f.calls.get(call_id)
            if call is None or call.result_origin is None:
                raise invalid(f"call {call_id} has no recorded result on this branch")
            text = f.result_part_text(call_id, part)
            if text is None:
                raise invalid(f"part {part} of the result of {call_id} is not a text part")
            edit = {"action": "redact", "call_id": call_id, "part": part, "spans": spans_of(text, body)}
            data = {"edits": [edit], "reason": "manual"}
            return self._commit(view, [lambda _: Draft("context_edited", data, user(principal))])

        return self._appended(self._control(rec, decide))
