"""The conformance runner's fake verifying adapter for the ``intake`` kind (conformance
README, "What a runner does per kind"), behind the same ``ChannelAdapter`` contract as the
Slack and WhatsApp adapters, so the runner drives the real intake pipeline with it.

A case webhook ``{channel, installation_id, delivery_id, items[{item_id?, conversation,
sender, text}], forged?}`` travels as its JSON bytes; ``forged: true`` fails verify. Each item is
a message keyed by its ``item_id``, else ``<delivery_id>#<index>``. The installation's tenant is
``<channel>:<installation_id>`` and a sender's principal ``{issuer: <channel>:<installation_id>,
tenant, subject: sender}``: exactly ``Installation.principal``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from threads_aws.channels.errors import NoChallenge, Unverified
from threads_aws.channels.installations import Installation, Installations
from threads_aws.channels.model import ChannelSecrets, Delivery, HttpResponse, InboxItem, WebhookRequest


def webhook_request(webhook: Mapping[str, Any]) -> WebhookRequest:
    return WebhookRequest(
        "POST", json.dumps(webhook, sort_keys=True).encode(), {"content-type": "application/json"}
    )


def installations_for(webhooks: Iterable[Mapping[str, Any]], agent: str = "demo") -> Installations:
    """One installation per (channel, installation_id) the case names."""
    keys = dict.fromkeys((w["channel"], w["installation_id"]) for w in webhooks)
    return Installations(
        Installation(
            channel=channel,
            provider="conformance",
            installation_id=iid,
            tenant=f"{channel}:{iid}",
            agent=agent,
        )
        for channel, iid in keys
    )


class ConformanceAdapter:
    provider = "conformance"

    def claimed_installations(self, request: WebhookRequest) -> tuple[str, ...]:
        return (str(json.loads(request.body)["installation_id"]),)

    def verify(self, request: WebhookRequest, secrets: ChannelSecrets, now_ms: int) -> None:
        if json.loads(request.body).get("forged"):
            raise Unverified("forged delivery")

    def challenge(self, request: WebhookRequest, secrets: ChannelSecrets) -> HttpResponse:
        raise NoChallenge("the conformance adapter has no challenge")

    def parse(self, request: WebhookRequest) -> Delivery:
        w = json.loads(request.body)
        iid, did = str(w["installation_id"]), str(w["delivery_id"])
        items = tuple(
            InboxItem(
                installation_id=iid,
                delivery_id=did,
                item_key=it.get("item_id") or f"{did}#{i}",
                conversation=it["conversation"],
                sender=it["sender"],
                kind="message",
                text=it["text"],
            )
            for i, it in enumerate(w["items"])
        )
        return Delivery(delivery_id=did, items=items, installation_ids=(iid,))

    def ack(self, delivery: Delivery) -> HttpResponse:
        return HttpResponse(200)
