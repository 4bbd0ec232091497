"""The ``/channels/{channel}/events`` route on a Lambda function URL (payload format 2.0), for one
provider's webhook function (AuthType NONE: the provider's signature authenticates).

Order (semantics.md §5, Channels): the path and the channel first (a path of another shape, a
channel no enabled installation uses, or one of another provider than this function's → 404
``not_found``); GET → the adapter's challenge (200 echo, 401 ``unverified``, 404 when the
provider has none); POST → `intake.receive` (verify on the raw bytes: a forged or stale signature
is 401 ``unverified`` with nothing stored; so is a body over `bounds` (size, nesting depth),
refused before any parse), then `accept.accept` (the batch durable), then the
adapter's ack. A secret or agent the deployment cannot resolve is a 503 and the provider
redelivers: nothing verified is dropped.

`handle` takes its collaborators (tests, the conformance runner); `webhook` is what a function's
handler calls, over this container's `services.current()`.
"""

from __future__ import annotations

import base64
import json
import logging
import re
from collections.abc import Mapping
from typing import Any

from .errors import NoChallenge, UnknownChannel, Unverified
from .installations import Installations, load_installations
from .model import ChannelAdapter, HttpResponse, WebhookRequest
from .secrets import SecretResolver, SecretUnavailable

log = logging.getLogger("threads_aws.channels")

PATH = re.compile(r"/channels/([a-z][a-z0-9_]{0,63})/events/?\Z")
_resolver: SecretResolver | None = None


def _error(status: int, code: str, message: str) -> dict[str, Any]:
    body = json.dumps({"error": {"code": code, "message": message}})
    return {"statusCode": status, "headers": {"Content-Type": "application/json"}, "body": body}


def _answer(resp: HttpResponse) -> dict[str, Any]:
    try:
        return {"statusCode": resp.status, "headers": dict(resp.headers), "body": resp.body.decode("utf-8")}
    except UnicodeDecodeError:
        return {
            "statusCode": resp.status,
            "headers": dict(resp.headers),
            "body": base64.b64encode(resp.body).decode("ascii"),
            "isBase64Encoded": True,
        }


def request_of(event: Mapping[str, Any]) -> tuple[str, WebhookRequest]:
    """(raw path, request) of a function URL event: the body as the raw bytes that were signed."""
    http = (event.get("requestContext") or {}).get("http") or {}
    raw = event.get("body") or ""
    body = base64.b64decode(raw) if event.get("isBase64Encoded") else raw.encode("utf-8")
    query = {k: v for k, v in (event.get("queryStringParameters") or {}).items() if isinstance(v, str)}
    headers = {str(k): str(v) for k, v in (event.get("headers") or {}).items()}
    method = str(http.get("method") or "GET").upper()
    return str(event.get("rawPath") or http.get("path") or "/"), WebhookRequest(method, body, headers, query)


def handle(
    event: Mapping[str, Any],
    *,
    provider: str | None,
    services: Any,
    installations: Installations | None = None,
    resolver: SecretResolver | None = None,
    adapter: ChannelAdapter | None = None,
) -> dict[str, Any]:
    from . import intake

    path, request = request_of(event)
    m = PATH.match(path)
    if m is None:
        return _error(404, "not_found", f"no route {path}")
    channel = m.group(1)
    insts = installations if installations is not None else load_installations()
    if provider is not None and insts.provider(channel) not in (None, provider):
        return _error(404, "not_found", f"channel {channel} is not served by this {provider} endpoint")
    res = resolver or _default_resolver()
    try:
        if request.method == "GET":
            return _answer(intake.challenge(channel, request, insts, res, adapter=adapter))
        if request.method != "POST":
            return _error(404, "not_found", f"no route {request.method} {path}")
        received = intake.receive(channel, request, insts, res, services.clock(), adapter=adapter)
        _accept(received, services)
        return _answer(received.response)
    except (UnknownChannel, NoChallenge) as exc:
        return _error(404, "not_found", str(exc))
    except Unverified as exc:
        return _error(401, "unverified", str(exc))
    except SecretUnavailable as exc:
        log.error("channel %s: %s", channel, exc)
        return _error(503, "unavailable", "this channel's configuration cannot be read; retry later")


def _accept(received: Any, services: Any) -> None:
    from .accept import AgentUnavailable, accept

    try:
        accept(
            received,
            stores=services.stores,
            writer=services.writer,
            agents=services.agents,
            queue=services.inbox_queue,
            now_ms=services.clock(),
        )
    except AgentUnavailable as exc:
        raise SecretUnavailable(str(exc)) from exc


def _default_resolver() -> SecretResolver:
    global _resolver
    if _resolver is None:
        _resolver = SecretResolver()
    return _resolver


def webhook(event: Mapping[str, Any], provider: str) -> dict[str, Any]:
    """A provider webhook function's whole handler."""
    from .. import services

    return handle(event, provider=provider, services=services.current())
