"""The fold's rules for what waits on someone: approval challenges and their decisions (rules 9,
13), parks and their resumption and escalation, and ask_user questions' answers (rule 25)."""

from __future__ import annotations

from typing import Any

from .ask_user import ambiguous_options, match, options_of
from .errors import LogError
from .fold_state import Call, Challenge, FoldState


class ParkRules(FoldState):
    """Approvals, parks and questions."""

    __slots__ = ()

    def _on_approval_requested(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self.challenges[d["challenge_id"]] = Challenge(
            d["call_id"], d["args_hash"], expires_at=d.get("expires_at")
        )

    def _decide(self, seq: int, d: dict[str, Any], granted: bool) -> None:
        ch = self.challenges.get(d["challenge_id"])
        if ch is not None and ch.consumed:
            # rule 9; its code is invalid_transition (the rule states none; approval_duplicate
            # is the API's answer to a second decision, inferred)
            raise self._bad(seq, "approval challenge already consumed")
        # Rule 13: a decision naming no challenge matches no open challenge (inferred:
        # approval_mismatch, like a call_id/args_hash mismatch).
        if ch is None or ch.call_id != d["call_id"] or ch.args_hash != d["args_hash"]:
            raise self._bad(seq, "decision does not match the challenge", "approval_mismatch")  # rule 13
        ch.consumed = True
        ch.decided_seq = seq
        call = self.calls.get(ch.call_id)
        if call is not None and granted:
            call.approved = True

    def _on_approval_granted(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self._decide(seq, d, True)

    def _on_approval_denied(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self._decide(seq, d, False)

    def _on_parked(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        a = d["address"]
        if a["kind"] == "input":
            call = self.calls.get(a["id"])
            if call is not None and ambiguous_options(call.input):
                # §ask_user: options equal under the matching rule make the call invalid
                raise self._bad(seq, "parked on an ask_user call whose options are ambiguous")
        self.parked[(a["kind"], a["id"])] = {"kind": a["kind"], "id": a["id"]}
        if "expires_at" in d:
            self.park_expires[(a["kind"], a["id"])] = d["expires_at"]

    def _on_resumed(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        a = d["address"]
        key = (a["kind"], a["id"])
        self.parked.pop(key, None)
        self.park_expires.pop(key, None)
        self.escalated.discard(key)

    def _on_park_escalated(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        # non-critical: no rule refuses it (a reader may skip it); only the open park's counts
        a = d["address"]
        if (a["kind"], a["id"]) in self.parked:
            self.escalated.add((a["kind"], a["id"]))

    def escalations_due(self, now: int) -> list[dict[str, str]]:
        """Open parks whose expires_at has passed and that no park_escalated names yet."""
        return [
            self.parked[key]
            for key, at in self.park_expires.items()
            if at <= now and key not in self.escalated and key in self.parked
        ]

    def _on_answer_rejected(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        if ("input", d["call_id"]) not in self.parked:
            raise self._bad(seq, "answer_rejected without an open question")


def check_answer(seq: int, call: Call, answer: str) -> None:
    """Rule 25 (as the reference cases read it): an answer to a question with options is one
    of them under the §ask_user matching rule (trim + case-fold); multi_select: each
    `\n`-joined line one of them, each at most once (inferred: the answer is a selection, so
    a repeat is no offered choice)."""
    if options_of(call.input) is None:
        return
    if call.input.get("multi_select") is True:
        picked = [match(call.input, p) for p in answer.split("\n")]
        if None in picked or len(set(picked)) != len(picked):
            raise LogError("invalid_transition", seq, "answer is not a selection of the offered options")
    elif match(call.input, answer) is None:
        raise LogError("invalid_transition", seq, "answer is not one of the offered options")
