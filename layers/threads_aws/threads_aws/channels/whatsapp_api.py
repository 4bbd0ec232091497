"""WhatsApp Cloud API sender: ``POST /{version}/{phone_number_id}/messages`` for text replies and
approval prompts (interactive reply buttons).

WhatsApp has no way to look a sent message up, so ``lookup`` answers ``unknown`` and a begun send
whose outcome is in doubt parks for an operator. Each send still carries our call id as
``biz_opaque_callback_data``, which Meta echoes in the message's ``statuses`` webhooks
(``StatusReport.call_id``): evidence a later resolver may use.

Classification: a Graph error with a rate-limit code (4, 80007, 130429, 131056), HTTP 429, or
``is_transient`` on a 4xx → retryable; HTTP 5xx, a dropped connection or a timeout after the
connect → outcome unknown; any other 4xx → rejected (e.g. 131047: outside the 24-hour window,
190: token expired, 100: invalid parameter).

The base URL is ``$WHATSAPP_API_URL`` (default ``https://graph.facebook.com/``), the version
``$WHATSAPP_API_VERSION`` unless the installation names one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from . import _http
from .errors import SendOutcomeUnknown, SendRejected, SendRetryable
from .model import LookupResult, Receipt
from .replies import whatsapp_button_id

DEFAULT_API_URL = "https://graph.facebook.com/"
DEFAULT_API_VERSION = "v21.0"
RATE_LIMIT_CODES = frozenset({4, 80007, 130429, 131056})
SERVICE_WINDOW_MS = 24 * 3600 * 1000


def within_service_window(last_inbound_at_ms: int | None, now_ms: int) -> bool:
    """Free-form messages (text, buttons) are allowed only within 24 h of the user's last
    inbound message; outside it the send would fail with 131047."""
    return last_inbound_at_ms is not None and now_ms - last_inbound_at_ms < SERVICE_WINDOW_MS


class WhatsAppSender:
    provider = "whatsapp"

    def __init__(
        self,
        access_token: str,
        phone_number_id: str,
        *,
        base_url: str | None = None,
        api_version: str | None = None,
        timeout_s: float = 10.0,
    ) -> None:
        self._token = access_token
        self.phone_number_id = phone_number_id
        url = base_url or os.environ.get("WHATSAPP_API_URL") or DEFAULT_API_URL
        self.base_url = url.rstrip("/") + "/"
        self.api_version = api_version or os.environ.get("WHATSAPP_API_VERSION") or DEFAULT_API_VERSION
        self.timeout_s = timeout_s

    def __repr__(self) -> str:
        return f"WhatsAppSender(base_url={self.base_url!r}, phone_number_id={self.phone_number_id!r})"

    @property
    def messages_url(self) -> str:
        return f"{self.base_url}{quote(self.api_version)}/{quote(self.phone_number_id)}/messages"

    def message_body(self, conversation: str, op: Mapping[str, Any], *, call_id: str) -> dict[str, Any]:
        """The ``messages`` request body for one reply op (pure)."""
        text = str(op.get("text") or "")
        body: dict[str, Any] = {
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": conversation,
            "biz_opaque_callback_data": call_id,
        }
        kind = op.get("kind")
        if kind == "text":
            if not text or len(text) > 4096:
                raise SendRejected("whatsapp text body must be 1..4096 characters")
            body.update(type="text", text={"body": text, "preview_url": False})
        elif kind == "approval":
            challenge_id = str(op["challenge_id"])
            if len(whatsapp_button_id("grant", challenge_id)) > 256:
                raise SendRejected("challenge id too long for a WhatsApp reply button id")
            body.update(
                type="interactive",
                interactive={
                    "type": "button",
                    "body": {"text": (text or "Approval needed")[:1024]},
                    "action": {
                        "buttons": [
                            {
                                "type": "reply",
                                "reply": {
                                    "id": whatsapp_button_id("grant", challenge_id),
                                    "title": "Approve",
                                },
                            },
                            {
                                "type": "reply",
                                "reply": {"id": whatsapp_button_id("deny", challenge_id), "title": "Deny"},
                            },
                        ]
                    },
                },
            )
        else:
            raise SendRejected(f"unknown reply op kind {kind!r}")
        return body

    def send(self, conversation: str, op: Mapping[str, Any], *, call_id: str) -> Receipt:
        payload = json.dumps(self.message_body(conversation, op, call_id=call_id), separators=(",", ":"))
        res = _http.request(
            "POST",
            self.messages_url,
            body=payload.encode(),
            headers={"Authorization": f"Bearer {self._token}", "Content-Type": "application/json"},
            timeout_s=self.timeout_s,
        )
        doc = _json(res.body)
        if 200 <= res.status < 300:
            messages = doc.get("messages") if doc else None
            wamid = (
                messages[0].get("id")
                if isinstance(messages, list) and messages and isinstance(messages[0], dict)
                else None
            )
            if not isinstance(wamid, str):
                raise SendOutcomeUnknown(
                    "whatsapp messages: 2xx without a message id", reason="transport_error"
                )
            return Receipt(
                message_id=wamid, provider_receipt=wamid, raw={"message_id": wamid, "to": conversation}
            )
        err = doc.get("error") if doc else None
        err = err if isinstance(err, dict) else {}
        code = err.get("code")
        label = f"whatsapp messages: HTTP {res.status}" + (
            f", code {code}: {err.get('message', '')}" if code else ""
        )
        pcode = str(code) if code is not None else None
        if res.status == 429 or code in RATE_LIMIT_CODES:
            raise SendRetryable(
                label,
                retry_after_s=_http.retry_after(res.headers),
                provider_code=pcode,
                http_status=res.status,
            )
        if res.status >= 500:
            raise SendOutcomeUnknown(
                label, reason="transport_error", provider_code=pcode, http_status=res.status
            )
        if err.get("is_transient") is True:
            raise SendRetryable(label, provider_code=pcode, http_status=res.status)
        raise SendRejected(label, provider_code=pcode, http_status=res.status)

    def lookup(self, conversation: str, *, call_id: str, since_ms: int) -> LookupResult:
        return LookupResult("unknown")


def _json(body: bytes) -> dict[str, Any] | None:
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    return doc if isinstance(doc, dict) else None
