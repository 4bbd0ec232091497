"""template.yaml's gateway responses: every answer of API Gateway itself is the contract's
ErrorBody, and the local gateway serves each for the failure that causes it (an 11 MB body,
a 7 MB one that Lambda refuses to be invoked with, an unknown path or method with a valid
token)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from threads_aws_dev.local.gateway import (
    DEFAULT_RESPONSES,
    MAX_INVOKE_REQUEST,
    MAX_REQUEST,
    Gateway,
    GatewayError,
    Request,
    _vtl,
)
from threads_aws_dev.local.runtime import Handlers
from threads_aws_dev.local.sam import parse_template

REPO = Path(__file__).resolve().parents[1]
CONTRACT = json.loads((REPO / "schemas" / "openapi.json").read_text())
STATUS = {"invalid_request": 400, "unauthenticated": 401, "forbidden": 403, "not_found": 404}


def error_body_validator() -> Any:
    jsonschema = pytest.importorskip("jsonschema")
    schema = {"$ref": "#/components/schemas/ErrorBody", "components": CONTRACT["components"]}
    return jsonschema.Draft202012Validator(schema)


@pytest.fixture(scope="module")
def gw() -> Gateway:
    tpl = parse_template(REPO / "template.yaml")
    return Gateway(tpl, Handlers(tpl.functions))


def test_every_declared_response_is_an_error_body(gw: Gateway) -> None:
    validator = error_body_validator()
    (api,) = gw.template.apis.values()
    assert {"DEFAULT_4XX", "DEFAULT_5XX", "REQUEST_TOO_LARGE", "THROTTLED"} <= set(api.gateway_responses)
    for kind, declared in api.gateway_responses.items():
        template = declared.templates["application/json"]
        body = json.loads(_vtl(template, GatewayError(kind, "a message"), "r-1"))
        validator.validate(body)
        assert declared.headers.get("Content-Type") == "application/json", kind
        status = declared.status or DEFAULT_RESPONSES.get(kind, (500, ""))[0]
        code = body["error"]["code"]
        if code in STATUS:  # the contract's statuses for its own codes
            assert STATUS[code] == status, kind
        else:
            assert status in (413, 429, 500, 502, 504) or kind == "DEFAULT_5XX", kind


def _call(gw: Gateway, method: str, path: str, body: bytes = b"", token: str | None = "t") -> Any:
    headers = [("Content-Type", "application/json")]
    if token:
        headers.append(("Authorization", f"Bearer {token}"))
    resp = gw.handle(Request(method, path, "", headers, body))
    return resp.status, json.loads(resp.body), resp


def test_a_body_over_10_mb_is_413_too_large(gw: Gateway) -> None:
    status, body, resp = _call(gw, "POST", "/v1/runs", b"x" * (MAX_REQUEST + 1))
    assert (status, body["error"]["code"]) == (413, "too_large")
    assert resp.header("x-amzn-ErrorType") == "RequestTooLargeException"


def test_a_body_over_lambdas_invoke_limit_never_reaches_the_function(gw: Gateway) -> None:
    # No handler is loaded for this: the gateway refuses before it would invoke StartRunFunction.
    status, body, _ = _call(gw, "POST", "/v1/runs", b'{"input":"' + b"x" * MAX_INVOKE_REQUEST + b'"}')
    assert status == 500 and body["error"]["code"] == "unavailable", body
    assert "StartRunFunction" not in gw.handlers._cache
    error_body_validator().validate(body)


@pytest.mark.parametrize(("method", "path"), [("GET", "/v1/nowhere"), ("GET", "/"), ("POST", "/v2/runs")])
@pytest.mark.parametrize("token", ["dev:api:acme:alice", None])
def test_no_route_is_404_not_found_whatever_the_token(
    gw: Gateway, method: str, path: str, token: str | None
) -> None:
    status, body, _ = _call(gw, method, path, token=token)
    assert (status, body["error"]["code"]) == (404, "not_found"), body


@pytest.mark.parametrize(("method", "path"), [("DELETE", "/v1/runs"), ("PUT", "/v1/threads/x/timeline")])
def test_an_undeclared_method_on_a_v1_path_is_behind_the_authorizer(
    gw: Gateway, method: str, path: str
) -> None:
    # Every /v1 path has an ANY route (its 405, test_host_handlers): without a token the
    # gateway's authorizer answers first, in the contract's ErrorBody.
    status, body, _ = _call(gw, method, path, token=None)
    assert (status, body["error"]["code"]) == (401, "unauthenticated"), body
