"""Slack webhooks (Events API and interactivity): verify, parse, ack. Pure.

verify: ``X-Slack-Signature`` = ``v0=`` + hex HMAC-SHA256(signing secret,
``v0:{X-Slack-Request-Timestamp}:{raw body}``), compared in constant time, and the timestamp
within 300 s of the injected clock (either side). The raw body is what is signed: for
interactivity it is the url-encoded form, decoded only after verify.

parse (verified bytes only):
- ``url_verification`` → no items, the ack echoes ``challenge``.
- ``event_callback`` with a ``message`` or ``app_mention`` from a human → one ``message`` item.
  Dropped: bot messages (``bot_id`` / ``bot_message``), our own user, edits, deletions and other
  subtypes (``thread_broadcast`` and ``file_share`` are user messages and kept).
  ``item_key`` = ``<channel>:<ts>``, the message's own id in the workspace: a redelivery
  (``X-Slack-Retry-Num``, same ``event_id``) and the app_mention + message double delivery of one
  message (two ``event_id``s) both land on one key. ``delivery_id`` = ``event_id``.
- ``block_actions`` (form ``payload=``) → one ``decision`` item per press of OUR approval buttons
  (action id ``threads_grant``/``threads_deny``, value = challenge id); other actions are ignored.
  ``delivery_id`` = ``trigger_id`` (unique per interaction), ``item_key`` = ``<trigger_id>#<i>``.

Installation id: the workspace ``team_id``, or the ``enterprise_id`` of an org-wide install.
Conversation: ``<channel>`` for a top-level DM, else ``<channel>:<thread root ts>``: a top-level
channel message starts a thread (the reply goes there), a thread reply names its thread.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any
from urllib.parse import parse_qs

from .errors import NoChallenge, Unverified
from .model import ChannelSecrets, Delivery, HttpResponse, InboxItem, WebhookRequest
from .replies import parse_slack_action, slack_conversation

REPLAY_WINDOW_S = 300
KEPT_SUBTYPES = frozenset({None, "thread_broadcast", "file_share"})


def signature(signing_secret: str, timestamp: str, body: bytes) -> str:
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(signing_secret.encode(), base, hashlib.sha256).hexdigest()


def ts_ms(ts: str) -> int | None:
    """A Slack ``ts`` ("1515449522.000016") as epoch ms."""
    sec, _, frac = ts.partition(".")
    if not sec.isdigit() or (frac and not frac.isdigit()):
        return None
    return int(sec) * 1000 + int((frac + "000")[:3])


def _decode(body: bytes) -> dict[str, Any] | None:
    """JSON (Events API) or a form with one ``payload`` field (interactivity)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    stripped = text.lstrip()
    try:
        if stripped.startswith("{"):
            doc = json.loads(stripped)
        else:
            payload = parse_qs(text, strict_parsing=False).get("payload")
            if not payload:
                return None
            doc = json.loads(payload[0])
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _obj(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def _installation(doc: dict[str, Any]) -> str | None:
    if doc.get("type") == "block_actions":
        if doc.get("is_enterprise_install"):
            return _str(_obj(doc.get("enterprise")).get("id"))
        return _str(_obj(doc.get("team")).get("id")) or _str(_obj(doc.get("user")).get("team_id"))
    auths = doc.get("authorizations")
    first = _obj(auths[0]) if isinstance(auths, list) and auths else {}
    if first.get("is_enterprise_install"):
        return _str(first.get("enterprise_id")) or _str(doc.get("enterprise_id"))
    return _str(doc.get("team_id"))


class SlackAdapter:
    provider = "slack"

    def claimed_installations(self, request: WebhookRequest) -> tuple[str, ...]:
        doc = _decode(request.body)
        inst = _installation(doc) if doc else None
        return (inst,) if inst else ()

    def verify(self, request: WebhookRequest, secrets: ChannelSecrets, now_ms: int) -> None:
        if not secrets.signing_secret:
            raise Unverified("no signing secret for this installation")
        ts = request.header("X-Slack-Request-Timestamp") or ""
        sig = request.header("X-Slack-Signature") or ""
        if not ts or not sig:
            raise Unverified("missing X-Slack-Signature or X-Slack-Request-Timestamp")
        if not (ts.isascii() and ts.isdigit()) or len(ts) > 12:
            raise Unverified("malformed X-Slack-Request-Timestamp")
        if abs(now_ms / 1000 - int(ts)) > REPLAY_WINDOW_S:
            raise Unverified("X-Slack-Request-Timestamp outside the 5-minute window")
        expected = signature(secrets.signing_secret, ts, request.body)
        if not hmac.compare_digest(expected.encode(), sig.encode("utf-8", "replace")):
            raise Unverified("X-Slack-Signature does not match")

    def challenge(self, request: WebhookRequest, secrets: ChannelSecrets) -> HttpResponse:
        raise NoChallenge("slack has no GET challenge (url_verification is a signed POST)")

    def parse(self, request: WebhookRequest) -> Delivery:
        doc = _decode(request.body)
        if doc is None:
            return Delivery(delivery_id=_body_id(request.body), ignored=("unparseable body",))
        kind = doc.get("type")
        if kind == "url_verification":
            return Delivery(delivery_id="url_verification", echo=str(doc.get("challenge", "")))
        if kind == "event_callback":
            return _event(doc, request.body)
        if kind == "block_actions":
            return _actions(doc, request.body)
        return Delivery(delivery_id=_body_id(request.body), ignored=(f"payload type {kind!r}",))

    def ack(self, delivery: Delivery) -> HttpResponse:
        if delivery.echo is not None:
            return HttpResponse(200, delivery.echo.encode(), {"content-type": "text/plain"})
        return HttpResponse(200, b"", {})


def _body_id(body: bytes) -> str:
    return "sha256:" + hashlib.sha256(body).hexdigest()


def _event(doc: dict[str, Any], body: bytes) -> Delivery:
    delivery_id = _str(doc.get("event_id")) or _body_id(body)
    inst = _installation(doc)
    ev = _obj(doc.get("event"))
    if inst is None:
        return Delivery(delivery_id=delivery_id, ignored=("no team id",))
    done = Delivery(delivery_id=delivery_id, installation_ids=(inst,))
    if ev.get("type") not in ("message", "app_mention"):
        return _ignored(done, f"event type {ev.get('type')!r}")
    subtype = ev.get("subtype")
    if ev.get("bot_id") or subtype == "bot_message":
        return _ignored(done, "bot message")
    if subtype not in KEPT_SUBTYPES:
        return _ignored(done, f"message subtype {subtype!r}")
    user, channel, ts = _str(ev.get("user")), _str(ev.get("channel")), _str(ev.get("ts"))
    if user is None or channel is None or ts is None:
        return _ignored(done, "message without user, channel or ts")
    auths = doc.get("authorizations")
    me = _obj(auths[0]).get("user_id") if isinstance(auths, list) and auths else None
    if me and user == me:
        return _ignored(done, "our own message")
    thread_ts = _str(ev.get("thread_ts"))
    is_dm = ev.get("channel_type") == "im" or channel.startswith("D")
    root = thread_ts or (None if is_dm else ts)
    text = ev.get("text")
    item = InboxItem(
        installation_id=inst,
        delivery_id=delivery_id,
        item_key=f"{channel}:{ts}",
        conversation=slack_conversation(channel, root),
        sender=user,
        kind="message",
        text=text if isinstance(text, str) else "",
        sent_at_ms=ts_ms(ts),
    )
    return Delivery(delivery_id=delivery_id, items=(item,), installation_ids=(inst,))


def _actions(doc: dict[str, Any], body: bytes) -> Delivery:
    delivery_id = _str(doc.get("trigger_id")) or _body_id(body)
    inst = _installation(doc)
    if inst is None:
        return Delivery(delivery_id=delivery_id, ignored=("no team id",))
    user = _str(_obj(doc.get("user")).get("id"))
    container = _obj(doc.get("container"))
    message = _obj(doc.get("message"))
    channel = _str(container.get("channel_id")) or _str(_obj(doc.get("channel")).get("id"))
    if user is None or channel is None:
        return Delivery(delivery_id=delivery_id, installation_ids=(inst,), ignored=("no user or channel",))
    thread_ts = _str(container.get("thread_ts")) or _str(message.get("thread_ts"))
    conversation = slack_conversation(channel, thread_ts)
    reply_to = _str(container.get("message_ts")) or _str(message.get("ts"))
    items: list[InboxItem] = []
    ignored: list[str] = []
    actions = doc.get("actions")
    for i, action in enumerate(actions if isinstance(actions, list) else []):
        a = _obj(action)
        decision = parse_slack_action(_str(a.get("action_id")), _str(a.get("value")))
        if decision is None:
            ignored.append(f"action {a.get('action_id')!r} is not ours")
            continue
        items.append(
            InboxItem(
                installation_id=inst,
                delivery_id=delivery_id,
                item_key=f"{delivery_id}#{i}",
                conversation=conversation,
                sender=user,
                kind="decision",
                decision=decision,
                sent_at_ms=ts_ms(_str(a.get("action_ts")) or ""),
                reply_to=reply_to,
            )
        )
    return Delivery(
        delivery_id=delivery_id, items=tuple(items), installation_ids=(inst,), ignored=tuple(ignored)
    )


def _ignored(d: Delivery, why: str) -> Delivery:
    return Delivery(delivery_id=d.delivery_id, installation_ids=d.installation_ids, ignored=(why,))
