"""The webhook intake pipeline the ``/channels/{channel}/events`` route calls, pure up to the
inbox write: channel → adapter → verify → parse → the batch to insert → the ack.

Order of checks (semantics.md §5): unknown channel → ``UnknownChannel`` (404); a signature that
does not verify → ``Unverified`` (401), decided before anything is parsed for content or stored.
A body over the bounds of `channels.bounds` (size, nesting depth) is ``Unverified`` too, before
any parse: no provider sends one, and the parse that finds the installation would recurse on it.
The installation ids the unverified body names only select which secrets to try. Each item is
kept only if ITS installation's secret verified the bytes, so a holder of one installation's
secret cannot inject items into another's tenant through a multi-entry batch. A body that names
no installation (Slack ``url_verification``) is tried against every installation of the channel.

The route then inserts ``Received.items`` (all of them, one transaction, with the
conversation → thread create-or-get) and only then returns ``Received.response``.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import adapter_for
from .bounds import refusal
from .errors import UnknownChannel, Unverified
from .installations import Installation, Installations
from .model import ChannelAdapter, Delivery, HttpResponse, InboxItem, WebhookRequest
from .secrets import SecretResolver

# What verify needs, per provider (the send tokens are not read on the webhook path); another
# provider (a test adapter) gets all of its installation's secrets.
VERIFY_SECRETS = {"slack": ("signing_secret",), "whatsapp": ("app_secret",)}
CHALLENGE_SECRETS = {"slack": (), "whatsapp": ("verify_token",)}


@dataclass(frozen=True)
class Received:
    response: HttpResponse
    delivery: Delivery
    items: tuple[tuple[Installation, InboxItem], ...]  # the inbox batch, in delivery order


def _installs(channel: str, installations: Installations) -> list[Installation]:
    insts = installations.of_channel(channel)
    if not insts:
        raise UnknownChannel(f"no channel {channel!r}")
    return insts


def challenge(
    channel: str,
    request: WebhookRequest,
    installations: Installations,
    resolver: SecretResolver,
    *,
    adapter: ChannelAdapter | None = None,
) -> HttpResponse:
    """GET: the provider's subscription challenge, answered if any installation's token fits.
    Raises UnknownChannel, NoChallenge or Unverified."""
    insts = _installs(channel, installations)
    adapter = adapter or adapter_for(insts[0].provider)
    last: Unverified | None = None
    for inst in insts:
        try:
            return adapter.challenge(
                request, resolver.secrets_for(inst, CHALLENGE_SECRETS.get(inst.provider))
            )
        except Unverified as e:
            last = e
    raise last or Unverified("no installation")


def receive(
    channel: str,
    request: WebhookRequest,
    installations: Installations,
    resolver: SecretResolver,
    now_ms: int,
    *,
    adapter: ChannelAdapter | None = None,
) -> Received:
    """POST: verify and parse one webhook. Raises UnknownChannel or Unverified. ``adapter``
    overrides the provider's (the conformance runner's fake verifying adapter)."""
    insts = _installs(channel, installations)
    why = refusal(request.body)
    if why is not None:  # before any parse: the adapters parse to find the installation
        raise Unverified(why + "; nothing was verified or stored")
    adapter = adapter or adapter_for(insts[0].provider)
    claimed = adapter.claimed_installations(request)
    if claimed:
        candidates = [i for i in (installations.get(channel, c) for c in claimed) if i is not None]
    else:
        candidates = insts
    verified: dict[str, Installation] = {}
    for inst in candidates:
        try:
            adapter.verify(request, resolver.secrets_for(inst, VERIFY_SECRETS.get(inst.provider)), now_ms)
        except Unverified:
            continue
        verified[inst.installation_id] = inst
        if not claimed:
            break  # an installation-less body (a challenge): one match is enough
    if not verified:
        raise Unverified("signature does not verify for any installation this body names")
    delivery = adapter.parse(request)
    items = tuple(
        (verified[it.installation_id], it) for it in delivery.items if it.installation_id in verified
    )
    return Received(response=adapter.ack(delivery), delivery=delivery, items=items)
