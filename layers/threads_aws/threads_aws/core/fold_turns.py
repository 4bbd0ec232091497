"""The fold's rules for turns and model attempts: inputs (user_input, steer, stop_when_idle, and
the uniqueness of channel items and schedule occurrences), model requests and their responses or
abandonment, retries, usage, output validation, budgets and cancels (semantics.md §3)."""

from __future__ import annotations

from typing import Any

from .fold_state import USAGE_FIELDS, FoldState, Turn

MAX_INT = (1 << 53) - 1


class TurnRules(FoldState):
    """Turns, model attempts, runs' limits and cancels."""

    __slots__ = ()

    def _on_user_input(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        if self.turn_open:
            raise self._bad(seq, "user_input while a turn is open; use steer")  # rule 12
        if self.handed_off:
            raise self._bad(seq, "user_input after handoff")  # rule 26
        self.turn_open = True
        self.turn = Turn(opener=ev, principal=ev["actor"].get("principal"))
        self.budget_blocked = False
        self.inputs.append(seq)
        self.usage_at_input[seq] = tuple(self.usage_sums)

    def _on_steer(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        if self.handed_off:
            raise self._bad(seq, "steer after handoff")  # rule 26
        self.turn.steered = True
        if "principal" in ev["actor"]:  # the one the model now answers (Render v1's memory owner)
            self.turn.principal = ev["actor"]["principal"]

    def _on_stop_when_idle(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self.turn.stop_when_idle = True

    def _on_channel_delivery(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        if d["item_key"] in self.item_keys:
            raise self._bad(seq, "channel item_key repeats")  # rule 9
        self.item_keys.add(d["item_key"])

    def _on_schedule_fired(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        if d["occurrence_id"] in self.occurrences:
            raise self._bad(seq, "schedule occurrence repeats")  # rule 9
        self.occurrences.add(d["occurrence_id"])

    def _on_model_request(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        if self.budget_blocked:
            raise self._bad(seq, "model_request after budget_exceeded")  # rule 21
        if self.handed_off:
            raise self._bad(seq, "model_request after handoff")  # rule 26
        self.awaiting[ev["event_id"]] = seq
        self.last_request = self.turn.last_model = ev
        self.turn.steered = False
        self.turn.woken = False
        self.turn.retry = None
        if not self.turn.first_request_seq:
            self.turn.first_request_seq = seq
        if d.get("purpose", "turn") == "turn":
            self.turn.turn_request_seq = seq

    def purpose_of(self, request_event_id: str) -> str | None:
        """`purpose` of a model_request on the chain (turn when absent), None if unknown."""
        seq = self.seq_of.get(request_event_id)
        if seq is None:
            return None
        req = self.events[seq - 1]
        return str(req["data"].get("purpose", "turn")) if req["type"] == "model_request" else None

    def _settle_attempt(self, d: dict[str, Any]) -> None:
        self.awaiting.pop(d["request_event_id"], None)

    def _on_model_response(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self._settle_attempt(d)
        self.turn.last_model = ev
        self.turn.quiet_since = ev["time"]
        self.turn.failures = self.turn.retries = self.turn.crashes = 0
        if d["stop_reason"] == "pause_turn" and ev["type"] == "model_response":
            self.turn.pauses += 1
        if d["stop_reason"] == "max_tokens" and self.purpose_of(d["request_event_id"]) == "turn":
            self.turn.truncations += 1
        usage = d["usage"]
        for k, name in enumerate(USAGE_FIELDS):
            v = usage.get(name)
            if isinstance(v, int) and self.usage_sums[k] + v <= MAX_INT:
                self.usage_sums[k] += v
        i, o = usage["input_tokens"], usage["output_tokens"]
        # Sums of the known values per field; a response with either field null counts as
        # unknown once. One whose known counts would take either sum past 2^53-1 adds neither.
        if (i is not None and self.usage_in + i > MAX_INT) or (
            o is not None and self.usage_out + o > MAX_INT
        ):
            self.usage_unknown += 1
            return
        if i is not None:
            self.usage_in += i
        if o is not None:
            self.usage_out += o
        if i is None or o is None:
            self.usage_unknown += 1

    _on_model_response_recovered = _on_model_response

    def _on_model_attempt_abandoned(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self._settle_attempt(d)
        self.turn.last_model = ev
        if d["reason"] == "crash":
            self.turn.crashes += 1
        elif d["reason"] not in ("steered", "cancelled"):
            self.turn.failures += 1

    def _on_retry_scheduled(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self.turn.retries += 1
        self.turn.waited_ms += d["delay_ms"]
        self.turn.retry = d

    def _on_turn_completed(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self.turn_open = False
        self.turns_completed += 1

    def _on_budget_exceeded(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self.budget_blocked = True

    def _on_output_validated(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        out = self.policy.get("output")
        if out is None or d["schema_sha256"] != out["schema_sha256"]:
            raise self._bad(seq, "schema_sha256 is not policy.output.schema_sha256")  # rule 20
        if d["outcome"] == "accepted":
            from .output_schema import validates  # rare: keep the checker off the cold path

            if not validates(out["schema"], d["value"]):
                raise self._bad(seq, "accepted value does not validate against the pinned schema")
        else:
            self.turn.output_rejections += 1
        self.turn.validated = d["source_event_id"]

    def _on_cancel_requested(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self.cancel_requests[ev["event_id"]] = d["scope"]
        self.last_cancel_seq = seq

    def _on_cancelled(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        if self.open_effects:
            raise self._bad(seq, "cancelled while an effect is begun or unknown")  # rule 11
        self.cancels_settled.add(d["request_event_id"])
        if self.cancel_requests.get(d["request_event_id"]) in ("thread", "tree"):
            self.cancelled_final = True
