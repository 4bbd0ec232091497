# ruff: noqa: E501  (the fixture template's URIs)
"""The local gateway's response streaming (local/lwa.py): a DefinitionBody route with
`responseTransferMode: STREAM` into a Lambda Web Adapter function, on a small fixture template
with a tiny ASGI app, over real HTTP — chunks reach the client as the app sends them, the
authorizer runs first and its context reaches the app in `x-amzn-request-context`, the deadline
in `x-amzn-lambda-context`, failures are the gateway's, the function's Timeout cuts it off, and
the template's conditions pick the integration."""

from __future__ import annotations

import http.client
import json
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from threads_aws_dev.local.gateway import Gateway, make_server, serve_in_thread
from threads_aws_dev.local.runtime import Handlers
from threads_aws_dev.local.sam import parse_template

TEMPLATE = """\
AWSTemplateFormatVersion: "2010-09-09"
Transform: AWS::Serverless-2016-10-31
Parameters:
  Mode:
    Type: String
    Default: stream
Conditions:
  Streams: !Equals [!Ref Mode, stream]
Globals:
  Function:
    Runtime: python3.13
    Timeout: 5
Resources:
  Api:
    Type: AWS::Serverless::Api
    Properties:
      StageName: test
      MergeDefinitions: true
      DefinitionBody:
        openapi: "3.0.1"
        info: {title: t, version: "1.0"}
        paths:
          /live/{id}:
            get:
              x-amazon-apigateway-integration: !If
                - Streams
                - type: aws_proxy
                  httpMethod: POST
                  uri: !Sub "arn:aws:apigateway:${AWS::Region}:lambda:path/2021-11-15/functions/${LiveFunction.Arn}/response-streaming-invocations"
                  responseTransferMode: STREAM
                - type: aws_proxy
                  httpMethod: POST
                  uri: !Sub "arn:aws:apigateway:${AWS::Region}:lambda:path/2015-03-31/functions/${PlainFunction.Arn}/invocations"
          /open:
            get:
              security: [{NONE: []}]
              x-amazon-apigateway-integration:
                type: aws_proxy
                httpMethod: POST
                uri: !Sub "arn:aws:apigateway:${AWS::Region}:lambda:path/2021-11-15/functions/${LiveFunction.Arn}/response-streaming-invocations"
                responseTransferMode: STREAM
      Auth:
        DefaultAuthorizer: Authz
        Authorizers:
          Authz:
            FunctionArn: !GetAtt AuthzFunction.Arn
            FunctionPayloadType: REQUEST
            Identity:
              Headers: [Authorization]
      GatewayResponses:
        DEFAULT_5XX:
          ResponseTemplates:
            application/json: '{"error":{"code":"unavailable","message":"failed"}}'
  AuthzFunction:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: functions/authz/
      Handler: app.handler
  LiveFunction:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: functions/live/
      Handler: run.sh
      Timeout: 1
      Environment:
        Variables:
          AWS_LAMBDA_EXEC_WRAPPER: /opt/bootstrap
          AWS_LWA_INVOKE_MODE: response_stream
  PlainFunction:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: functions/plain/
      Handler: app.handler
"""

AUTHZ = """\
def handler(event, context):
    if (event["headers"] or {}).get("Authorization") != "Bearer good":
        raise Exception("Unauthorized")
    arn = event["methodArn"].split("/")[0] + "/*"
    return {
        "principalId": "alice",
        "policyDocument": {"Version": "2012-10-17",
                           "Statement": [{"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": arn}]},
        "context": {"tenant": "t1", "n": 5},
    }
"""

RUN_SH = """\
#!/bin/bash
exec python3 -m uvicorn --port "${AWS_LWA_PORT:-8080}" \\
  live_app:app
"""

APP = """\
import asyncio, json

async def app(scope, receive, send):
    assert scope["type"] == "http"
    headers = {k.decode(): v.decode() for k, v in scope["headers"]}
    if scope["path"] == "/live/fail":
        raise RuntimeError("app bug")
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"Content-Type", b"text/event-stream")]})
    seen = {
        "path": scope["path"], "query": scope["query_string"].decode(),
        "context": json.loads(headers["x-amzn-request-context"]),
        "lambda": json.loads(headers["x-amzn-lambda-context"]),
        "spoof": headers.get("x-spoof"),
    }
    await send({"type": "http.response.body", "body": b"data: " + json.dumps(seen).encode() + b"\\n\\n",
                "more_body": True})
    for i in range(3 if scope["path"] != "/live/slow" else 100):
        await asyncio.sleep(0.15)
        await send({"type": "http.response.body", "body": b"data: %d\\n\\n" % i, "more_body": True})
    await send({"type": "http.response.body", "body": b""})
"""

