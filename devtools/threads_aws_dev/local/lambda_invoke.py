"""The Lambda Invoke API for `threads-aws dev`: template functions invoked in this process.

`POST /2015-03-31/functions/{FunctionName}/invocations` (what boto3's `lambda.invoke` sends)
runs the function's handler here (`runtime.Handlers`, as the gateway and pollers do) and answers
as Lambda does: 200 with the handler's JSON result; a handler that raised → 200 with
`X-Amz-Function-Error: Unhandled` and `{errorMessage, errorType, stackTrace}`; a handler still
running at the function's Timeout → the same with `errorType: Sandbox.Timedout` (the thread is
left to finish, as a timed-out Lambda's side effects may land); an unknown function → 404
`ResourceNotFoundException`; a payload over Lambda's 6 MB synchronous limit → 413
`RequestEntityTooLargeException` (the handler never runs); a result over its 6 MB response limit
→ 200 with `X-Amz-Function-Error: Unhandled`, `errorType: Function.ResponseSizeTooLarge` (what
Lambda answers: the function ran, its answer is lost). `FunctionName` may be the logical id, a
name or an ARN (its last `function:` segment, qualifier dropped), or the FunctionName the
template gives it (`names`). `threads-aws dev` points `AWS_ENDPOINT_URL_LAMBDA` here, so the
worker's ordinary boto3 client reaches the in-process tool functions.
"""

from __future__ import annotations

import json
import threading
import traceback
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

from .runtime import Handlers

PREFIX = "/2015-03-31/functions/"
MAX_REQUEST = 6_291_456  # synchronous invoke payload
MAX_RESPONSE = 6_291_556  # synchronous response payload (Lambda's ResponseSizeTooLarge figure)


def function_of(name: str) -> str:
    if name.startswith("arn:"):
        name = name.split(":function:", 1)[-1]
    return name.split(":", 1)[0]


class LocalLambda:
    def __init__(
        self, handlers: Handlers, host: str = "127.0.0.1", port: int = 0, names: dict[str, str] | None = None
    ) -> None:
        self.handlers = handlers
        self.names = dict(names or {})  # resolved FunctionName -> logical id
        self.invocations = 0
        self.iam: Any = None  # local.iam.LocalIam: lambda:InvokeFunction checked per caller
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
                return

            def do_POST(self) -> None:  # noqa: N802 - stdlib name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, headers, out = outer.handle(self.path, body, self.headers.get("Authorization") or "")
                self.send_response(status)
                for k, v in {**headers, "Content-Length": str(len(out))}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(out)

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host.decode() if isinstance(host, bytes) else host}:{port}"

    def start(self) -> LocalLambda:
        self._thread = threading.Thread(target=self.server.serve_forever, name="local-lambda", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def handle(self, path: str, body: bytes, authorization: str = "") -> tuple[int, dict[str, str], bytes]:
        request_id = str(uuid.uuid4())
        base = {"Content-Type": "application/json", "x-amzn-RequestId": request_id}
        if not path.startswith(PREFIX) or not path.split("?", 1)[0].endswith("/invocations"):
            return 404, {**base, "x-amzn-ErrorType": "UnknownOperationException"}, b'{"message":"unknown"}'
        requested = function_of(unquote(path[len(PREFIX) :].split("/", 1)[0]))
        name = self.names.get(requested, requested)
        denied = self._denied(authorization, requested)
        if denied is not None:
            return denied
        if name not in self.handlers.functions:
            msg = {"Type": "User", "message": f"Function not found: {name}"}
            return 404, {**base, "x-amzn-ErrorType": "ResourceNotFoundException"}, json.dumps(msg).encode()
        if len(body) > MAX_REQUEST:
            msg = {"Type": "User", "message": f"{len(body)} byte payload is too large for the Invoke API"}
            big = {**base, "x-amzn-ErrorType": "RequestEntityTooLargeException"}
            return 413, big, json.dumps(msg).encode()
        try:
            event = json.loads(body) if body else {}
        except ValueError:
            msg = {"Type": "User", "message": "Could not parse request body into json"}
            bad = {**base, "x-amzn-ErrorType": "InvalidRequestContentException"}
            return 400, bad, json.dumps(msg).encode()
        self.invocations += 1
        return self._run(name, event, request_id, base)

    def _denied(self, authorization: str, requested: str) -> tuple[int, dict[str, str], bytes] | None:
        """lambda:InvokeFunction checked against the caller's role (`local.iam`), if enforced."""
        if self.iam is None:
            return None
        key = authorization.partition("Credential=")[2].split("/", 1)[0]
        answer = self.iam.check_invoke(key, requested) if key else None
        if answer is None:
            return None
        status, headers, out = answer
        return int(status.split()[0]), dict(headers), out

    def _run(
        self, name: str, event: Any, request_id: str, base: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        box: dict[str, Any] = {}
        timeout_s = self.handlers.functions[name].timeout_s

        def target() -> None:
            try:
                box["result"] = self.handlers.invoke(name, event, request_id)
            except BaseException as exc:  # noqa: BLE001 - reported as the function's error
                box["error"] = exc
                box["trace"] = traceback.format_exception(exc)

        worker = threading.Thread(target=target, name=f"lambda-{name}", daemon=True)
        worker.start()
        worker.join(timeout_s)
        failed = {**base, "X-Amz-Function-Error": "Unhandled", "X-Amz-Executed-Version": "$LATEST"}
        if worker.is_alive():
            err = {
                "errorMessage": f"Task timed out after {timeout_s:.2f} seconds",
                "errorType": "Sandbox.Timedout",
            }
            return 200, failed, json.dumps(err).encode()
        if "error" in box:
            exc = box["error"]
            err = {"errorMessage": str(exc), "errorType": type(exc).__name__, "stackTrace": box["trace"]}
            return 200, failed, json.dumps(err).encode()
        out = json.dumps(box.get("result")).encode()
        if len(out) > MAX_RESPONSE:
            err = {
                "errorMessage": f"Response payload size ({len(out)} bytes) exceeded maximum allowed "
                f"payload size ({MAX_RESPONSE} bytes).",
                "errorType": "Function.ResponseSizeTooLarge",
            }
            return 200, failed, json.dumps(err).encode()
        return 200, {**base, "X-Amz-Executed-Version": "$LATEST"}, out
