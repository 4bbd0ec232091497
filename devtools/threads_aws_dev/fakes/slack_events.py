"""Slack's webhook requests as Slack sends them, correctly signed (v0 HMAC-SHA256 of
`v0:<timestamp>:<body>`, `X-Slack-Signature` / `X-Slack-Request-Timestamp`), for tests and
benchmarks of the channel route: Events API posts (`url_verification`, `event_callback` around a
`message_event`, with Slack's redelivery headers on request) and interactivity posts (a form
body's `payload`: `block_actions` of a `button_action`). Written from Slack's public
references; the Web API fake is `slack`."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any
from urllib.parse import urlencode

from ._channel_http import Signed


def sign(signing_secret: str, body: bytes, timestamp: int) -> dict[str, str]:
    base = b"v0:" + str(timestamp).encode() + b":" + body
    sig = "v0=" + hmac.new(signing_secret.encode(), base, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": str(timestamp), "X-Slack-Signature": sig}


def signed_json(
    signing_secret: str, doc: dict[str, Any], *, timestamp: int, retry_num: int | None = None
) -> Signed:
    """An Events API POST (JSON body). ``retry_num`` adds Slack's redelivery headers."""
    body = json.dumps(doc, separators=(",", ":")).encode()
    headers = {"Content-Type": "application/json", **sign(signing_secret, body, timestamp)}
    if retry_num is not None:
        headers["X-Slack-Retry-Num"] = str(retry_num)
        headers["X-Slack-Retry-Reason"] = "http_timeout"
    return Signed(body=body, headers=headers)


def signed_form(signing_secret: str, payload: dict[str, Any], *, timestamp: int) -> Signed:
    """An interactivity POST: the form field ``payload=<json>``, signed over the form bytes."""
    body = urlencode({"payload": json.dumps(payload, separators=(",", ":"))}).encode()
    headers = {"Content-Type": "application/x-www-form-urlencoded", **sign(signing_secret, body, timestamp)}
    return Signed(body=body, headers=headers)


def url_verification(challenge: str) -> dict[str, Any]:
    return {"token": "legacy-token", "challenge": challenge, "type": "url_verification"}


def message_event(
    channel: str,
    user: str,
    text: str,
    ts: str,
    *,
    thread_ts: str | None = None,
    channel_type: str = "channel",
    kind: str = "message",
    subtype: str | None = None,
    bot_id: str | None = None,
) -> dict[str, Any]:
    ev: dict[str, Any] = {
        "type": kind,
        "user": user,
        "text": text,
        "ts": ts,
        "channel": channel,
        "event_ts": ts,
    }
    if kind == "message":
        ev["channel_type"] = channel_type
    if thread_ts:
        ev["thread_ts"] = thread_ts
    if subtype:
        ev["subtype"] = subtype
    if bot_id:
        ev["bot_id"] = bot_id
    return ev


def event_callback(
    event: dict[str, Any],
    *,
    team_id: str,
    event_id: str,
    event_time: int,
    api_app_id: str = "A0FAKE",
    bot_user_id: str = "U0BOT",
    enterprise_id: str | None = None,
) -> dict[str, Any]:
    return {
        "token": "legacy-token",
        "team_id": team_id,
        "api_app_id": api_app_id,
        "event": event,
        "type": "event_callback",
        "event_id": event_id,
        "event_time": event_time,
        "authorizations": [
            {
                "enterprise_id": enterprise_id,
                "team_id": team_id,
                "user_id": bot_user_id,
                "is_bot": True,
                "is_enterprise_install": enterprise_id is not None,
            }
        ],
        "is_ext_shared_channel": False,
    }


def button_action(
    challenge_id: str, decision: str, *, action_ts: str = "1790000000.000100"
) -> dict[str, Any]:
    """A press of our approval button (as ``SlackSender`` builds it)."""
    from threads_aws.channels.replies import SLACK_ACTIONS_BLOCK, SLACK_DENY, SLACK_GRANT

    return {
        "type": "button",
        "action_id": SLACK_GRANT if decision == "grant" else SLACK_DENY,
        "block_id": SLACK_ACTIONS_BLOCK,
        "value": challenge_id,
        "text": {"type": "plain_text", "text": "Approve" if decision == "grant" else "Deny"},
        "action_ts": action_ts,
    }


def block_actions(
    actions: list[dict[str, Any]],
    *,
    team_id: str,
    user: str,
    channel: str,
    message_ts: str,
    trigger_id: str,
    thread_ts: str | None = None,
    api_app_id: str = "A0FAKE",
) -> dict[str, Any]:
    container: dict[str, Any] = {
        "type": "message",
        "message_ts": message_ts,
        "channel_id": channel,
        "is_ephemeral": False,
    }
    message: dict[str, Any] = {
        "type": "message",
        "ts": message_ts,
        "bot_id": "B0BOT",
        "text": "Approval needed",
    }
    if thread_ts:
        container["thread_ts"] = thread_ts
        message["thread_ts"] = thread_ts
    return {
        "type": "block_actions",
        "team": {"id": team_id, "domain": "fake"},
        "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": team_id},
        "api_app_id": api_app_id,
        "token": "legacy-token",
        "container": container,
        "trigger_id": trigger_id,
        "channel": {"id": channel, "name": "general"},
        "message": message,
        "response_url": "https://hooks.slack.com/actions/T0/1/x",
        "actions": actions,
    }
