"""Recovering a model answer that was in flight when its worker died (`model_response_recovered`).

A step that finds a `model_request` still awaiting its answer (its worker crashed: the lease
lapsed, C2 made the request durable before the call) asks the adapter to look the answer up at
the provider before giving it up:

- found with finality (the provider says the response is done) → `model_response_recovered`
  with the same content, stop reason and usage a live answer has, plus `provider_request_id`,
  then each proposed call with its decisions, exactly as a live answer (`ModelTurn.answer_drafts`);
  the turn goes on and nothing is sent or billed again;
- a final not-found → `model_attempt_abandoned{not_sent, billing: not_billed}`;
- anything else (no recorded id, the lookup failed, the response still running past the wait, a
  response of another request) → `model_attempt_abandoned{unknown, crash}`, the path without
  recovery; the retry policy decides whether to re-send (`crash_resends`).

The lookup key is the client id `<branch_id>:<model_request event_id>`. Where a provider cannot
be asked by a client id, the adapter sends it with the request (OpenAI: `metadata`) and checks it
on the response it finds, and the id the provider assigns is recorded as soon as the provider
accepts the request (`store.provider_requests`, written from the adapter's `on_accepted`); a lost
row only loses the lookup.

What each provider can recover:
- OpenAI Responses (`adapter.settings.recover: true`): the request is sent `store: true,
  background: true` with `metadata.client_request_id`; the response keeps running at OpenAI if
  the worker dies, and `GET /v1/responses/{id}` returns it once `completed`/`incomplete`. A 404
  for an id OpenAI itself gave is a deleted or expired response, not proof it was never sent:
  `unknown`. Chat Completions (and OpenAI-compatible gateways) are not recovered.
- Anthropic Messages: no retrieve-by-id of a message (the Message Batches API has one, but a
  batch isn't an interactive turn), so an answer lost with its worker is abandoned `unknown`.
- Bedrock Converse / ConverseStream: no retrieve-by-id either (`requestId` identifies a request
  for support, it cannot fetch the output): abandoned `unknown`.

Only a turn request (`purpose` absent or `turn`) is looked up; a compaction request's answer is
part of a compaction outcome (`engine.compaction`) and is abandoned as before.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol

from ..writer import Draft, View
from .loop import RECOVERY, StepBase
from .models import ArtifactAccess, ModelResult

log = logging.getLogger("threads_aws.engine")

RECOVERED: Final = "recovered"
NOT_FOUND: Final = "not_found"
UNKNOWN: Final = "unknown"


@dataclass(frozen=True)
class Recovery:
    outcome: Literal["recovered", "not_found", "unknown"]
    result: ModelResult | None = None
    provider_request_id: str | None = None


class Recovering(Protocol):
    def recoverable(self, settings: dict[str, Any]) -> bool: ...

    def recover(
        self,
        provider_request_id: str,
        *,
        client_request_id: str,
        request: bytes,
        settings: dict[str, Any],
        artifacts: ArtifactAccess | None = None,
    ) -> Recovery: ...


def client_request_id(branch_id: str, request_event_id: str) -> str:
    return f"{branch_id}:{request_event_id}"


def recoverable(adapter: Any, settings: dict[str, Any]) -> bool:
    """Whether this adapter, under these (line 0 / settings epoch) settings, can look answers up."""
    check = getattr(adapter, "recoverable", None)
    return bool(callable(check) and check(settings))


def abandoned(request_event_id: str, outcome: str = "unknown", reason: str = "crash") -> Draft:
    data: dict[str, Any] = {"provider_outcome": outcome, "reason": reason}
    data["request_event_id"] = request_event_id
    if outcome == "not_sent":
        data["billing"] = "not_billed"
    return Draft("model_attempt_abandoned", data, RECOVERY)


class RecoverAnswers(StepBase):
    """The step's recovery of open attempts (mixed into `ModelTurn`, which drafts answers)."""

    def answer_drafts(
        self, view: View, rid: str, answer: ModelResult, *, provider_request_id: str | None = None
    ) -> list[Draft]:
        raise NotImplementedError  # ModelTurn's

    def recover_open_attempts(self, view: View) -> None:
        f = view.fold
        awaiting = list(f.awaiting)
        rid = awaiting[0] if len(awaiting) == 1 else None
        found = self._lookup(view, rid) if rid is not None else Recovery(UNKNOWN)
        if rid is not None and found.outcome == RECOVERED:
            assert found.result is not None and found.provider_request_id is not None
            result, pid = found.result, found.provider_request_id
            self.append_sticky(lambda v: self.answer_drafts(v, rid, result, provider_request_id=pid))
            return
        outcome = "not_sent" if found.outcome == NOT_FOUND else "unknown"
        self.append(view, [abandoned(r, outcome if r == rid else "unknown") for r in awaiting])

    def _lookup(self, view: View, rid: str) -> Recovery:
        ctx = self.ctx
        branch_id: str = self.branch_id
        rows = ctx.stores.provider_requests
        request = view.fold.events[view.fold.awaiting[rid] - 1]["data"]
        settings: dict[str, Any] = view.fold.settings or {}
        if rows is None or request.get("purpose", "turn") != "turn":
            return Recovery(UNKNOWN)
        try:
            adapter: Any = ctx.models(settings["model"], settings["adapter"])
            if not recoverable(adapter, settings):
                return Recovery(UNKNOWN)
            pid = rows.get(branch_id, rid)
            if pid is None:  # the provider never accepted it as far as we know: not final
                return Recovery(UNKNOWN)
            body = ctx.artifacts.get_ref(request["request_ref"])
            self.maybe_renew(force=True)
            with self.heartbeat(view):  # a background answer may still be running
                found: Recovery = adapter.recover(
                    pid,
                    client_request_id=client_request_id(branch_id, rid),
                    request=body,
                    settings=settings,
                    artifacts=ctx.artifacts,
                )
            return found
        except Exception:  # noqa: BLE001 - a failed lookup is no finality: abandoned unknown
            log.warning("recovering %s of %s failed", rid, branch_id, exc_info=True)
            return Recovery(UNKNOWN)


def recovered_draft(response: dict[str, Any], provider_request_id: str) -> Draft:
    data = {**response, "provider_request_id": provider_request_id}
    return Draft("model_response_recovered", data, RECOVERY)  # recovery found and wrote it
