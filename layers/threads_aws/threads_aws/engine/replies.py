"""Channel replies, derived from the log and sent as effects (semantics.md §5, Channels, Replies).

Sources: the last model response of each ``end_turn`` turn, each open ``approval_requested`` and
each ``park_escalated`` (the approvers' notice of an expired park, `engine.parks`), of a branch
that has a ``channel_delivery`` before them (the reply goes to the latest one's conversation).
Op ``i`` of a source (`channels.replies.reply_ops` / `approval_op`: pure, so a recomputation
yields the same ops) becomes the HOST call ``channel_send`` with call id ``send_<source seq>_<i>``
and input ``op + {address, installation_id, channel, last_inbound_at}``. Its events,
all actor host (a host-originated call: Render v1 renders neither the call nor its result):

  tool_call + permission_decision{allow} + effect_begin{attempt}   one append, BEFORE the send
  -- lease re-checked (`Effects.clear_to_dispatch`) --
  effect_commit{result_ref, provider_receipt} + tool_result{executed}   after a sent reply
  effect_unknown{timeout|transport_error}                           the provider may have posted it
  effect_resolved{not_sent, by: adapter} (+ tool_result, when final) the provider refused / retry

A begun send is reconciled, never blindly re-sent: a begun effect the step finds (its worker
died after `effect_begin`) becomes ``effect_unknown{crash_after_begin}`` (the run loop does
that), then `Sender.lookup` (Slack: our call id in the message metadata) settles it:
found → ``effect_resolved{confirmed_success, by: reconcile, result_ref}`` + the result; not found
→ ``effect_resolved{safe_to_retry, by: reconcile}`` and a re-send under the same call id with
``attempt + 1``; can't tell (WhatsApp has no lookup) → ``parked{effect}`` for a human
(`resolve_parked`: assume_done / assume_not_done).

When: after each run (`issue_replies`, the step's last act while it still holds the lease) and
on every tick (the schedule ticker wakes branches). A send the provider answered "retry later"
ends the step ``busy``, so the run-step queue brings it back after its backoff.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from ..core.canonical import canonical_bytes
from ..core.fold import Call, Fold
from ..writer import Draft, View
from .effects import Effects
from .loop import HOST, RECOVERY, result

log = logging.getLogger("threads_aws.engine")

CALL = "channel_send"
PREFIX = "send_"
MAX_SENDS = 50  # per step; the rest go in the next
PREVIEW_LIMIT = 400


def is_host_call(call: Call) -> bool:
    return call.name == CALL and call.call_id.startswith(PREFIX)


@dataclass(frozen=True)
class Derived:
    call_id: str
    source_event_id: str
    input: dict[str, Any]
    challenge_id: str | None = None


@dataclass
class _Scan:
    """What a branch's scan carries between steps (the fold is append-only along a branch)."""

    upto: int = 0  # events[:upto] scanned
    delivery: dict[str, Any] | None = None  # the latest channel_delivery
    response: dict[str, Any] | None = None  # the current turn's latest model response
    sources: list[Derived] = field(default_factory=list)  # derived, not yet all issued and settled


_scans: dict[str, _Scan] = {}


def _text(response: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in response["data"].get("content", ()) if p.get("type") == "text")


def _address(delivery: dict[str, Any]) -> dict[str, Any]:
    d = delivery["data"]
    return {
        "address": d["conversation"],
        "installation_id": d["installation"],
        "channel": d["channel"],
        "last_inbound_at": delivery["time"],
    }


