"""The local gateway (`threads-aws dev`): routing, proxy events, the authorizer and gateway
responses, SQS pollers — on a small fixture template with fake handlers — and the command itself
as a subprocess (ready line, one request, SIGTERM, exit 0)."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from threads_aws_dev.local.gateway import Gateway, Request, Router, make_server, serve_in_thread
from threads_aws_dev.local.pollers import Poller, failed_ids
from threads_aws_dev.local.runtime import Handlers, module_name
from threads_aws_dev.local.sam import ApiRoute, function_env, parse_template

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def gw(fixture_template: Path) -> Gateway:
    tpl = parse_template(fixture_template)
    return Gateway(tpl, Handlers(tpl.functions))


def call(
    gw: Gateway,
    method: str,
    path: str,
    *,
    token: str | None = "good",
    body: bytes = b"",
    query: str = "",
    headers: list[tuple[str, str]] | None = None,
) -> tuple[int, Any, Any]:
    hs = list(headers or [])
    if token is not None:
        hs.append(("Authorization", f"Bearer {token}"))
    resp = gw.handle(Request(method, path, query, hs, body))
    try:
        payload = json.loads(resp.body)
    except ValueError:
        payload = resp.body
    return resp.status, payload, resp


# ---------------------------------------------------------------- template


def test_template_model(fixture_template: Path) -> None:
    tpl = parse_template(fixture_template)
    assert set(tpl.functions) == {"AuthzFunction", "EchoFunction", "OtherFunction", "WorkerFunction"}
    assert tpl.functions["EchoFunction"].timeout_s == 3
    assert tpl.functions["AuthzFunction"].timeout_s == 7  # from Globals
    routes = {(r.method, r.path): r for r in tpl.routes}
    assert routes[("GET", "/health")].authorizer is None
    assert routes[("GET", "/things/{id}")].authorizer == "Authz"
    api = tpl.apis["Api"]
    assert api.stage == "test"
    assert api.authorizers["Authz"].function == "AuthzFunction"
    assert api.authorizers["Authz"].headers == ("Authorization",)
    assert api.gateway_responses["UNAUTHORIZED"].headers == {"Access-Control-Allow-Origin": "*"}
    (src,) = tpl.sqs
    assert (src.function, src.queue, src.batch_size, src.report_failures) == (
        "WorkerFunction",
        "WorkQueue",
        5,
        True,
    )
    env, warnings = function_env(tpl, {"WorkQueue": "http://q/123/work"}, "us-east-1")
    assert env == {"WORK_QUEUE_URL": "http://q/123/work", "STAGE": "test", "ECHO_NAME": "echo"}
    assert warnings == []


def test_router_prefers_literals_then_params_then_greedy() -> None:
    router = Router(
        [
            ApiRoute("A", "e", "", "/things/{id}", "GET", None),
            ApiRoute("B", "e", "", "/things/special", "GET", None),
            ApiRoute("C", "e", "", "/{proxy+}", "ANY", None),
            ApiRoute("D", "e", "", "/things/{id}", "ANY", None),
        ]
    )
    assert router.match("GET", "/things/special") == (router._routes[0].route, {})
    route, params = router.match("GET", "/things/x%20y")  # type: ignore[misc]
    assert (route.function, params) == ("A", {"id": "x y"})
    route, params = router.match("DELETE", "/things/1")  # type: ignore[misc]
    assert route.function == "D"
    route, params = router.match("GET", "/a/b/c")  # type: ignore[misc]
    assert (route.function, params) == ("C", {"proxy": "a/b/c"})
    assert router.match("GET", "/") is None
    # ANY takes any method token, an unknown one too (the README: 405 + Allow on a /v1 path)
    assert router.match("PATCH", "/things/1")[0].function == "D"  # type: ignore[index]
    assert router.match("BREW", "/things/1")[0].function == "D"  # type: ignore[index]
    assert router.match("TRACE", "/a")[0].function == "C"  # type: ignore[index]


def test_handler_modules_are_distinct(fixture_template: Path) -> None:
    tpl = parse_template(fixture_template)
    handlers = Handlers(tpl.functions)
    a, b = handlers.handler("EchoFunction"), handlers.handler("OtherFunction")
    assert a is not b and a.__module__ != b.__module__
    assert a.__module__ == module_name(tpl.functions["EchoFunction"])
    assert handlers.handler("EchoFunction") is a  # loaded once


# ---------------------------------------------------------------- proxy events


def test_proxy_event_and_response(gw: Gateway) -> None:
    status, out, resp = call(
        gw, "GET", "/things/t-1", query="a=1&a=2&b=", headers=[("X-Multi", "1"), ("X-Multi", "2")]
    )
    assert status == 200
    ev = out["event"]
    assert ev["resource"] == "/things/{id}" and ev["path"] == "/things/t-1" and ev["httpMethod"] == "GET"
    assert ev["pathParameters"] == {"id": "t-1"}
    assert ev["queryStringParameters"] == {"a": "2", "b": ""}
    assert ev["multiValueQueryStringParameters"] == {"a": ["1", "2"], "b": [""]}
    assert ev["headers"]["X-Multi"] == "2" and ev["multiValueHeaders"]["X-Multi"] == ["1", "2"]
    assert ev["body"] is None and ev["isBase64Encoded"] is False
    rc = ev["requestContext"]
    assert rc["resourcePath"] == "/things/{id}" and rc["httpMethod"] == "GET" and rc["stage"] == "test"
    assert rc["requestId"] and rc["identity"]["sourceIp"] == "127.0.0.1"
    # The authorizer's context, as REST APIs pass it: strings, plus principalId.
    assert {k: rc["authorizer"][k] for k in ("issuer", "tenant", "subject", "n", "ok", "principalId")} == {
        "issuer": "api",
        "tenant": "t1",
        "subject": "alice",
        "n": "5",
        "ok": "true",
        "principalId": "api|t1|alice",
    }
    assert out["fn"] == "EchoFunction"
    assert 0 < out["remaining"] <= 3000  # EchoFunction's Timeout
    assert resp.header("X-Echo") == "1" and resp.header("Content-Type") == "application/json"
    assert [v for k, v in resp.headers if k == "Set-Cookie"] == ["a=1", "b=2"]
    assert resp.header("x-amzn-RequestId") == rc["requestId"]


def test_body_text_and_binary(gw: Gateway) -> None:
    _, out, _ = call(gw, "POST", "/things", body=b'{"x": 1}', headers=[("Content-Type", "application/json")])
    assert out["event"]["body"] == '{"x": 1}' and out["event"]["isBase64Encoded"] is False
    assert out["event"]["pathParameters"] is None and out["event"]["queryStringParameters"] is None
    _, out, _ = call(gw, "POST", "/things", body=b"\xff\xfe")
    assert out["event"]["isBase64Encoded"] is True and out["event"]["body"] == "//4="
    status, body, resp = call(gw, "GET", "/things/special")
    assert (status, body, resp.header("Content-Type")) == (201, b"\x00other", "application/octet-stream")


def test_authorizer_event(gw: Gateway) -> None:
    call(gw, "GET", "/files/a/b.txt", query="q=1")
    authz = sys.modules[module_name(gw.template.functions["AuthzFunction"])]
    ev = authz.LAST[-1]  # type: ignore[attr-defined]
    assert ev["type"] == "REQUEST"
    assert ev["methodArn"].startswith("arn:aws:execute-api:us-east-1:123456789012:")
    assert ev["methodArn"].endswith("/test/GET/files/a/b.txt")
    assert ev["resource"] == "/files/{proxy+}" and ev["pathParameters"] == {"proxy": "a/b.txt"}
    assert ev["queryStringParameters"] == {"q": "1"} and ev["headers"]["Authorization"] == "Bearer good"
    assert "authorizer" not in ev["requestContext"]


# ---------------------------------------------------------------- gateway responses


@pytest.mark.parametrize(
    ("token", "status", "code"),
    [
        (None, 401, "unauthenticated"),  # identity source missing: authorizer not called
        ("nope", 401, "unauthenticated"),  # raise Exception("Unauthorized")
        ("deny", 403, None),  # a Deny policy is 403 on API Gateway too
        ("boom", 500, None),  # AUTHORIZER_FAILURE
        ("broken", 500, None),  # AUTHORIZER_CONFIGURATION_ERROR
    ],
)
def test_authorizer_outcomes(gw: Gateway, token: str | None, status: int, code: str | None) -> None:
    got, body, resp = call(gw, "GET", "/things/1", token=token)
    assert got == status
    if code is not None:
        assert body == {"error": {"code": code, "message": "Unauthorized"}}
        assert resp.header("Access-Control-Allow-Origin") == "*"


def test_open_route_skips_the_authorizer(gw: Gateway) -> None:
    status, out, _ = call(gw, "GET", "/health", token=None)
    assert status == 200 and out["event"]["requestContext"]["authorizer"] is None


def test_unknown_route_and_method(gw: Gateway) -> None:
    for method, path in (("GET", "/nowhere"), ("DELETE", "/things")):
        status, body, resp = call(gw, method, path)
        assert (status, body) == (404, {"error": {"code": "not_found", "message": "no such route"}})
        assert resp.header("x-amzn-ErrorType") == "MissingAuthenticationTokenException"


def test_unknown_route_without_a_declared_response(fixture_template: Path) -> None:
    fixture_template.write_text(
        fixture_template.read_text().replace("MISSING_AUTHENTICATION_TOKEN:", "X_UNUSED:")
    )
    tpl = parse_template(fixture_template)
    status, body, _ = call(Gateway(tpl, Handlers(tpl.functions)), "GET", "/nowhere")
    assert (status, body) == (403, {"message": "Missing Authentication Token"})  # API Gateway's default


def test_handler_error_is_502(gw: Gateway) -> None:
    status, body, _ = call(gw, "GET", "/boom")
    assert (status, body) == (502, {"message": "Internal server error"})


def test_over_http(gw: Gateway) -> None:
    server = make_server(gw, "127.0.0.1", 0)
    serve_in_thread(server)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        req = urllib.request.Request(
            f"{url}/things",
            data=b'{"a":1}',
            method="POST",
            headers={"Authorization": "Bearer good", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10) as r:
            assert r.status == 200 and json.loads(r.read())["event"]["body"] == '{"a":1}'
        with pytest.raises(urllib.error.HTTPError) as exc:
            urllib.request.urlopen(f"{url}/things/1", timeout=10)
        assert exc.value.code == 401
        assert json.loads(exc.value.read())["error"]["code"] == "unauthenticated"
    finally:
        server.shutdown()
        server.server_close()


# ---------------------------------------------------------------- pollers


def test_failed_ids_follow_lambda() -> None:
    tpl_src = parse_template.__globals__["SqsSource"]("F", "e", "Q", 10, True)
    ids = ["a", "b"]
    assert failed_ids(tpl_src, ids, None, RuntimeError()) == {"a", "b"}
    assert failed_ids(tpl_src, ids, {"batchItemFailures": []}, None) == set()
    assert failed_ids(tpl_src, ids, {"batchItemFailures": [{"itemIdentifier": "b"}]}, None) == {"b"}
    assert failed_ids(tpl_src, ids, {"batchItemFailures": [{"itemIdentifier": "zzz"}]}, None) == {"a", "b"}
    assert failed_ids(tpl_src, ids, None, None) == set()
    no_report = parse_template.__globals__["SqsSource"]("F", "e", "Q", 10, False)
    assert failed_ids(no_report, ids, {"batchItemFailures": [{"itemIdentifier": "b"}]}, None) == set()


def _poller(aws: Any, fixture_template: Path, **kw: Any) -> tuple[Poller, Any]:
    tpl = parse_template(fixture_template)
    url = aws.sqs.create_queue(QueueName=f"{aws.prefix}-work")["QueueUrl"]
    (src,) = tpl.sqs
    handlers = Handlers(tpl.functions)
    worker = sys.modules.get(module_name(tpl.functions["WorkerFunction"]))
    if worker is not None:
        worker.SEEN.clear()  # type: ignore[attr-defined]
    return Poller(src, url, aws.sqs, handlers, retry_delay_s=0, **kw), handlers


def _depth(aws: Any, url: str) -> int:
    attrs = aws.sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"])


def test_poller_partial_failures_are_redelivered(aws: Any, fixture_template: Path) -> None:
    poller, handlers = _poller(aws, fixture_template)
    for n in range(3):
        aws.sqs.send_message(QueueUrl=poller.queue_url, MessageBody=json.dumps({"n": n, "fail": n == 1}))
    batches: list[tuple[list[str], set[str]]] = []
    poller.on_batch = lambda src, ids, failed: batches.append((ids, failed))
    assert poller.poll_once()
    worker = handlers.handler("WorkerFunction").__globals__
    assert sorted(worker["SEEN"]) == [0, 1, 2]
    assert len(batches[0][1]) == 1
    assert _depth(aws, poller.queue_url) == 1  # only the failed record is left, visible again
    assert poller.poll_once()
    assert worker["SEEN"][-1] == 1
    assert not poller.poll_once() or _depth(aws, poller.queue_url) == 1


def test_poller_leaves_failed_records_to_the_queue_as_lambda_does(aws: Any, fixture_template: Path) -> None:
    poller, handlers = _poller(aws, fixture_template)
    poller.retry_delay_s = None  # as in `threads-aws dev`: the deployment's timing
    aws.sqs.set_queue_attributes(QueueUrl=poller.queue_url, Attributes={"VisibilityTimeout": "30"})
    aws.sqs.send_message(QueueUrl=poller.queue_url, MessageBody=json.dumps({"n": 1, "fail": True}))
    aws.sqs.send_message(
        QueueUrl=poller.queue_url, MessageBody=json.dumps({"n": 2, "fail": True, "retry_in": 1})
    )
    assert poller.poll_once()
    worker = handlers.handler("WorkerFunction").__globals__
    assert sorted(worker["SEEN"]) == [1, 2]
    time.sleep(1.5)
    assert poller.poll_once()  # only the record whose function asked for 1 s is back
    assert worker["SEEN"][2:] == [2]
    assert _depth(aws, poller.queue_url) == 2  # the other waits out the queue's 30 s


def test_poller_raise_fails_whole_batch(aws: Any, fixture_template: Path) -> None:
    poller, handlers = _poller(aws, fixture_template)
    aws.sqs.send_message(QueueUrl=poller.queue_url, MessageBody=json.dumps({"n": 1}))
    aws.sqs.send_message(QueueUrl=poller.queue_url, MessageBody=json.dumps({"n": 2, "raise": True}))
    poller.poll_once()
    assert _depth(aws, poller.queue_url) == 2


def test_poller_threads_drain_and_stop(aws: Any, fixture_template: Path) -> None:
    poller, handlers = _poller(aws, fixture_template, concurrency=2, idle_wait_s=0.01)
    for n in range(12):
        aws.sqs.send_message(QueueUrl=poller.queue_url, MessageBody=json.dumps({"n": n}))
    poller.start()
    try:
        deadline = time.monotonic() + 10
        worker = handlers.handler("WorkerFunction").__globals__
        # Seen is set inside the handler; the poller deletes each message after it returns.
        while (len(worker["SEEN"]) < 12 or _depth(aws, poller.queue_url)) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert sorted(worker["SEEN"]) == list(range(12))
    finally:
        poller.stop(timeout=5)
    assert all(not t.is_alive() for t in poller._threads)
    assert _depth(aws, poller.queue_url) == 0


# ---------------------------------------------------------------- the command


def _lines(proc: subprocess.Popen[str]) -> queue.Queue[str]:
    """stdout lines of `proc` through a thread, so reads can time out (select() can't see what
    the text wrapper already buffered)."""
    q: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            q.put(line)

    threading.Thread(target=pump, daemon=True).start()
    return q


def test_dev_command_serves_and_stops_on_sigterm() -> None:
    exe = Path(sys.executable).with_name("threads-aws")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "threads_aws_dev"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    proc = subprocess.Popen(
        [*cmd, "dev", "--port", "0", "--dev-tokens", "--ephemeral"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )
    try:
        lines = _lines(proc)
        first = lines.get(timeout=60).strip()
        assert first.startswith("ready http://127.0.0.1:"), first
        url = first.split(" ", 1)[1]
        token_line = lines.get(timeout=10)
        assert token_line.startswith("token dev:api:local:alice")
        curl = lines.get(timeout=10)
        assert curl.startswith("try: curl") and '"agent":"demo"' in curl
        # One request through the gateway: a /v1 route without a token is refused by the gateway.
        with pytest.raises(urllib.error.HTTPError) as exc:
            urllib.request.urlopen(
                f"{url}/v1/threads/00000000-0000-7000-8000-000000000000/timeline", timeout=10
            )
        assert exc.value.code == 401
        assert json.loads(exc.value.read())["error"]["code"] == "unauthenticated"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stderr:
            proc.stderr.close()
        if proc.stdout:
            proc.stdout.close()


# ---------------------------------------------------------------- limits


def _other_calls(gw: Gateway) -> list[int]:
    return gw.handlers.handler("OtherFunction").__globals__["CALLS"]  # type: ignore[no-any-return]


def test_lambda_invoke_request_limit(gw: Gateway) -> None:
    # API Gateway takes up to 10 MB, Lambda's invoke at most 6,291,456 bytes of event: between
    # the two the function never runs and the gateway answers its 5XX.
    from threads_aws_dev.local.gateway import MAX_INVOKE_REQUEST

    calls = _other_calls(gw)
    calls.clear()
    status, body, resp = call(gw, "GET", "/big", query="n=1", body=b"x" * (MAX_INVOKE_REQUEST - 4000))
    assert status == 200 and calls == [MAX_INVOKE_REQUEST - 4000]
    status, body, resp = call(gw, "GET", "/big", query="n=1", body=b"x" * MAX_INVOKE_REQUEST)
    assert (status, body) == (500, {"message": "Internal server error"})
    assert resp.header("x-amzn-ErrorType") == "InternalServerErrorException"
    # JSON escaping counts: a body of quotes doubles inside the event.
    status, _, _ = call(gw, "GET", "/big", query="n=1", body=b'"' * (MAX_INVOKE_REQUEST // 2 + 10))
    assert status == 500 and len(calls) == 1


def test_lambda_response_limit(gw: Gateway) -> None:
    from threads_aws_dev.local.gateway import MAX_RESPONSE

    status, body, _ = call(gw, "GET", "/big", query=f"n={MAX_RESPONSE - 200}")
    assert status == 200 and len(body) == MAX_RESPONSE - 200
    status, body, _ = call(gw, "GET", "/big", query=f"n={MAX_RESPONSE}")
    assert (status, body) == (502, {"message": "Internal server error"})
    status, _, _ = call(gw, "GET", "/big", query=f"n={MAX_RESPONSE // 2 + 10}&quote=1")  # escaped: 2x
    assert status == 502


def test_stage_throttle_and_default_responses(fixture_template: Path) -> None:
    src = fixture_template.read_text().replace(
        "      StageName: !Ref Stage\n",
        "      StageName: !Ref Stage\n"
        "      MethodSettings:\n"
        "        - {ResourcePath: /*, HttpMethod: '*',\n"
        "           ThrottlingRateLimit: 0.001, ThrottlingBurstLimit: 2}\n",
    )
    fixture_template.write_text(src)
    tpl = parse_template(fixture_template)
    assert tpl.apis["Api"].throttle == (0.001, 2)
    gw = Gateway(tpl, Handlers(tpl.functions))
    assert [call(gw, "GET", "/health", token=None)[0] for _ in range(3)] == [200, 200, 429]
    status, body, resp = call(gw, "GET", "/health", token=None)
    assert (status, body) == (429, {"message": "Too Many Requests"})
    assert resp.header("x-amzn-ErrorType") == "TooManyRequestsException"
    # Declared DEFAULT_4XX / DEFAULT_5XX stand for every type without its own entry.
    fixture_template.write_text(
        src.replace(
            "      GatewayResponses:\n",
            "      GatewayResponses:\n"
            "        DEFAULT_4XX:\n"
            "          ResponseTemplates:\n"
            "            application/json: >-\n"
            '              {"error":{"code":"x4","message":$context.error.messageString}}\n'
            "        DEFAULT_5XX:\n"
            "          ResponseTemplates:\n"
            "            application/json: >-\n"
            '              {"error":{"code":"x5","message":"$context.error.responseType"}}\n',
        )
    )
    tpl = parse_template(fixture_template)
    gw = Gateway(tpl, Handlers(tpl.functions))
    call(gw, "GET", "/health", token=None), call(gw, "GET", "/health", token=None)
    status, body, _ = call(gw, "GET", "/health", token=None)
    assert (status, body) == (429, {"error": {"code": "x4", "message": "Too Many Requests"}})
    gw._buckets.clear()
    status, body, _ = call(gw, "GET", "/boom")
    assert (status, body) == (502, {"error": {"code": "x5", "message": "DEFAULT_5XX"}})
