"""The fold's rules for the history the model is shown and the branch's restore points: compaction
(rule 10), context edits (rule 19), injections (rule 29: output styles and their restore after a
compaction), snapshots and forks (rule 16)."""

from __future__ import annotations

from typing import Any

from .canonical import sha256_hex
from .fold_state import FoldState

RESPONSES = ("model_response", "model_response_recovered")


class ContextRules(FoldState):
    """Compaction, context edits, injections, snapshots and forks."""

    __slots__ = ()

    def _on_compacted(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        lo, hi = d["from_seq"], d["to_seq"]
        # Rule 10: both edges are step boundaries, i.e. states the chain has reached: the one
        # before from_seq and the one after to_seq (so to_seq < this event's seq).
        if not self.boundary_after.get(lo - 1, True) or not self.boundary_after.get(hi, False):
            raise self._bad(seq, "compacted edges are not step boundaries")  # rule 10
        for a, b in self.compacted_ranges:
            if lo <= b and a <= hi and not (a <= lo and hi <= b) and not (lo <= a and b <= hi):
                raise self._bad(seq, "compacted ranges partly overlap")  # rule 10
        request_id = d.get("summary_request_event_id")
        if request_id is not None:
            text = self._response_text(request_id)
            ref = d["summary_ref"]
            if text is None or ref["sha256"] != sha256_hex(text) or ref["bytes"] != len(text):
                raise self._bad(seq, "summary_ref is not the summary response's UTF-8 text")  # rule 10
        self.compacted_ranges.append((lo, hi))
        self.last_compacted_seq = seq
        self.last_compacted_range = (lo, hi)
        self.compaction_failures = 0

    def _on_compaction_failed(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self.compaction_failures += 1
        self.last_compaction_failed_seq = seq

    def _response_text(self, request_event_id: str) -> bytes | None:
        """UTF-8 bytes of the text parts (concatenated, inferred) of the latest response to
        `request_event_id`, or None when it has none."""
        for ev, known in zip(reversed(self.events), reversed(self.known), strict=True):
            if known and ev["type"] in RESPONSES and ev["data"]["request_event_id"] == request_event_id:
                parts = ev["data"]["content"]
                return "".join(p["text"] for p in parts if p.get("type") == "text").encode("utf-8")
        return None

    def _on_context_edited(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        for edit in d["edits"]:
            call = self.calls.get(edit["call_id"])
            if call is None or call.result_origin is None:
                raise self._bad(seq, "context_edited names a call without a recorded result")  # rule 19
            if edit["action"] == "redact":
                text = self.result_part_text(call.call_id, edit["part"])
                if text is None:
                    raise self._bad(seq, "redact part is not a text part")
                raw = text.encode("utf-8")
                for span in edit["spans"]:
                    s, e = span["start"], span["end"]
                    if not (s <= e <= len(raw)) or not _char_boundary(raw, s) or not _char_boundary(raw, e):
                        raise self._bad(seq, "redact span is not on character boundaries inside the part")
        self.cleared.update(e["call_id"] for e in d["edits"] if e["action"] == "clear")

    def result_part_text(self, call_id: str, part: int) -> str | None:
        for ev, known in zip(reversed(self.events), reversed(self.known), strict=True):
            if (
                known
                and ev["type"] in ("tool_result", "tool_result_late")
                and ev["data"]["call_id"] == call_id
            ):
                content = ev["data"].get("content")
                if content is None:
                    return ev["data"]["preview"] if part == 0 else None
                if part < len(content) and content[part].get("type") == "text":
                    return str(content[part]["text"])
                return None
        return None

    def _on_injected(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        if d["source"] == "agent":  # a teammate's message delivered here (engine.team)
            self.agent_injected.add(d["origin"]["id"])
        if d["source"] == "recovery":  # a host instruction answering a model response
            self.turn.instructed = d["origin"]["id"]
        if d["source"] != "output_style":
            return
        styles = self.policy.get("output_styles") or {}
        style = styles.get(d["origin"]["id"])
        if d["trust"] != "trusted_instruction" or style is None or d.get("text") != style:
            raise self._bad(seq, "output_style injection does not match policy.output_styles")  # rule 29
        actor = ev["actor"]
        if actor["kind"] == "user" and "principal" in actor and not self.turn_open:
            self.last_style_seq = seq
            return
        # The L3 restore: host, right after (skipping unknown events) a compacted whose range
        # held the latest style.
        lo, hi = self.last_compacted_range
        if (
            actor["kind"] == "host"
            and self.last_compacted_seq
            and self.last_compacted_seq == self.last_known_seq
            and lo <= self.last_style_seq <= hi
        ):
            self.last_style_seq = seq
            return
        raise self._bad(seq, "output_style injection from the wrong actor or at the wrong time")  # rule 29

    def _on_snapshot(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self.snapshots[seq] = (self.quiescent(), d["expires_at"], ev["event_id"])
        self.workspace = self.snapshot_manifest = d["manifest_hash"]

    def _on_fork(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self.own_fork_reason = d["reason"]
        if d["reason"] != "snapshot":
            return
        snap = self.snapshots.get(seq - 1)
        if snap is None or not snap[0]:
            raise self._bad(seq, "fork is not at a quiescent snapshot", "no_snapshot_boundary")  # rule 16
        # Expiry is judged at the fork's own `time` (inferred): the fork is a past fact, so a
        # fork made in time stays importable after the snapshot expires; `clock.now` judges
        # only new forks (fork.fork_point) and fork_points.
        if snap[1] is not None and snap[1] <= ev["time"]:
            raise self._bad(seq, "snapshot expired before the fork", "snapshot_expired")


def _char_boundary(raw: bytes, i: int) -> bool:
    return i == len(raw) or (raw[i] & 0xC0) != 0x80