def derive(fold: Fold, provider_of: Any, branch_id: str) -> list[Derived]:
    """The derived sends of a branch, incrementally: each call the log lacks, or still pending."""
    scan = _scans.get(branch_id)
    if scan is None or scan.upto > len(fold.events):
        scan = _scans[branch_id] = _Scan()
    for ev in fold.events[scan.upto :]:
        t = ev["type"]
        if t == "channel_delivery":
            scan.delivery = ev
        elif t in ("model_response", "model_response_recovered"):
            scan.response = ev
        elif t == "user_input":
            scan.response = None
        elif t == "turn_completed" and ev["data"]["reason"] == "end_turn":
            if scan.delivery is not None and scan.response is not None:
                provider = provider_of(scan.delivery["data"]["channel"])
                text = _text(scan.response)
                if provider is not None and text:
                    from ..channels.replies import reply_ops

                    for i, op in enumerate(reply_ops(provider, text)):
                        scan.sources.append(
                            Derived(
                                f"{PREFIX}{scan.response['seq']}_{i}",
                                scan.response["event_id"],
                                {**op, **_address(scan.delivery)},
                            )
                        )
            scan.response = None
        elif t == "approval_requested" and scan.delivery is not None:
            provider = provider_of(scan.delivery["data"]["channel"])
            call = fold.calls.get(ev["data"]["call_id"])
            if provider is not None and call is not None:
                from ..channels.replies import approval_op

                preview = canonical_bytes(call.input).decode()[:PREVIEW_LIMIT]
                op = approval_op(provider, ev["data"]["challenge_id"], call.name, preview)
                scan.sources.append(
                    Derived(
                        f"{PREFIX}{ev['seq']}_0",
                        ev["event_id"],
                        {**op, **_address(scan.delivery)},
                        challenge_id=ev["data"]["challenge_id"],
                    )
                )
        elif t == "park_escalated" and scan.delivery is not None:
            derived = _escalation(fold, ev, scan.delivery, provider_of)
            if derived is not None:
                scan.sources.append(derived)
    scan.upto = len(fold.events)
    out = []
    keep = []
    for d in scan.sources:
        call = fold.calls.get(d.call_id)
        if call is not None and d.call_id not in fold.pending:
            continue  # issued and settled: never looked at again
        keep.append(d)
        if call is None and d.challenge_id is not None:
            ch = fold.challenges.get(d.challenge_id)
            if ch is None or ch.consumed:
                keep.pop()  # an answered challenge needs no prompt
                continue
        out.append(d)
    scan.sources = keep
    return out


def _escalation(fold: Fold, ev: dict[str, Any], delivery: dict[str, Any], provider_of: Any) -> Derived | None:
    """The notice of a park_escalated (engine.parks) to the conversation of the latest delivery."""
    provider = provider_of(delivery["data"]["channel"])
    address = ev["data"]["address"]
    kind = address["kind"]
    call_id = address["id"]
    if kind == "approval":
        ch = fold.challenges.get(address["id"])
        call_id = ch.call_id if ch is not None else ""
    call = fold.calls.get(call_id)
    if provider is None or call is None or kind not in ("approval", "input"):
        return None
    from ..channels.replies import escalation_op

    question = str(call.input.get("question", "")) if kind == "input" else ""
    op = escalation_op(provider, kind, call.name, question[:PREVIEW_LIMIT])
    return Derived(f"{PREFIX}{ev['seq']}_0", ev["event_id"], {**op, **_address(delivery)})


