"""WhatsApp Cloud API webhooks: the GET subscription challenge, verify, parse, ack. Pure.

challenge: ``hub.mode=subscribe`` and ``hub.verify_token`` equal (constant time) to the
installation's verify token → 200 with the raw ``hub.challenge`` as text/plain; else unverified.

verify: ``X-Hub-Signature-256`` = ``sha256=`` + hex HMAC-SHA256(app secret, raw body), constant
time. Meta signs no timestamp, so there is no replay window: a replayed body dedupes on its
item keys instead.

parse (verified bytes only): every ``entry[].changes[]`` of field ``messages``; installation =
``value.metadata.phone_number_id`` (the number that received it and replies).
- ``messages[]`` → items keyed by the message id (``wamid``), else ``<delivery_id>#<index>``;
  conversation and sender = the user's ``wa_id`` (``from``; the BSUID ``user_id`` only when the
  phone is withheld). ``text`` → message; ``interactive`` ``button_reply`` with OUR id
  (``threads:grant|deny:<challenge_id>``) → decision, another button or list reply → a message of
  its title; a template quick reply (``button``) → a message of its text. Media, reactions and
  system messages are ignored.
- ``statuses[]`` (sent/delivered/read/failed of OUR messages) → no items; reported as
  ``StatusReport`` with the ``biz_opaque_callback_data`` (our call id) the send carried.
``delivery_id`` = ``sha256:<hex of the raw body>``: signed content, stable across an identical
redelivery (Meta sends no delivery id).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterator
from typing import Any

from .errors import Unverified
from .model import ChannelSecrets, Delivery, HttpResponse, InboxItem, StatusReport, WebhookRequest
from .replies import parse_whatsapp_button_id


def signature(app_secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(app_secret.encode(), body, hashlib.sha256).hexdigest()


def _obj(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def _decode(body: bytes) -> dict[str, Any] | None:
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    return doc if isinstance(doc, dict) else None


def _changes(doc: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(phone_number_id, value) of each ``messages`` change."""
    if doc.get("object") != "whatsapp_business_account":
        return
    for entry in _list(doc.get("entry")):
        for change in _list(_obj(entry).get("changes")):
            c = _obj(change)
            value = _obj(c.get("value"))
            pnid = _str(_obj(value.get("metadata")).get("phone_number_id"))
            if c.get("field") == "messages" and pnid:
                yield pnid, value


class WhatsAppAdapter:
    provider = "whatsapp"

    def claimed_installations(self, request: WebhookRequest) -> tuple[str, ...]:
        doc = _decode(request.body)
        if doc is None:
            return ()
        return tuple(dict.fromkeys(pnid for pnid, _ in _changes(doc)))

    def verify(self, request: WebhookRequest, secrets: ChannelSecrets, now_ms: int) -> None:
        if not secrets.app_secret:
            raise Unverified("no app secret for this installation")
        sig = request.header("X-Hub-Signature-256") or ""
        if not sig:
            raise Unverified("missing X-Hub-Signature-256")
        expected = signature(secrets.app_secret, request.body)
        if not hmac.compare_digest(expected.encode(), sig.strip().lower().encode("utf-8", "replace")):
            raise Unverified("X-Hub-Signature-256 does not match")

    def challenge(self, request: WebhookRequest, secrets: ChannelSecrets) -> HttpResponse:
        q = request.query
        token, challenge = q.get("hub.verify_token") or "", q.get("hub.challenge")
        if q.get("hub.mode") != "subscribe" or challenge is None:
            raise Unverified("not a subscribe challenge")
        if not secrets.verify_token or not hmac.compare_digest(
            secrets.verify_token.encode(), token.encode("utf-8", "replace")
        ):
            raise Unverified("hub.verify_token does not match")
        return HttpResponse(200, challenge.encode(), {"content-type": "text/plain"})

    def parse(self, request: WebhookRequest) -> Delivery:
        delivery_id = "sha256:" + hashlib.sha256(request.body).hexdigest()
        doc = _decode(request.body)
        if doc is None:
            return Delivery(delivery_id=delivery_id, ignored=("unparseable body",))
        items: list[InboxItem] = []
        statuses: list[StatusReport] = []
        ignored: list[str] = []
        installs: list[str] = []
        index = 0
        for pnid, value in _changes(doc):
            installs.append(pnid)
            users = {c.get("wa_id"): c for c in map(_obj, _list(value.get("contacts"))) if c.get("wa_id")}
            for m in map(_obj, _list(value.get("messages"))):
                item = _message(m, pnid, delivery_id, index, users, ignored)
                index += 1
                if item is not None:
                    items.append(item)
            for s in map(_obj, _list(value.get("statuses"))):
                if _str(s.get("id")) and _str(s.get("status")):
                    err = _obj(_list(s.get("errors"))[0]) if _list(s.get("errors")) else {}
                    code = err.get("code")
                    statuses.append(
                        StatusReport(
                            installation_id=pnid,
                            message_id=s["id"],
                            status=s["status"],
                            call_id=_str(s.get("biz_opaque_callback_data")),
                            error_code=code if isinstance(code, int) else None,
                        )
                    )
        if not installs:
            ignored.append("no messages change")
        return Delivery(
            delivery_id=delivery_id,
            items=tuple(items),
            installation_ids=tuple(dict.fromkeys(installs)),
            statuses=tuple(statuses),
            ignored=tuple(ignored),
        )

    def ack(self, delivery: Delivery) -> HttpResponse:
        return HttpResponse(200, b"", {})


def _message(
    m: dict[str, Any],
    pnid: str,
    delivery_id: str,
    index: int,
    users: dict[Any, dict[str, Any]],
    ignored: list[str],
) -> InboxItem | None:
    sender = _str(m.get("from"))
    if sender is None:  # phone withheld (username users): the business-scoped user id
        sender = _str(m.get("user_id")) or next(
            (_str(c.get("user_id")) for c in users.values() if _str(c.get("user_id"))), None
        )
    if sender is None:
        ignored.append("message without a sender")
        return None
    kind = m.get("type")
    text: str | None = None
    decision = None
    if kind == "text":
        text = _str(_obj(m.get("text")).get("body")) or ""
    elif kind == "interactive":
        inter = _obj(m.get("interactive"))
        sub = _str(inter.get("type"))  # button_reply | list_reply
        reply = _obj(inter.get(sub)) if sub else {}
        decision = parse_whatsapp_button_id(_str(reply.get("id")) or "")
        if decision is None:
            text = _str(reply.get("title")) or ""
    elif kind == "button":
        text = _str(_obj(m.get("button")).get("text")) or ""
    else:
        ignored.append(f"message type {kind!r}")
        return None
    ts = _str(m.get("timestamp"))
    return InboxItem(
        installation_id=pnid,
        delivery_id=delivery_id,
        item_key=_str(m.get("id")) or f"{delivery_id}#{index}",
        conversation=sender,
        sender=sender,
        kind="decision" if decision is not None else "message",
        text=text,
        decision=decision,
        sent_at_ms=int(ts) * 1000 if ts and ts.isdigit() else None,
        reply_to=_str(_obj(m.get("context")).get("id")),
    )
