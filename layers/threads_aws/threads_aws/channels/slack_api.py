"""Slack Web API sender: ``chat.postMessage`` for replies and approval prompts, and the lookup
that reconciles a begun send.

Every post carries message ``metadata`` ``{event_type: threads_channel_send, event_payload:
{call_id}}``. A send whose outcome is unknown (timeout, dropped connection, 5xx) is reconciled
by reading the conversation (``conversations.replies`` for a thread, ``conversations.history``
for a top-level conversation) from the effect's begin time with ``include_all_metadata`` and
matching that call id: ``found`` → the receipt; the walk reached the end without it →
``not_found`` (safe to resend); the walk hit its page bound, or Slack refused the read
(``missing_scope``, ``thread_not_found``…) → ``unknown`` (park); a transient read failure raises
``SendRetryable`` (look again later).

Classification (``errors``): HTTP 429 / ``ratelimited`` → retryable with ``Retry-After``;
``service_unavailable``, ``request_timeout`` (Slack did not get the whole request) → retryable;
HTTP 5xx, ``internal_error`` and ``fatal_error`` (Slack: "some aspect of the operation may have
succeeded") → outcome unknown for a post, retryable for a read; any other ``ok: false`` →
rejected. Reads never have an effect, so they are never "unknown".

The base URL is ``$SLACK_API_URL`` (default ``https://slack.com/api/``), so tests and the local
host point it at ``threads_aws_dev.fakes.slack``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from . import _http
from .errors import SendOutcomeUnknown, SendRejected, SendRetryable
from .model import LookupResult, Receipt
from .replies import (
    SLACK_ACTIONS_BLOCK,
    SLACK_DENY,
    SLACK_GRANT,
    SLACK_METADATA_EVENT,
    split_slack_conversation,
)

DEFAULT_API_URL = "https://slack.com/api/"
RETRYABLE = frozenset({"ratelimited", "service_unavailable", "request_timeout"})
MAYBE_DONE = frozenset({"internal_error", "fatal_error"})
# Look back this far before the effect's begin: Slack's clock and ours may differ.
LOOKUP_SKEW_MS = 60_000


def _ts(ms: int) -> str:
    ms = max(ms, 0)
    return f"{ms // 1000}.{ms % 1000:03d}000"


class SlackSender:
    provider = "slack"

    def __init__(
        self,
        bot_token: str,
        *,
        base_url: str | None = None,
        timeout_s: float = 10.0,
        lookup_pages: int = 5,
    ) -> None:
        self._token = bot_token
        url = base_url or os.environ.get("SLACK_API_URL") or DEFAULT_API_URL
        self.base_url = url.rstrip("/") + "/"
        self.timeout_s = timeout_s
        self.lookup_pages = lookup_pages

    def __repr__(self) -> str:
        return f"SlackSender(base_url={self.base_url!r})"

    # -- the Web API ---------------------------------------------------------------------------

    def call(self, method: str, args: Mapping[str, Any], *, effectful: bool) -> dict[str, Any]:
        """One Web API call; returns the ``ok: true`` document or raises a classified error.
        Writes go as JSON, reads as a form (every method accepts a form)."""
        headers = {"Authorization": f"Bearer {self._token}"}
        if effectful:
            body = json.dumps(args, separators=(",", ":")).encode()
            headers["Content-Type"] = "application/json; charset=utf-8"
        else:
            body = urlencode({k: v for k, v in args.items() if v is not None}).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            res = _http.request(
                "POST", self.base_url + method, body=body, headers=headers, timeout_s=self.timeout_s
            )
        except SendOutcomeUnknown:
            if effectful:
                raise
            raise SendRetryable(f"slack {method}: no answer (read, safe to repeat)") from None
        return self._classify(method, res, effectful)

    def _classify(self, method: str, res: _http.HttpResult, effectful: bool) -> dict[str, Any]:
        if res.status == 429:
            raise SendRetryable(
                f"slack {method}: rate limited",
                retry_after_s=_http.retry_after(res.headers),
                provider_code="ratelimited",
                http_status=429,
            )
        if res.status >= 500:
            if effectful:
                raise SendOutcomeUnknown(
                    f"slack {method}: HTTP {res.status}", reason="transport_error", http_status=res.status
                )
            raise SendRetryable(f"slack {method}: HTTP {res.status}", http_status=res.status)
        try:
            doc = json.loads(res.body)
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            if effectful and res.status == 200:
                raise SendOutcomeUnknown(f"slack {method}: unreadable answer", reason="transport_error")
            raise SendRejected(
                f"slack {method}: HTTP {res.status}, not a Slack answer", http_status=res.status
            )
        if doc.get("ok") is True:
            return doc
        code = str(doc.get("error") or "unknown_error")
        if code in RETRYABLE:
            raise SendRetryable(
                f"slack {method}: {code}", retry_after_s=_http.retry_after(res.headers), provider_code=code
            )
        if code in MAYBE_DONE:
            if effectful:
                raise SendOutcomeUnknown(
                    f"slack {method}: {code}", reason="transport_error", provider_code=code
                )
            raise SendRetryable(f"slack {method}: {code}", provider_code=code)
        raise SendRejected(f"slack {method}: {code}", provider_code=code, http_status=res.status)

    def auth_test(self) -> dict[str, Any]:
        """Who the token is (team, bot user): a cheap check of a configured bot token."""
        return self.call("auth.test", {}, effectful=False)

    # -- ChannelSender ------------------------------------------------------------------------

    def message_args(self, conversation: str, op: Mapping[str, Any], *, call_id: str) -> dict[str, Any]:
        """The ``chat.postMessage`` arguments for one reply op (pure)."""
        channel, thread_ts = split_slack_conversation(conversation)
        text = str(op.get("text") or "")
        args: dict[str, Any] = {
            "channel": channel,
            "text": text,
            "metadata": {"event_type": SLACK_METADATA_EVENT, "event_payload": {"call_id": call_id}},
            "unfurl_links": False,
            "unfurl_media": False,
        }
        if thread_ts:
            args["thread_ts"] = thread_ts
        kind = op.get("kind")
        if kind == "approval":
            challenge_id = str(op["challenge_id"])
            args["blocks"] = [
                {"type": "section", "text": {"type": "mrkdwn", "text": text[:3000] or "Approval needed"}},
                {
                    "type": "actions",
                    "block_id": SLACK_ACTIONS_BLOCK,
                    "elements": [
                        _button("Approve", SLACK_GRANT, challenge_id, "primary"),
                        _button("Deny", SLACK_DENY, challenge_id, "danger"),
                    ],
                },
            ]
        elif kind != "text":
            raise SendRejected(f"unknown reply op kind {kind!r}")
        return args

    def send(self, conversation: str, op: Mapping[str, Any], *, call_id: str) -> Receipt:
        doc = self.call(
            "chat.postMessage", self.message_args(conversation, op, call_id=call_id), effectful=True
        )
        ts, channel = doc.get("ts"), doc.get("channel")
        if not isinstance(ts, str) or not isinstance(channel, str):
            raise SendOutcomeUnknown(
                "slack chat.postMessage: ok without channel/ts", reason="transport_error"
            )
        return Receipt(message_id=ts, provider_receipt=f"{channel}:{ts}", raw={"channel": channel, "ts": ts})

    def lookup(self, conversation: str, *, call_id: str, since_ms: int) -> LookupResult:
        channel, thread_ts = split_slack_conversation(conversation)
        args: dict[str, Any] = {
            "channel": channel,
            "oldest": _ts(since_ms - LOOKUP_SKEW_MS),
            "inclusive": "true",
            "include_all_metadata": "true",
            "limit": "200",
        }
        method = "conversations.history"
        if thread_ts:
            method, args["ts"] = "conversations.replies", thread_ts
        for _ in range(self.lookup_pages):
            try:
                doc = self.call(method, args, effectful=False)
            except SendRejected:  # missing_scope, thread_not_found, not_in_channel: can't tell
                return LookupResult("unknown")
            for msg in doc.get("messages") or []:
                found = _match(msg, call_id, channel)
                if found is not None:
                    return LookupResult("found", found)
            cursor = (doc.get("response_metadata") or {}).get("next_cursor")
            if not cursor or not doc.get("has_more", True):
                return LookupResult("not_found")
            args["cursor"] = cursor
        return LookupResult("unknown")


def _button(label: str, action_id: str, value: str, style: str) -> dict[str, Any]:
    return {
        "type": "button",
        "action_id": action_id,
        "value": value,
        "style": style,
        "text": {"type": "plain_text", "text": label},
    }


def _match(msg: Any, call_id: str, channel: str) -> Receipt | None:
    if not isinstance(msg, dict):
        return None
    md = msg.get("metadata")
    if not isinstance(md, dict) or md.get("event_type") != SLACK_METADATA_EVENT:
        return None
    payload = md.get("event_payload")
    if not isinstance(payload, dict) or payload.get("call_id") != call_id:
        return None
    ts = msg.get("ts")
    if not isinstance(ts, str):
        return None
    return Receipt(message_id=ts, provider_receipt=f"{channel}:{ts}", raw={"channel": channel, "ts": ts})
