"""A local HTTP fake of the WhatsApp Cloud API ``messages`` endpoint (dev and tests only),
written from Meta's public reference, and helpers that build correctly signed webhooks.

Point the sender at it with ``WHATSAPP_API_URL=http://127.0.0.1:PORT/``.
``POST /{version}/{phone_number_id}/messages``:
- Bearer token checked (401, Graph code 190 ``OAuthException``); the phone number id must be
  one of the fake's (400, code 100 ``GraphMethodException``).
- Body checked as the reference states (400, code 100): ``messaging_product: whatsapp``, ``to``,
  ``type`` text (``text.body`` 1..4096) or interactive ``button`` (body ≤ 1024, 1–3 reply
  buttons, ids ≤ 256 and unique, titles 1..20 and unique), ``biz_opaque_callback_data`` ≤ 512;
  or a read receipt ``{status: read, message_id}``.
- Answers ``{messaging_product, contacts: [{input, wa_id}], messages: [{id: wamid…}]}`` and
  records the send in ``sent`` (with its wamid).
Failure injection (``_channel_http``): ``error:<graph code>`` (HTTP 400 with that code, e.g.
130429 throughput limit, 131047 outside the 24 h window), ``ratelimited`` (HTTP 429, code
130429), ``transient`` (400 with ``is_transient``), ``status:<http>``, ``hang``, ``drop``.

Run alone: ``python -m threads_aws_dev.fakes.whatsapp --port 8791``.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import itertools
import json
import re
from collections.abc import Iterable
from typing import Any

from ._channel_http import Answer, Failure, FakeServer, Incoming, Signed

DEFAULT_TOKEN = "EAAfake-token"
DEFAULT_PHONE_NUMBER_ID = "100000000000001"
PATH = re.compile(r"/(v\d+\.\d+)/([^/]+)/messages\Z")


class FakeWhatsApp(FakeServer):
    def __init__(
        self,
        *,
        tokens: Iterable[str] = (DEFAULT_TOKEN,),
        phone_number_ids: Iterable[str] = (DEFAULT_PHONE_NUMBER_ID,),
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.tokens = set(tokens)
        self.phone_number_ids = set(phone_number_ids)
        self.sent: list[dict[str, Any]] = []  # accepted message bodies + "wamid", "phone_number_id"
        self.read_receipts: list[str] = []
        self._ids = itertools.count(1)
        super().__init__(host, port)

    @property
    def url(self) -> str:
        """The ``WHATSAPP_API_URL`` value for this fake."""
        return self.origin + "/"

    def reset_state(self) -> None:
        self.sent.clear()
        self.read_receipts.clear()

    def api_method(self, incoming: Incoming) -> str:
        return "messages" if PATH.match(incoming.path) else incoming.path

    def handle(self, incoming: Incoming, failure: Failure | None) -> Answer:
        m = PATH.match(incoming.path)
        if incoming.method != "POST" or m is None:
            return _graph_error(400, 100, "Unknown path components", "OAuthException")
        if failure is not None:
            early = _failure_answer(failure)
            if early is not None:
                return early
        auth = incoming.headers.get("authorization", "")
        if not auth.startswith("Bearer ") or auth.removeprefix("Bearer ").strip() not in self.tokens:
            return _graph_error(
                401, 190, "Invalid OAuth access token - Cannot parse access token", "OAuthException"
            )
        pnid = m.group(2)
        if pnid not in self.phone_number_ids:
            return _graph_error(
                400,
                100,
                f"Unsupported post request. Object with ID '{pnid}' does not exist",
                "GraphMethodException",
            )
        try:
            body = json.loads(incoming.body)
        except ValueError:
            return _graph_error(400, 100, "Invalid JSON body")
        problem = _check(body)
        if problem:
            return _graph_error(400, 100, f"(#100) {problem}")
        with self.lock:
            if body.get("status") == "read":
                self.read_receipts.append(body["message_id"])
                return Answer(200, {"success": True})
            wamid = "wamid." + base64.b64encode(f"fake-{pnid}-{next(self._ids)}".encode()).decode()
            self.sent.append(dict(body, wamid=wamid, phone_number_id=pnid))
        return Answer(
            200,
            {
                "messaging_product": "whatsapp",
                "contacts": [{"input": body["to"], "wa_id": body["to"]}],
                "messages": [{"id": wamid}],
            },
        )


def _graph_error(status: int, code: int, message: str, kind: str = "OAuthException", **extra: Any) -> Answer:
    err = {"message": message, "type": kind, "code": code, "fbtrace_id": "AfakeTrace", **extra}
    return Answer(status, {"error": err})


def _failure_answer(f: Failure) -> Answer | None:
    if f.mode == "ratelimited":
        return Answer(
            429,
            {"error": {"message": "(#130429) Rate limit hit", "type": "OAuthException", "code": 130429}},
            {"Retry-After": str(int(f.retry_after_s))},
        )
    if f.mode == "transient":
        return _graph_error(400, 2, "Service temporarily unavailable", is_transient=True)
    if f.mode.startswith("error:"):
        return _graph_error(400, int(f.mode.removeprefix("error:")), "Injected error")
    if f.mode.startswith("status:"):
        return _graph_error(int(f.mode.removeprefix("status:")), 1, "An unknown error occurred")
    return None


def _check(body: Any) -> str | None:
    if not isinstance(body, dict) or body.get("messaging_product") != "whatsapp":
        return "The parameter messaging_product is required and must be whatsapp."
    if body.get("status") == "read":
        return None if isinstance(body.get("message_id"), str) else "The parameter message_id is required."
    if not isinstance(body.get("to"), str) or not body["to"]:
        return "The parameter to is required."
    opaque = body.get("biz_opaque_callback_data")
    if opaque is not None and (not isinstance(opaque, str) or len(opaque) > 512):
        return "biz_opaque_callback_data must be a string of at most 512 characters."
    kind = body.get("type", "text")
    if kind == "text":
        text = body.get("text")
        b = text.get("body") if isinstance(text, dict) else None
        if not isinstance(b, str) or not 1 <= len(b) <= 4096:
            return "The parameter text['body'] is required and must be 1..4096 characters."
        return None
    if kind == "interactive":
        return _check_interactive(body.get("interactive"))
    return f"Unsupported message type {kind!r} in this fake."


def _check_interactive(inter: Any) -> str | None:
    if not isinstance(inter, dict) or inter.get("type") != "button":
        return "interactive['type'] must be button in this fake."
    b = inter.get("body")
    if not isinstance(b, dict) or not isinstance(b.get("text"), str) or not 1 <= len(b["text"]) <= 1024:
        return "interactive['body']['text'] is required, at most 1024 characters."
    action = inter.get("action")
    buttons = action.get("buttons") if isinstance(action, dict) else None
    if not isinstance(buttons, list) or not 1 <= len(buttons) <= 3:
        return "interactive['action']['buttons'] must hold 1 to 3 buttons."
    ids, titles = [], []
    for btn in buttons:
        reply = btn.get("reply") if isinstance(btn, dict) and btn.get("type") == "reply" else None
        if not isinstance(reply, dict):
            return "each button must be {type: reply, reply: {id, title}}."
        bid, title = reply.get("id"), reply.get("title")
        if not isinstance(bid, str) or not 1 <= len(bid) <= 256:
            return "button reply id must be 1..256 characters."
        if not isinstance(title, str) or not 1 <= len(title) <= 20:
            return "button reply title must be 1..20 characters."
        ids.append(bid)
        titles.append(title)
    if len(set(ids)) != len(ids) or len(set(titles)) != len(titles):
        return "button ids and titles must be unique."
    return None


# -- signed webhooks, as Meta sends them ---------------------------------------------------------


def sign(app_secret: str, body: bytes) -> dict[str, str]:
    return {
        "X-Hub-Signature-256": "sha256=" + hmac.new(app_secret.encode(), body, hashlib.sha256).hexdigest()
    }


def signed(app_secret: str, doc: dict[str, Any]) -> Signed:
    # Meta sends escaped-unicode JSON; ensure_ascii reproduces that (the bytes are what count).
    body = json.dumps(doc, separators=(",", ":"), ensure_ascii=True).encode()
    return Signed(body=body, headers={"Content-Type": "application/json", **sign(app_secret, body)})


def challenge_request(verify_token: str, challenge: str, mode: str = "subscribe") -> Signed:
    query = {"hub.mode": mode, "hub.verify_token": verify_token, "hub.challenge": challenge}
    return Signed(body=b"", headers={}, query=query, method="GET")


def text_message(sender: str, text: str, *, wamid: str, timestamp: int) -> dict[str, Any]:
    return {"from": sender, "id": wamid, "timestamp": str(timestamp), "type": "text", "text": {"body": text}}


def button_reply(
    sender: str, button_id: str, title: str, *, wamid: str, timestamp: int, context_id: str | None = None
) -> dict[str, Any]:
    msg: dict[str, Any] = {
        "from": sender,
        "id": wamid,
        "timestamp": str(timestamp),
        "type": "interactive",
        "interactive": {"type": "button_reply", "button_reply": {"id": button_id, "title": title}},
    }
    if context_id:
        msg["context"] = {"from": "15550000000", "id": context_id}
    return msg


def status(
    wamid: str,
    state: str,
    *,
    recipient: str,
    timestamp: int,
    call_id: str | None = None,
    error_code: int | None = None,
) -> dict[str, Any]:
    s: dict[str, Any] = {"id": wamid, "status": state, "timestamp": str(timestamp), "recipient_id": recipient}
    if call_id is not None:
        s["biz_opaque_callback_data"] = call_id
    if error_code is not None:
        s["errors"] = [{"code": error_code, "title": "Message failed", "message": "Message failed"}]
    return s


def webhook(
    phone_number_id: str,
    *,
    messages: Iterable[dict[str, Any]] = (),
    statuses: Iterable[dict[str, Any]] = (),
    waba_id: str = "200000000000002",
    contact_name: str = "Ana",
) -> dict[str, Any]:
    value: dict[str, Any] = {
        "messaging_product": "whatsapp",
        "metadata": {"display_phone_number": "15550000000", "phone_number_id": phone_number_id},
    }
    messages, statuses = list(messages), list(statuses)
    if messages:
        senders = dict.fromkeys(m["from"] for m in messages if "from" in m)
        value["contacts"] = [{"profile": {"name": contact_name}, "wa_id": s} for s in senders]
        value["messages"] = messages
    if statuses:
        value["statuses"] = statuses
    return {
        "object": "whatsapp_business_account",
        "entry": [{"id": waba_id, "changes": [{"field": "messages", "value": value}]}],
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="A local fake of the WhatsApp Cloud API messages endpoint")
    ap.add_argument("--port", type=int, default=8791)
    ap.add_argument("--token", action="append", default=None)
    ap.add_argument("--phone-number-id", action="append", default=None)
    args = ap.parse_args(argv)
    fake = FakeWhatsApp(
        tokens=args.token or [DEFAULT_TOKEN],
        phone_number_ids=args.phone_number_id or [DEFAULT_PHONE_NUMBER_ID],
        port=args.port,
    )
    print(f"fake whatsapp: WHATSAPP_API_URL={fake.url}", flush=True)
    fake.serve_forever()


if __name__ == "__main__":
    main()
