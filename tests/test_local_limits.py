"""Limits `threads-aws dev` answers as AWS does (not botocore calls, so not the hook's): API
Gateway's integration timeout on a non-streaming route (504), and Lambda's Invoke API refusing a
request over 6 MB (413) and replacing a response over 6 MB with Function.ResponseSizeTooLarge."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import boto3
import pytest
from threads_aws_dev.local.gateway import INTEGRATION_TIMEOUT_S, Gateway, Request
from threads_aws_dev.local.lambda_invoke import MAX_REQUEST, MAX_RESPONSE, LocalLambda
from threads_aws_dev.local.runtime import Handlers
from threads_aws_dev.local.sam import parse_template


def test_integration_timeout_is_api_gateways(fixture_template: Path) -> None:
    assert INTEGRATION_TIMEOUT_S == 29.0
    tpl = parse_template(fixture_template)
    handlers = Handlers(tpl.functions)
    gw = Gateway(tpl, handlers, integration_timeout_s=0.3)  # 29 s, scaled down for the test
    release = handlers.handler("OtherFunction").__globals__["RELEASE"]
    try:
        resp = gw.handle(Request("GET", "/slow", "", [("Authorization", "Bearer good")], b""))
        assert resp.status == 504
        assert json.loads(resp.body) == {"message": "Endpoint request timed out"}
        assert dict(resp.headers)["x-amzn-ErrorType"] == "InternalServerErrorException"
        release.set()  # a handler that answers in time is answered as before
        resp = gw.handle(Request("GET", "/slow", "", [("Authorization", "Bearer good")], b""))
        assert (resp.status, resp.body) == (200, b"late")
    finally:
        release.set()


@pytest.fixture
def lam(fixture_template: Path) -> Any:
    tpl = parse_template(fixture_template)
    api = LocalLambda(Handlers(tpl.functions)).start()
    yield api
    api.stop()


def big(n: int) -> bytes:
    return json.dumps({"resource": "/big", "body": "", "queryStringParameters": {"n": str(n)}}).encode()


def test_lambda_response_over_6_mb_is_a_function_error(lam: LocalLambda) -> None:
    client = boto3.client(
        "lambda",
        endpoint_url=lam.url,
        region_name="us-east-1",
        aws_access_key_id="t",
        aws_secret_access_key="t",
    )
    ok = client.invoke(FunctionName="OtherFunction", Payload=big(MAX_RESPONSE - 100))
    assert "FunctionError" not in ok and len(json.loads(ok["Payload"].read())["body"]) == MAX_RESPONSE - 100
    over = client.invoke(FunctionName="OtherFunction", Payload=big(MAX_RESPONSE))
    assert over["FunctionError"] == "Unhandled"
    assert json.loads(over["Payload"].read())["errorType"] == "Function.ResponseSizeTooLarge"


def test_lambda_request_over_6_mb_is_refused(lam: LocalLambda) -> None:
    # raw HTTP: boto3 here would be stopped by the limits hook before sending it
    url = f"{lam.url}/2015-03-31/functions/OtherFunction/invocations"
    calls = lam.invocations
    body = big(1)[:-1] + b', "pad": "' + b"x" * MAX_REQUEST + b'"}'
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(urllib.request.Request(url, data=body, method="POST"), timeout=60)
    assert exc.value.code == 413
    assert exc.value.headers["x-amzn-ErrorType"] == "RequestEntityTooLargeException"
    assert lam.invocations == calls  # the function never ran
