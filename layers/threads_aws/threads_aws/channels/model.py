"""The channel adapter contract: what a provider webhook becomes, and what a reply send returns.

Ordering (semantics.md §5, Channels): ``verify`` runs on the raw bytes before anything is parsed
or stored; ``parse`` runs only on verified bytes, so every field of a ``Delivery`` (installation,
delivery id, item keys, conversation, sender) is signed content. The route inserts the whole
``Delivery.items`` batch into the inbox in one transaction, then answers ``ack``. A redelivery
parses to the same ``item_key``s, so the inbox's unique key makes it a no-op.

Everything here is pure (no I/O, no clock reads): adapters get the bytes, the headers, the
injected clock and the installation's secrets.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

ItemKind = Literal["message", "decision"]
DecisionValue = Literal["grant", "deny"]


@dataclass(frozen=True)
class WebhookRequest:
    """One inbound HTTP request as the route received it: the body as raw bytes (base64-decoded
    if the proxy event said so, never re-serialised), header names case-insensitive."""

    method: str
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    query: Mapping[str, str] = field(default_factory=dict)

    def header(self, name: str) -> str | None:
        want = name.lower()
        for k, v in self.headers.items():
            if k.lower() == want:
                return v
        return None


@dataclass(frozen=True)
class HttpResponse:
    """What the route answers: status, headers and body are the adapter's."""

    status: int
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ChannelSecrets:
    """An installation's resolved secrets. ``repr=False`` keeps them out of logs and tracebacks."""

    signing_secret: str | None = field(default=None, repr=False)  # Slack: request signatures
    bot_token: str | None = field(default=None, repr=False)  # Slack: Web API bearer token
    app_secret: str | None = field(default=None, repr=False)  # WhatsApp: X-Hub-Signature-256
    verify_token: str | None = field(default=None, repr=False)  # WhatsApp: GET hub.verify_token
    access_token: str | None = field(default=None, repr=False)  # WhatsApp: Graph API bearer token


@dataclass(frozen=True)
class Decision:
    """A press of one of our approval buttons: which challenge, which answer. Who pressed it is
    the item's ``sender``; whether they have authority is the consumer's check, not the adapter's."""

    challenge_id: str
    decision: DecisionValue


@dataclass(frozen=True)
class InboxItem:
    """One inbox row's payload. ``item_key`` is the provider's per-item id, else
    ``<delivery_id>#<index>``, from signed content only; (tenant, channel, installation_id,
    item_key) is the inbox's unique key. ``conversation`` is the reply address and the
    conversation→thread mapping key; ``sender`` the provider's user id (the principal subject)."""

    installation_id: str
    delivery_id: str
    item_key: str
    conversation: str
    sender: str
    kind: ItemKind
    text: str | None = None  # kind == "message"
    decision: Decision | None = None  # kind == "decision"
    sent_at_ms: int | None = None  # provider time of the inbound item (last_inbound_at)
    reply_to: str | None = None  # provider id of the message a button press answered

    def as_dict(self) -> dict[str, Any]:
        """The JSON form an inbox row stores (``from_dict`` reads it back)."""
        out: dict[str, Any] = {
            "installation_id": self.installation_id,
            "delivery_id": self.delivery_id,
            "item_key": self.item_key,
            "conversation": self.conversation,
            "sender": self.sender,
            "kind": self.kind,
        }
        if self.text is not None:
            out["text"] = self.text
        if self.decision is not None:
            out["decision"] = {"challenge_id": self.decision.challenge_id, "decision": self.decision.decision}
        if self.sent_at_ms is not None:
            out["sent_at_ms"] = self.sent_at_ms
        if self.reply_to is not None:
            out["reply_to"] = self.reply_to
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> InboxItem:
        d = raw.get("decision")
        return cls(
            installation_id=raw["installation_id"],
            delivery_id=raw["delivery_id"],
            item_key=raw["item_key"],
            conversation=raw["conversation"],
            sender=raw["sender"],
            kind=raw["kind"],
            text=raw.get("text"),
            decision=Decision(d["challenge_id"], d["decision"]) if d else None,
            sent_at_ms=raw.get("sent_at_ms"),
            reply_to=raw.get("reply_to"),
        )

    def channel_delivery_data(self, channel: str) -> dict[str, Any]:
        """``channel_delivery`` event data for a message item (decisions append no delivery)."""
        if self.kind != "message":
            raise ValueError("only a message item becomes channel_delivery")
        return {
            "channel": channel,
            "installation": self.installation_id,
            "conversation": self.conversation,
            "delivery_id": self.delivery_id,
            "item_key": self.item_key,
            "text": self.text or "",
        }


