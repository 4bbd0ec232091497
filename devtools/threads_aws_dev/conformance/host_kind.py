"""The `host` kind: POST /v1/runs requests through the real start_run Lambda handler.

Each request is an API Gateway REST proxy event whose authorizer context is the case's
principal (the test authenticator: the real authorizer maps tokens to exactly this context), so
the handler, body validation, receipts and the store transaction are the deployed ones. After
the requests, the host is stopped and the logs of every thread a receipt names are read back."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

from threads_aws.core.importer import import_log

from .env import CaseEnv
from .runner import Mismatch, _expect

FUNCTIONS = Path(__file__).resolve().parents[3] / "functions"


class _Context:
    function_name = "start_run"
    function_version = "$LATEST"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:000000000000:function:start_run"
    aws_request_id = "conformance"
    log_group_name = "/aws/lambda/start_run"
    log_stream_name = "conformance"

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 29_000


def _handler(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"_conformance_fn_{name}", FUNCTIONS / name / "app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.handler


def _event(request: dict[str, Any]) -> dict[str, Any]:
    p = request["principal"]
    headers = {"Content-Type": "application/json", "Idempotency-Key": request["idempotency_key"]}
    return {
        "resource": "/v1/runs",
        "path": "/v1/runs",
        "httpMethod": "POST",
        "headers": headers,
        "multiValueHeaders": {k: [v] for k, v in headers.items()},
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "pathParameters": None,
        "requestContext": {
            "resourcePath": "/v1/runs",
            "httpMethod": "POST",
            "stage": "conformance",
            "requestId": "conformance",
            "authorizer": {**p, "principalId": f"{p['issuer']}/{p['tenant']}/{p['subject']}"},
        },
        "body": json.dumps(request["body"]),
        "isBase64Encoded": False,
    }


def run_host(env: CaseEnv, case_dir: Path, case: dict[str, Any], expected: dict[str, Any]) -> None:
    from threads_aws.host import runtime

    saved = {k: os.environ.get(k) for k in env.resources.env()}
    os.environ.update(env.resources.env())
    runtime.reset()
    try:
        handler = _handler("start_run")
        answers: list[dict[str, Any]] = []
        receipts: list[dict[str, Any] | None] = []
        for request in case["input"]["requests"]:
            out = handler(_event(request), _Context())
            body = json.loads(out["body"]) if out.get("body") else {}
            answer: dict[str, Any] = {"status": out["statusCode"]}
            if out["statusCode"] == 202:
                receipts.append(body)
                answer["receipt"] = receipts.index(body)
            else:
                receipts.append(None)
                answer["code"] = body.get("error", {}).get("code")
                if any(
                    isinstance(v, str) and v in json.dumps(body) for r in receipts if r for v in r.values()
                ):
                    raise Mismatch("a failure body carries another request's receipt")
            answers.append(answer)
        if "api" in expected:
            _expect("api", expected["api"], answers)
        if "user_inputs" in expected:
            branches = {(r["thread_id"], r["branch_id"]) for r in receipts if r}
            count = 0
            for _thread, branch in sorted(branches):
                events = import_log(env.store.export(branch)).fold.events
                count += sum(1 for e in events if e["type"] == "user_input")
            _expect("user_inputs", expected["user_inputs"], count)
    finally:
        runtime.reset()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