class Replies(Effects):
    def issue_replies(self) -> str | None:
        """Issue and settle the branch's derived sends; None when done (or nothing to do), "busy"
        when the provider asked to retry later."""
        from ..channels.installations import load_installations

        installations = load_installations()
        for _ in range(MAX_SENDS):
            view = self.ctx.writer.load(self.branch_id)
            f = view.fold
            if not f.item_keys:  # no channel_delivery on this branch: nothing to reply to
                return None
            todo = derive(f, installations.provider, self.branch_id)
            progressed = False
            for d in todo:
                call = f.calls.get(d.call_id)
                if call is not None and ("effect", call.effect_key) in f.parked:
                    continue  # in doubt: a human settles it
                outcome = self.advance_send(view, d, call)
                if outcome == "busy":
                    return "busy"
                if outcome == "done":
                    progressed = True
                    break  # re-load: the branch moved
            if not progressed:
                return None
        return None

    def advance_send(self, view: View, d: Derived, call: Call | None) -> str | None:
        """One step of one send: "done" after an append, "busy" to retry later, None to skip."""
        f = view.fold
        sender = self.sender_for(d.input)
        if sender is None:
            return None
        if call is None:
            begin = [
                Draft(
                    "tool_call",
                    {
                        "call_id": d.call_id,
                        "input": d.input,
                        "name": CALL,
                        "request_event_id": d.source_event_id,
                    },
                    HOST,
                ),
                Draft(
                    "permission_decision",
                    {
                        "call_id": d.call_id,
                        "decision": "allow",
                        "source": "policy",
                        "rule_id": "channel_reply",
                    },
                    HOST,
                ),
                Draft("effect_begin", {"attempt": 1, "call_id": d.call_id}, HOST),
            ]
            return self.send(view, d, begin, sender)
        entry = f.effects.get(call.effect_key)
        status = entry["status"] if entry else None
        if status is None:
            return self.send(
                view,
                d,
                [Draft("effect_begin", {"attempt": call.attempt + 1, "call_id": d.call_id}, HOST)],
                sender,
            )
        if status == "begun":  # its worker died after the begin: in doubt
            data = {"call_id": d.call_id, "reason": "crash_after_begin"}
            self.append(view, [Draft("effect_unknown", data, RECOVERY)])
            return "done"
        if status == "unknown":
            return self.reconcile(view, d, call, sender)
        settled = self.settled_result(f, call)
        if settled is not None:
            self.append(view, [settled])
            return "done"
        # resolved as not sent / safe to retry: the same call id, the next attempt
        return self.send(
            view,
            d,
            [Draft("effect_begin", {"attempt": call.attempt + 1, "call_id": d.call_id}, HOST)],
            sender,
        )

    def send(self, view: View, d: Derived, begin: list[Draft], sender: Any) -> str:
        from ..channels.errors import SendOutcomeUnknown, SendRejected, SendRetryable

        self.maybe_renew(force=True)
        lines = self.append(view, begin)
        if not self.clear_to_dispatch(lines[-1].seq):
            resolved = {"by": "adapter", "call_id": d.call_id, "outcome": "not_sent"}
            self.append_sticky(lambda v: [Draft("effect_resolved", resolved, HOST)])
            return "done"
        op = {k: v for k, v in d.input.items() if k in ("kind", "text", "challenge_id")}
        try:
            receipt = sender.send(d.input["address"], op, call_id=d.call_id)
        except SendRetryable as exc:
            log.warning("channel send %s: retry later (%s)", d.call_id, exc)
            resolved = {"by": "adapter", "call_id": d.call_id, "outcome": "not_sent"}
            self.append_sticky(lambda v: [Draft("effect_resolved", resolved, HOST)])
            return "busy"
        except SendRejected as exc:
            log.error("channel send %s rejected: %s", d.call_id, exc)
            why = f"Not sent: {exc}"
            resolved = {"by": "adapter", "call_id": d.call_id, "outcome": "not_sent"}
            self.append_sticky(
                lambda v: [
                    Draft("effect_resolved", resolved, HOST),
                    result(d.call_id, why, "not_executed", True),
                ]
            )
            return "done"
        except SendOutcomeUnknown as exc:
            data = {"call_id": d.call_id, "reason": exc.reason}
            self.append_sticky(lambda v: [Draft("effect_unknown", data, HOST)])
            return "done"
        ref = self.ctx.artifacts.put(
            canonical_bytes({"message_id": receipt.message_id, "provider_receipt": receipt.provider_receipt}),
            "application/json",
        )
        commit = {"call_id": d.call_id, "provider_receipt": receipt.provider_receipt, "result_ref": ref}
        self.append_sticky(
            lambda v: [Draft("effect_commit", commit, HOST), result(d.call_id, "sent", "executed", False)]
        )
        return "done"

    def reconcile(self, view: View, d: Derived, call: Call, sender: Any) -> str:
        from ..channels.errors import SendRetryable

        since = call.first_begin_time or 0
        try:
            found = sender.lookup(d.input["address"], call_id=d.call_id, since_ms=since)
        except SendRetryable:
            return "busy"
        if found.outcome == "found" and found.receipt is not None:
            r = found.receipt
            ref = self.ctx.artifacts.put(
                canonical_bytes({"message_id": r.message_id, "provider_receipt": r.provider_receipt}),
                "application/json",
            )
            data = {
                "by": "reconcile",
                "call_id": d.call_id,
                "outcome": "confirmed_success",
                "result_ref": ref,
            }
            self.append(
                view,
                [
                    Draft("effect_resolved", data, RECOVERY),
                    result(d.call_id, "sent", "materialized_from_commit", False),
                ],
            )
        elif found.outcome == "not_found":
            data = {"by": "reconcile", "call_id": d.call_id, "outcome": "safe_to_retry"}
            self.append(view, [Draft("effect_resolved", data, RECOVERY)])
        else:
            self.append(view, [self.park_effect(call)])
        return "done"

    def sender_for(self, call_input: dict[str, Any]) -> Any:
        """The installation's sender (cached per container), or None when this deployment can't
        send for it (the installation is gone, or its secrets can't be read: logged, retried on
        the next step, nothing appended)."""
        from ..channels import sender_for
        from ..channels.installations import load_installations
        from ..channels.secrets import SecretResolver, SecretUnavailable

        key = (str(call_input.get("channel")), str(call_input.get("installation_id")))
        if key in _senders:
            return _senders[key]
        inst = load_installations().get(*key)
        if inst is None:
            log.error("channel send: no installation %s/%s", *key)
            return None
        try:
            sender = sender_for(inst, SecretResolver().secrets_for(inst))
        except (SecretUnavailable, ValueError, KeyError) as exc:
            log.error("channel send: %s", exc)
            return None
        _senders[key] = sender
        return sender


_senders: dict[tuple[str, str], Any] = {}


def forget_senders() -> None:
    """Drop the cached senders (tests that re-point SLACK_API_URL / the channels file)."""
    _senders.clear()
    _scans.clear()