@dataclass(frozen=True)
class StatusReport:
    """A provider's report on one of OUR sent messages (WhatsApp ``statuses[]``): no inbox item,
    but ``call_id`` (echoed from the send) lets a later reconcile settle a parked send."""

    installation_id: str
    message_id: str
    status: str
    call_id: str | None = None
    error_code: int | None = None


@dataclass(frozen=True)
class Delivery:
    """One verified webhook, parsed. ``items`` is the batch the inbox takes in one transaction
    (maybe empty: bot echoes, edits, statuses). ``echo`` is set for a POST subscription challenge
    (Slack ``url_verification``): nothing is stored, the ack carries it."""

    delivery_id: str
    items: tuple[InboxItem, ...] = ()
    installation_ids: tuple[str, ...] = ()
    echo: str | None = None
    statuses: tuple[StatusReport, ...] = ()
    ignored: tuple[str, ...] = ()  # why verified content produced no item (for logs/metrics)


@dataclass(frozen=True)
class Receipt:
    """A completed send: ``message_id`` is the provider's id (Slack ``ts``, WhatsApp ``wamid``);
    ``provider_receipt`` is the string ``effect_commit.provider_receipt`` records."""

    message_id: str
    provider_receipt: str
    raw: Mapping[str, Any] = field(default_factory=dict)


LookupOutcome = Literal["found", "not_found", "unknown"]


@dataclass(frozen=True)
class LookupResult:
    """Reconcile of a begun send. ``found`` → confirmed_success (with the receipt); ``not_found``
    → the provider never posted it, safe to retry; ``unknown`` → the provider can't tell (WhatsApp
    has no lookup): the caller parks the effect."""

    outcome: LookupOutcome
    receipt: Receipt | None = None


class ChannelAdapter(Protocol):
    """The webhook side of one provider. Pure: bytes + headers + clock + secrets in, data out."""

    provider: str

    def claimed_installations(self, request: WebhookRequest) -> tuple[str, ...]:
        """The installation ids the UNVERIFIED body names, only to pick the secrets to verify
        with (empty when the body names none, e.g. Slack url_verification)."""
        ...

    def verify(self, request: WebhookRequest, secrets: ChannelSecrets, now_ms: int) -> None:
        """Raise ``Unverified`` unless the request is signed with these secrets (and fresh)."""
        ...

    def challenge(self, request: WebhookRequest, secrets: ChannelSecrets) -> HttpResponse:
        """GET subscription challenge: the echo, or ``Unverified``; ``NoChallenge`` if none."""
        ...

    def parse(self, request: WebhookRequest) -> Delivery:
        """A VERIFIED request's delivery: the inbox items, a challenge echo, statuses."""
        ...

    def ack(self, delivery: Delivery) -> HttpResponse:
        """The response the provider expects once the batch is durable."""
        ...


class ChannelSender(Protocol):
    """The reply side: one send per ``channel_send`` call, and its reconcile."""

    provider: str

    def send(self, conversation: str, op: Mapping[str, Any], *, call_id: str) -> Receipt:
        """Send one reply op (``reply_ops``/``approval_op`` output) to a conversation. Raises
        ``SendRetryable`` (not sent), ``SendRejected`` (never will be) or ``SendOutcomeUnknown``."""
        ...

    def lookup(self, conversation: str, *, call_id: str, since_ms: int) -> LookupResult:
        """Find the message a begun send of ``call_id`` posted (at or after ``since_ms``)."""
        ...
