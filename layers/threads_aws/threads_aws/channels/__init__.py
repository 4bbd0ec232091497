"""Channels: provider webhooks in, replies out (semantics.md §5, Channels).

- ``model``: the adapter contract (``ChannelAdapter``, ``ChannelSender``), ``InboxItem``,
  ``Delivery``, ``Receipt``, ``LookupResult``; ``errors``: the typed failures.
- ``slack`` / ``whatsapp``: pure webhook adapters (verify, challenge, parse, ack).
- ``slack_api`` / ``whatsapp_api``: the senders (base URL settable for the local fakes).
- ``replies``: the deterministic reply ops and our button ids.
- ``installations`` + ``secrets``: the channels file and its secret references.
- ``intake``: verify → parse → the inbox batch → the ack, for the webhook route.

Imports here are deferred: a webhook handler pulls in only the adapter it serves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .installations import Installation
    from .model import ChannelAdapter, ChannelSecrets, ChannelSender

PROVIDERS = ("slack", "whatsapp")


def adapter_for(provider: str) -> ChannelAdapter:
    if provider == "slack":
        from .slack import SlackAdapter

        return SlackAdapter()
    if provider == "whatsapp":
        from .whatsapp import WhatsAppAdapter

        return WhatsAppAdapter()
    raise KeyError(f"no channel provider {provider!r}")


def sender_for(inst: Installation, secrets: ChannelSecrets, *, timeout_s: float = 10.0) -> ChannelSender:
    """The sender of one installation; base URLs come from SLACK_API_URL / WHATSAPP_API_URL."""
    if inst.provider == "slack":
        from .slack_api import SlackSender

        if not secrets.bot_token:
            raise ValueError(f"{inst.channel}/{inst.installation_id}: no bot_token")
        return SlackSender(secrets.bot_token, timeout_s=timeout_s)
    if inst.provider == "whatsapp":
        from .whatsapp_api import WhatsAppSender

        if not secrets.access_token:
            raise ValueError(f"{inst.channel}/{inst.installation_id}: no access_token")
        return WhatsAppSender(
            secrets.access_token,
            inst.installation_id,
            api_version=inst.settings.get("api_version"),
            timeout_s=timeout_s,
        )
    raise KeyError(f"no channel provider {inst.provider!r}")
