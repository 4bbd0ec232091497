"""The run stream's deployed shape, as CloudFormation receives it (template.yaml through the SAM
translator): the STREAM integration into the one Lambda Web Adapter function, the window
fallback behind the same authorizer, and the function's package."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest
from helpers.template import of_type, translate

REPO = Path(__file__).resolve().parents[1]
EVENTS = "/v1/threads/{thread_id}/runs/{run_id}/events"
ADAPTER = "753240598075:layer:LambdaAdapterLayer"


@pytest.fixture(scope="module")
def resources() -> dict[str, Any]:
    return translate()


def _body(resources: dict[str, Any]) -> dict[str, Any]:
    (api,) = of_type(resources, "AWS::ApiGateway::RestApi").values()
    return dict(api["Properties"]["Body"])


def test_the_run_stream_integration_streams_and_the_fallback_is_the_window_function(resources):
    op = _body(resources)["paths"][EVENTS]["get"]
    assert op["security"] == [{"BearerAuthorizer": []}]  # the same REQUEST authorizer
    cond, stream, window = op["x-amazon-apigateway-integration"]["Fn::If"]
    assert cond == "StreamRuns"
    assert stream["type"] == "aws_proxy" and stream["httpMethod"] == "POST"
    assert stream["responseTransferMode"] == "STREAM" and stream["timeoutInMillis"] == 900_000
    assert stream["uri"]["Fn::Sub"].endswith(
        ":lambda:path/2021-11-15/functions/${RunStreamFunction.Arn}/response-streaming-invocations"
    )
    assert "responseTransferMode" not in window and "timeoutInMillis" not in window
    assert window["uri"]["Fn::Sub"].endswith("/2015-03-31/functions/${SubscribeRunFunction.Arn}/invocations")
    for fn in ("RunStreamFunction", "SubscribeRunFunction"):
        (perm,) = [
            p
            for p in of_type(resources, "AWS::Lambda::Permission").values()
            if p["Properties"]["FunctionName"] == {"Ref": fn}
        ]
        assert perm["Properties"]["Principal"] == "apigateway.amazonaws.com"
        source = perm["Properties"]["SourceArn"]["Fn::Sub"]
        assert source.endswith("${HostApi}/*/GET/v1/threads/*/runs/*/events")
    # every other route is still a function event of its own (buffered)
    others = [p for p in _body(resources)["paths"] if p != EVENTS]
    assert len(others) >= 12
    for p in others:
        for method in _body(resources)["paths"][p].values():
            integration = method["x-amazon-apigateway-integration"]
            assert "responseTransferMode" not in integration
            assert "/2015-03-31/functions/" in integration["uri"]["Fn::Sub"]


def test_the_stream_function_is_the_only_one_on_the_adapter_layer(resources):
    on_adapter = []
    for lid, fn in of_type(resources, "AWS::Lambda::Function").items():
        p = fn["Properties"]
        env = p.get("Environment", {}).get("Variables", {})
        if ADAPTER in str(p.get("Layers")) or env.get("AWS_LAMBDA_EXEC_WRAPPER"):
            on_adapter.append(lid)
        else:
            assert p["Handler"] == "app.handler", lid  # plain zip functions
    assert on_adapter == ["RunStreamFunction"]
    p = resources["RunStreamFunction"]["Properties"]
    layers = str(p["Layers"])
    assert "LambdaAdapterLayerArm64:26" in layers and "WebAdapterLayerArn" in layers
    env = p["Environment"]["Variables"]
    assert env["AWS_LAMBDA_EXEC_WRAPPER"] == "/opt/bootstrap"
    assert env["AWS_LWA_INVOKE_MODE"] == "response_stream"
    assert p["Handler"] == "run.sh" and p["Timeout"] == 900 and p["Architectures"] == ["arm64"]
    from threads_aws.host.live import LiveSettings

    heartbeat = int(env.get("STREAM_HEARTBEAT_MS", LiveSettings().heartbeat_ms))
    assert heartbeat <= 60_000  # well inside API Gateway's 5-minute idle timeout


def test_the_stream_function_package():
    fn = REPO / "functions" / "stream_run"
    script = fn / "run.sh"
    assert stat.S_IMODE(os.stat(script).st_mode) & 0o111 == 0o111
    text = script.read_bytes()
    assert b"\r" not in text and text.startswith(b"#!/bin/bash\n")
    from threads_aws_dev.local.lwa import asgi_target

    assert asgi_target(fn, "run.sh", {"AWS_LAMBDA_EXEC_WRAPPER": "/opt/bootstrap"}) == "main:app"
    reqs = (fn / "requirements.txt").read_text()
    pins = [line.split()[0] for line in reqs.splitlines() if "==" in line]
    assert {p.split("==")[0] for p in pins} == {"uvicorn", "h11", "click"}
    assert reqs.count("--hash=sha256:") >= 2 * len(pins)
    assert not (fn / "app.py").exists()  # not a Python-runtime handler
