"""A small SAM template with fake handlers for the local gateway's tests (test_local_gateway,
test_local_server): routes with and without the authorizer, binary and large bodies, an SQS
worker. `fixture_template` (registered in conftest.py) writes it into the test's tmp_path."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

TEMPLATE = """\
AWSTemplateFormatVersion: "2010-09-09"
Transform: AWS::Serverless-2016-10-31
Parameters:
  Stage:
    Type: String
    Default: test
Globals:
  Function:
    Runtime: python3.11
    Timeout: 7
    Environment:
      Variables:
        WORK_QUEUE_URL: !Ref WorkQueue
        STAGE: !Ref Stage
Resources:
  WorkQueue:
    Type: AWS::SQS::Queue
    Properties:
      VisibilityTimeout: 60
  Api:
    Type: AWS::Serverless::Api
    Properties:
      StageName: !Ref Stage
      Auth:
        DefaultAuthorizer: Authz
        Authorizers:
          Authz:
            FunctionArn: !GetAtt AuthzFunction.Arn
            FunctionPayloadType: REQUEST
            Identity:
              Headers: [Authorization]
              ReauthorizeEvery: 0
      GatewayResponses:
        UNAUTHORIZED:
          StatusCode: 401
          ResponseParameters:
            Headers:
              Access-Control-Allow-Origin: "'*'"
          ResponseTemplates:
            application/json: '{"error":{"code":"unauthenticated","message":$context.error.messageString}}'
        MISSING_AUTHENTICATION_TOKEN:
          StatusCode: 404
          ResponseTemplates:
            application/json: '{"error":{"code":"not_found","message":"no such route"}}'
  AuthzFunction:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: functions/authz/
      Handler: app.handler
  EchoFunction:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: functions/echo/
      Handler: app.handler
      Timeout: 3
      Environment:
        Variables:
          ECHO_NAME: echo
      Events:
        GetThing:
          Type: Api
          Properties: {RestApiId: !Ref Api, Path: "/things/{id}", Method: GET}
        PostThing:
          Type: Api
          Properties: {RestApiId: !Ref Api, Path: /things, Method: POST}
        Health:
          Type: Api
          Properties:
            RestApiId: !Ref Api
            Path: /health
            Method: GET
            Auth:
              Authorizer: NONE
        Files:
          Type: Api
          Properties: {RestApiId: !Ref Api, Path: "/files/{proxy+}", Method: ANY}
  OtherFunction:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: functions/other/
      Handler: app.handler
      Events:
        Literal:
          Type: Api
          Properties: {RestApiId: !Ref Api, Path: /things/special, Method: GET}
        Boom:
          Type: Api
          Properties: {RestApiId: !Ref Api, Path: /boom, Method: GET}
        Big:
          Type: Api
          Properties: {RestApiId: !Ref Api, Path: /big, Method: GET}
        Slow:
          Type: Api
          Properties: {RestApiId: !Ref Api, Path: /slow, Method: GET}
  WorkerFunction:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: functions/worker/
      Handler: app.handler
      Events:
        Work:
          Type: SQS
          Properties:
            Queue: !GetAtt WorkQueue.Arn
            BatchSize: 5
            FunctionResponseTypes: [ReportBatchItemFailures]
"""


AUTHZ = """\
def handler(event, context):
    token = (event["headers"] or {}).get("Authorization", "")
    if token == "Bearer boom":
        raise ValueError("authorizer bug")
    if token == "Bearer broken":
        return {"nope": 1}
    if token not in ("Bearer good", "Bearer deny"):
        raise Exception("Unauthorized")
    LAST.append(event)
    effect = "Deny" if token == "Bearer deny" else "Allow"
    arn = event["methodArn"].split("/")[0] + "/*"
    return {
        "principalId": "api|t1|alice",
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [{"Action": "execute-api:Invoke", "Effect": effect, "Resource": arn}],
        },
        "context": {"issuer": "api", "tenant": "t1", "subject": "alice", "n": 5, "ok": True},
    }

LAST = []
"""


ECHO = """\
import json, os

def handler(event, context):
    return {
        "statusCode": 200,
        "headers": {"X-Echo": "1"},
        "multiValueHeaders": {"Set-Cookie": ["a=1", "b=2"]},
        "body": json.dumps({"event": event, "fn": context.function_name, "name": os.environ.get("ECHO_NAME"),
                            "remaining": context.get_remaining_time_in_millis()}),
    }
"""


OTHER = """\
import base64
import threading

CALLS = []
RELEASE = threading.Event()

def handler(event, context):
    if event["resource"] == "/slow":  # answers once the test releases it
        RELEASE.wait(30)
        return {"statusCode": 200, "body": "late"}
    if event["resource"] == "/boom":
        raise RuntimeError("boom")
    if event["resource"] == "/big":
        CALLS.append(len(event["body"] or ""))
        quote = (event["queryStringParameters"] or {}).get("quote") == "1"
        n = int(event["queryStringParameters"]["n"])
        return {"statusCode": 200, "body": ('"' if quote else "x") * n}
    return {"statusCode": 201, "headers": {"Content-Type": "application/octet-stream"},
            "body": base64.b64encode(b"\\x00other").decode(), "isBase64Encoded": True}
"""


WORKER = """\
import json

import boto3

SEEN = []

def handler(event, context):
    failures = []
    for r in event["Records"]:
        body = json.loads(r["body"])
        SEEN.append(body["n"])
        if body.get("fail"):
            failures.append({"itemIdentifier": r["messageId"]})
        if "retry_in" in body:  # the function sets its own backoff, as the run-step worker does
            sqs = boto3.client("sqs", region_name="us-east-1")
            url = sqs.get_queue_url(QueueName=r["eventSourceARN"].rsplit(":", 1)[1])["QueueUrl"]
            sqs.change_message_visibility(
                QueueUrl=url, ReceiptHandle=r["receiptHandle"], VisibilityTimeout=body["retry_in"]
            )
        if body.get("raise"):
            raise RuntimeError("whole batch")
    return {"batchItemFailures": failures}
"""


@pytest.fixture
def fixture_template(tmp_path: Path) -> Path:
    (tmp_path / "template.yaml").write_text(TEMPLATE)
    for name, code in (("authz", AUTHZ), ("echo", ECHO), ("other", OTHER), ("worker", WORKER)):
        d = tmp_path / "functions" / name
        d.mkdir(parents=True)
        (d / "app.py").write_text(textwrap.dedent(code))
    return tmp_path / "template.yaml"
