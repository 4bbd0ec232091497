"""Lambda function URLs, locally: the template's functions with a ``FunctionUrlConfig`` served
on the gateway's port at the contract's ``/channels/{channel}/events`` path, with the payload
format 2.0 event a deployed function URL sends (AuthType NONE: no authorizer, no API Gateway
stage, throttle or gateway responses; the function answers everything itself).

A deployment gives each function its own URL; here they share the gateway's port, so a request
for channel C goes to the function whose ``Metadata.ThreadsChannelProvider`` is C's provider in
the channels file (`channels.installations`); a channel no installation names goes to the first
such function, which answers 404 as the deployed one would. The answer is the function URL's:
a dict with ``statusCode`` as given, anything else a 200 JSON body.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import time
import uuid
from typing import Any
from urllib.parse import parse_qsl

from .gateway import MAX_INVOKE_REQUEST, MAX_RESPONSE, Request, Response
from .runtime import Handlers
from .sam import ACCOUNT, Template

log = logging.getLogger("threads_aws_dev.local")

CHANNEL_PATH = re.compile(r"/channels/([^/]+)/events/?\Z")
_TEXT = ("text/", "application/json", "application/x-www-form-urlencoded", "application/xml")


class FunctionUrls:
    def __init__(self, template: Template, handlers: Handlers, *, region: str = "us-east-1") -> None:
        self.handlers = handlers
        self.region = region
        self.by_provider: dict[str, str] = {}
        self.functions = [lid for lid in template.function_urls if lid in template.functions]
        for lid in self.functions:
            provider = template.function_urls[lid].get("ThreadsChannelProvider")
            if isinstance(provider, str):
                self.by_provider.setdefault(provider, lid)

    def function_for(self, path: str) -> str | None:
        m = CHANNEL_PATH.match(path)
        if m is None or not self.functions:
            return None
        from threads_aws.channels.installations import ChannelsConfigError, load_installations

        try:
            provider = load_installations().provider(m.group(1))
        except ChannelsConfigError as exc:
            log.error("channels file: %s", exc)
            provider = None
        return self.by_provider.get(provider or "", self.functions[0])

    def handle(self, req: Request) -> Response | None:
        """The function URL's answer, or None when no function URL serves this path."""
        lid = self.function_for(req.path)
        if lid is None:
            return None
        request_id = str(uuid.uuid4())
        event = self.event(req, request_id)
        if len(json.dumps(event).encode()) > MAX_INVOKE_REQUEST:
            return Response(413, [("Content-Type", "application/json")], b'{"Message":"Request Too Long"}')
        try:
            answer = self.handlers.invoke(lid, event, request_id)
            if len(json.dumps(answer, ensure_ascii=False).encode()) > MAX_RESPONSE:
                raise ValueError("response over Lambda's 6 MB limit")
            return _response(answer, request_id)
        except Exception:
            log.exception("%s raised (the function URL answers 502)", lid)
            body = b'{"Message":"Internal Server Error"}'
            return Response(
                502, [("Content-Type", "application/json"), ("x-amzn-RequestId", request_id)], body
            )

    def event(self, req: Request, request_id: str) -> dict[str, Any]:
        headers: dict[str, str] = {}
        cookies: list[str] = []
        for k, v in req.headers:
            name = k.lower()
            if name == "cookie":
                cookies += [c.strip() for c in v.split(";") if c.strip()]
                continue
            headers[name] = f"{headers[name]},{v}" if name in headers else v
        query: dict[str, str] = {}
        for k, v in parse_qsl(req.query, keep_blank_values=True):
            query[k] = f"{query[k]},{v}" if k in query else v
        content_type = headers.get("content-type", "").split(";")[0].strip()
        text = content_type.startswith(_TEXT) or content_type.endswith("+json")
        body: str | None = None
        b64 = False
        if req.body:
            try:
                body = req.body.decode("utf-8") if text else None
            except UnicodeDecodeError:
                body = None
            if body is None:
                body, b64 = base64.b64encode(req.body).decode("ascii"), True
        now = time.time()
        event: dict[str, Any] = {
            "version": "2.0",
            "routeKey": "$default",
            "rawPath": req.path,
            "rawQueryString": req.query,
            "headers": headers,
            "requestContext": {
                "accountId": "anonymous",
                "apiId": "local",
                "domainName": headers.get("host", "127.0.0.1"),
                "domainPrefix": "local",
                "http": {
                    "method": req.method,
                    "path": req.path,
                    "protocol": "HTTP/1.1",
                    "sourceIp": req.source_ip,
                    "userAgent": headers.get("user-agent", ""),
                },
                "requestId": request_id,
                "routeKey": "$default",
                "stage": "$default",
                "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
                "timeEpoch": int(now * 1000),
            },
            "isBase64Encoded": b64,
        }
        if cookies:
            event["cookies"] = cookies
        if query:
            event["queryStringParameters"] = query
        if body is not None:
            event["body"] = body
        return event


def _response(answer: Any, request_id: str) -> Response:
    if not (isinstance(answer, dict) and "statusCode" in answer):
        # Function URLs infer the response: a non-dict (or a dict without statusCode) is a 200 JSON body.
        body = answer if isinstance(answer, str) else json.dumps(answer)
        return Response(
            200, [("Content-Type", "application/json"), ("x-amzn-RequestId", request_id)], body.encode()
        )
    headers = [(str(k), str(v)) for k, v in (answer.get("headers") or {}).items()]
    headers += [("Set-Cookie", str(c)) for c in answer.get("cookies") or ()]
    raw = answer.get("body") or ""
    data = base64.b64decode(raw) if answer.get("isBase64Encoded") else str(raw).encode("utf-8")
    if not any(k.lower() == "content-type" for k, _ in headers):
        headers.append(("Content-Type", "application/json"))
    headers.append(("x-amzn-RequestId", request_id))
    return Response(int(answer["statusCode"]), headers, data)


__all__ = ["ACCOUNT", "FunctionUrls"]