PLAIN = """\
def handler(event, context):
    return {"statusCode": 200, "headers": {"Content-Type": "text/plain"}, "body": "buffered"}
"""


@pytest.fixture
def site(tmp_path: Path) -> Path:
    (tmp_path / "template.yaml").write_text(TEMPLATE)
    for name, files in {
        "authz": {"app.py": AUTHZ},
        "live": {"run.sh": RUN_SH, "live_app.py": APP},
        "plain": {"app.py": PLAIN},
    }.items():
        d = tmp_path / "functions" / name
        d.mkdir(parents=True)
        for f, text in files.items():
            (d / f).write_text(textwrap.dedent(text))
    return tmp_path


def serve(site: Path, **params: str) -> Any:
    tpl = parse_template(site / "template.yaml", params)
    server = make_server(Gateway(tpl, Handlers(tpl.functions)))
    serve_in_thread(server)
    return server


def get(server: Any, path: str, headers: dict[str, str] | None = None) -> tuple[Any, list[tuple[float, bytes]]]:
    conn = http.client.HTTPConnection(*server.server_address, timeout=10)
    started = time.monotonic()
    conn.request("GET", path, headers={"Authorization": "Bearer good", **(headers or {})})
    resp = conn.getresponse()
    chunks = []
    while line := resp.readline():
        chunks.append((time.monotonic() - started, line))
    conn.close()
    return resp, chunks


def test_routes_from_the_definition_body(site):
    tpl = parse_template(site / "template.yaml")
    routes = {(r.path, r.method): r for r in tpl.routes}
    live = routes[("/live/{id}", "GET")]
    assert (live.function, live.stream, live.authorizer) == ("LiveFunction", True, "Authz")
    assert routes[("/open", "GET")].authorizer is None  # security: NONE
    assert tpl.functions["LiveFunction"].asgi == "live_app:app"  # from run.sh's uvicorn line
    window = {r.path: r for r in parse_template(site / "template.yaml", {"Mode": "window"}).routes}
    assert (window["/live/{id}"].function, window["/live/{id}"].stream) == ("PlainFunction", False)


def test_chunks_stream_as_sent_with_the_authorizer_context(site):
    server = serve(site)
    try:
        resp, chunks = get(server, "/live/x?a=1&a=2", {"X-Spoof": "s", "x-amzn-request-context": "{}"})
        assert resp.status == 200 and resp.getheader("Content-Type") == "text/event-stream"
        assert resp.getheader("x-amzn-RequestId")
        data = [c for c in chunks if c[1].startswith(b"data: ")]
        assert len(data) == 4
        assert data[-1][0] - data[0][0] > 0.3  # each chunk arrived as the app sent it
        seen = json.loads(data[0][1][6:])
        assert seen["path"] == "/live/x" and seen["query"] == "a=1&a=2" and seen["spoof"] == "s"
        ctx = seen["context"]  # the gateway's, not the client's
        assert ctx["authorizer"]["tenant"] == "t1" and ctx["authorizer"]["n"] == "5"
        assert ctx["authorizer"]["principalId"] == "alice" and ctx["stage"] == "test"
        now = time.time() * 1000
        assert now < seen["lambda"]["deadline"] <= now + 1_000 + 500
    finally:
        server.shutdown()
        server.server_close()


def test_the_gateway_s_answers_around_the_app(site):
    server = serve(site)
    try:
        conn = http.client.HTTPConnection(*server.server_address, timeout=10)
        conn.request("GET", "/live/x")  # no token: the authorizer never lets it reach the app
        resp = conn.getresponse()
        assert resp.status == 401 and b"Unauthorized" in resp.read()
        resp, chunks = get(server, "/live/fail")
        assert resp.status == 502 and b"unavailable" in b"".join(c for _, c in chunks)
        started = time.monotonic()
        resp, chunks = get(server, "/live/slow")  # Timeout 1: Lambda ends the invocation
        assert resp.status == 200 and 0.9 < time.monotonic() - started < 3
        assert sum(c.startswith(b"data: ") for _, c in chunks) < 10
    finally:
        server.shutdown()
        server.server_close()


def test_the_condition_switches_to_the_buffered_function(site):
    server = serve(site, Mode="window")
    try:
        resp, chunks = get(server, "/live/x")
        assert resp.status == 200 and b"".join(c for _, c in chunks) == b"buffered"
    finally:
        server.shutdown()
        server.server_close()
