"""An API Gateway (REST, Lambda proxy integration) in front of the template's functions.

`Gateway.handle` does what a deployed REST API does with a request: match a resource of the
template (`Events` of type Api: literal segments before `{param}` before `{proxy+}`, the exact
method before ANY), run the route's Lambda authorizer (REQUEST or TOKEN payload; its policy must
Allow the method ARN; its context becomes `requestContext.authorizer`), build the v1 proxy event,
call the handler and turn its proxy response into HTTP. Failures are API Gateway's gateway
responses, customised by the Api's `GatewayResponses` exactly as a deployment would be:

  no route (path or method)           MISSING_AUTHENTICATION_TOKEN  403 (REST APIs say this, not 404;
                                                                        ANY takes any method token)
  body over 10 MB                     REQUEST_TOO_LARGE             413 (before routing)
  request line + header values > 10 KB  REQUEST_TOO_LARGE           413 (local.asgi; before routing)
  over the stage's throttle           THROTTLED                     429 (MethodSettings "/*" "*")
  identity source missing             UNAUTHORIZED                  401 (authorizer not called)
  authorizer raises "Unauthorized"    UNAUTHORIZED                  401
  policy denies / doesn't allow       ACCESS_DENIED                 403
  authorizer fails otherwise          AUTHORIZER_FAILURE            500
  authorizer answer malformed         AUTHORIZER_CONFIGURATION_ERROR 500
  proxy event over Lambda's 6 MB      API_CONFIGURATION_ERROR       500 (Lambda refuses the invoke:
                                                                        RequestEntityTooLarge)
  handler raises / bad proxy answer   DEFAULT_5XX                   502 Internal server error
  handler still running after 29 s    INTEGRATION_TIMEOUT           504 (non-streaming routes; the
                                                                        function runs on, as there)
  proxy answer over Lambda's 6 MB     DEFAULT_5XX                   502 (Function.ResponseSizeTooLarge)

so a local run shows the statuses the deployed API will give (a Deny policy is 403 there, too).
A type the Api does not declare falls back to its DEFAULT_4XX / DEFAULT_5XX, then to API
Gateway's built-in answer. Lambda's invoke limits are measured as Lambda does: the request on the
event as API Gateway serialises it (6,291,456 bytes), the response on the handler's answer as the
Python runtime serialises it (`json.dumps`, ensure_ascii off as on python3.12+; 6,291,556 bytes).
Responses are buffered, as the Lambda proxy integration buffers them (an SSE body arrives whole
when the handler returns). `make_server` puts it behind a real HTTP server (`local.server`:
uvicorn serving the ASGI app of `local.asgi`).
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import json
import logging
import re
import sys
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import Any
from urllib.parse import parse_qsl, unquote

from .runtime import Handlers
from .sam import ACCOUNT, Api, ApiRoute, Authorizer, Template

log = logging.getLogger("threads_aws_dev.local")

MAX_REQUEST = 10 * 1024 * 1024  # API Gateway's payload limit
MAX_INVOKE_REQUEST = 6_291_456  # Lambda's synchronous invoke payload ("smaller than 6291456 bytes")
MAX_RESPONSE = 6_291_556  # Lambda's synchronous response payload (ResponseSizeTooLarge)
INTEGRATION_TIMEOUT_S = 29.0  # REST API integration timeout (the default quota; streaming is exempt)

# type -> (status, body) of API Gateway's built-in gateway responses.
DEFAULT_RESPONSES: dict[str, tuple[int, str]] = {
    "MISSING_AUTHENTICATION_TOKEN": (403, '{"message":"Missing Authentication Token"}'),
    "UNAUTHORIZED": (401, '{"message":"Unauthorized"}'),
    "ACCESS_DENIED": (403, '{"Message":"User is not authorized to access this resource"}'),
    "AUTHORIZER_FAILURE": (500, '{"message":null}'),
    "AUTHORIZER_CONFIGURATION_ERROR": (500, '{"message":null}'),
    "REQUEST_TOO_LARGE": (413, '{"message":"Request Too Long"}'),
    "THROTTLED": (429, '{"message":"Too Many Requests"}'),
    "API_CONFIGURATION_ERROR": (500, '{"message": "Internal server error"}'),
    "DEFAULT_5XX": (502, '{"message": "Internal server error"}'),
    "INTEGRATION_TIMEOUT": (504, '{"message": "Endpoint request timed out"}'),
}
ERROR_TYPES = {
    "MISSING_AUTHENTICATION_TOKEN": "MissingAuthenticationTokenException",
    "UNAUTHORIZED": "UnauthorizedException",
    "ACCESS_DENIED": "AccessDeniedException",
    "AUTHORIZER_FAILURE": "AuthorizerFailureException",
    "AUTHORIZER_CONFIGURATION_ERROR": "AuthorizerConfigurationException",
    "REQUEST_TOO_LARGE": "RequestTooLargeException",
    "THROTTLED": "TooManyRequestsException",
    "API_CONFIGURATION_ERROR": "InternalServerErrorException",
    "DEFAULT_5XX": "InternalServerErrorException",
    "INTEGRATION_TIMEOUT": "InternalServerErrorException",
}
MESSAGES = {
    "MISSING_AUTHENTICATION_TOKEN": "Missing Authentication Token",
    "UNAUTHORIZED": "Unauthorized",
    "ACCESS_DENIED": "User is not authorized to access this resource",
    "AUTHORIZER_FAILURE": None,
    "AUTHORIZER_CONFIGURATION_ERROR": None,
    "REQUEST_TOO_LARGE": "Request Too Long",
    "THROTTLED": "Too Many Requests",
    "API_CONFIGURATION_ERROR": "Internal server error",
    "DEFAULT_5XX": "Internal server error",
    "INTEGRATION_TIMEOUT": "Endpoint request timed out",
}


@dataclass
class Response:
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return None


@dataclass
class StreamedResponse(Response):
    """A STREAM integration's answer: served on the connection by `local.asgi` (`local.lwa`)."""

    stream: Any = None


@dataclass
class Request:
    method: str
    path: str  # raw path, without the query string
    query: str = ""
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    source_ip: str = "127.0.0.1"


class GatewayError(Exception):
    def __init__(self, kind: str, message: str | None = None) -> None:
        super().__init__(kind)
        self.kind = kind
        self.message = message if message is not None else MESSAGES.get(kind)


# ---------------------------------------------------------------- routing


@dataclass(frozen=True)
class _Compiled:
    route: ApiRoute
    parts: tuple[str, ...]
    rank: tuple[int, ...]  # per segment: 2 literal, 1 {param}, 0 {proxy+}; then 1 exact method


def _compile(route: ApiRoute) -> _Compiled:
    parts = tuple(p for p in route.path.strip("/").split("/") if p)
    rank = []
    for p in parts:
        if p.startswith("{") and p.endswith("+}"):
            rank.append(0)
        elif p.startswith("{") and p.endswith("}"):
            rank.append(1)
        else:
            rank.append(2)
    return _Compiled(route, parts, (*rank, 0 if route.method == "ANY" else 1))


def _match(c: _Compiled, segs: list[str]) -> dict[str, str] | None:
    params: dict[str, str] = {}
    for i, p in enumerate(c.parts):
        if p.startswith("{") and p.endswith("+}"):
            rest = segs[i:]
            if not rest:
                return None
            params[p[1:-2]] = "/".join(rest)
            return params
        if i >= len(segs):
            return None
        if p.startswith("{") and p.endswith("}"):
            if not segs[i]:
                return None
            params[p[1:-1]] = segs[i]
        elif p != segs[i]:
            return None
    return params if len(segs) == len(c.parts) else None


class Router:
    def __init__(self, routes: Iterable[ApiRoute]) -> None:
        # Most specific first: API Gateway prefers literal segments, then {param}, then greedy.
        self._routes = sorted((_compile(r) for r in routes), key=lambda c: c.rank, reverse=True)

    def match(self, method: str, path: str) -> tuple[ApiRoute, dict[str, str]] | None:
        segs = [unquote(s) for s in path.strip("/").split("/")] if path.strip("/") else []
        for c in self._routes:
            if c.route.method not in (method, "ANY"):
                continue
            params = _match(c, segs)
            if params is not None:
                return c.route, params
        return None


# ---------------------------------------------------------------- the gateway


def _api_id(logical_id: str) -> str:
    return hashlib.sha1(f"api:{logical_id}".encode()).hexdigest()[:10]


def _multi(pairs: Iterable[tuple[str, str]]) -> tuple[dict[str, str] | None, dict[str, list[str]] | None]:
    single: dict[str, str] = {}
    multi: dict[str, list[str]] = {}
    for k, v in pairs:
        single[k] = v  # the last value wins, as in API Gateway
        multi.setdefault(k, []).append(v)
    return (single or None), (multi or None)


def _policy_allows(policy: Any, arn: str) -> bool | None:
    """True: allowed; False: denied (explicitly or by default); None: malformed."""
    if not isinstance(policy, dict):
        return None
    statements = policy.get("Statement")
    if isinstance(statements, dict):
        statements = [statements]
    if not isinstance(statements, list):
        return None
    allowed = False
    for st in statements:
        if not isinstance(st, dict):
            return None
        actions = st.get("Action", [])
        resources = st.get("Resource", [])
        actions = [actions] if isinstance(actions, str) else actions
        resources = [resources] if isinstance(resources, str) else resources
        if not any(fnmatch.fnmatchcase("execute-api:Invoke", a) for a in actions):
            continue
        if not any(fnmatch.fnmatchcase(arn, r) for r in resources if isinstance(r, str)):
            continue
        if st.get("Effect") == "Deny":
            return False
        if st.get("Effect") == "Allow":
            allowed = True
    return allowed


def _context_value(v: Any) -> str:
    # REST APIs hand authorizer context values to the integration as strings.
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float, str)):
        return str(v)
    raise GatewayError("AUTHORIZER_CONFIGURATION_ERROR")


class _Bucket:
    """API Gateway's token bucket: `burst` tokens, refilled at `rate` per second."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate, self.burst = rate, burst
        self.tokens, self.at = float(burst), time.monotonic()
        self.lock = threading.Lock()

    def take(self) -> bool:
        with self.lock:
            now = time.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
            self.at = now
            if self.tokens < 1:
                return False
            self.tokens -= 1
            return True


class Gateway:
    def __init__(
        self,
        template: Template,
        handlers: Handlers,
        *,
        region: str = "us-east-1",
        integration_timeout_s: float = INTEGRATION_TIMEOUT_S,
    ) -> None:
        self.template = template
        self.integration_timeout_s = integration_timeout_s
        self.handlers = handlers
        self.region = region
        self.router = Router(template.routes)
        self._buckets = {lid: _Bucket(*api.throttle) for lid, api in template.apis.items() if api.throttle}
        from .function_urls import FunctionUrls  # channel webhooks: Lambda function URLs

        self.function_urls = FunctionUrls(template, handlers, region=region)

    # -- public

    def handle(self, req: Request) -> Response:
        request_id = str(uuid.uuid4())
        api: Api | None = None
        if len(req.body) > MAX_REQUEST:
            return self.reject("REQUEST_TOO_LARGE", req)
        by_url = self.function_urls.handle(req)  # not API Gateway: a function URL's own answer
        if by_url is not None:
            return by_url
        try:
            found = self.router.match(req.method, req.path)
            if found is None:
                api = next(iter(self.template.apis.values()), None)
                raise GatewayError("MISSING_AUTHENTICATION_TOKEN")
            route, params = found
            api = self.template.apis[route.api]
            bucket = self._buckets.get(api.logical_id)
            if bucket is not None and not bucket.take():
                raise GatewayError("THROTTLED")
            event = self._proxy_event(req, route, api, params, request_id)
            if route.authorizer is not None:
                event["requestContext"]["authorizer"] = self._authorize(req, route, api, event)
            if route.stream:  # responseTransferMode STREAM: the ASGI app answers (local.lwa)
                return self._streamed(route, event)
            return self._integrate(route, event)
        except GatewayError as exc:
            return self._gateway_response(exc, api, req, request_id)

    def reject(self, kind: str, req: Request) -> Response:
        api = next(iter(self.template.apis.values()), None)
        return self._gateway_response(GatewayError(kind), api, req, str(uuid.uuid4()))

    # -- proxy event

    def _proxy_event(
        self, req: Request, route: ApiRoute, api: Api, params: dict[str, str], request_id: str
    ) -> dict[str, Any]:
        headers, multi_headers = _multi(req.headers)
        query, multi_query = _multi(parse_qsl(req.query, keep_blank_values=True))
        content_type = next((v for k, v in req.headers if k.lower() == "content-type"), "")
        body: str | None = None
        b64 = False
        if req.body:
            binary = any(
                fnmatch.fnmatch(content_type.split(";")[0].strip(), t) for t in api.binary_media_types
            )
            if not binary:
                try:
                    body = req.body.decode("utf-8")
                except UnicodeDecodeError:
                    binary = True
            if binary:
                body, b64 = base64.b64encode(req.body).decode("ascii"), True
        now = time.time()
        user_agent = next((v for k, v in req.headers if k.lower() == "user-agent"), None)
        return {
            "resource": route.path,
            "path": req.path,
            "httpMethod": req.method,
            "headers": headers,
            "multiValueHeaders": multi_headers,
            "queryStringParameters": query,
            "multiValueQueryStringParameters": multi_query,
            "pathParameters": params or None,
            "stageVariables": None,
            "body": body,
            "isBase64Encoded": b64,
            "requestContext": {
                "accountId": ACCOUNT,
                "apiId": _api_id(api.logical_id),
                "resourceId": hashlib.sha1(route.path.encode()).hexdigest()[:6],
                "resourcePath": route.path,
                "httpMethod": req.method,
                "path": f"/{api.stage}{req.path}",
                "stage": api.stage,
                "protocol": "HTTP/1.1",
                "requestId": request_id,
                "extendedRequestId": request_id,
                "requestTime": formatdate(now, usegmt=True),
                "requestTimeEpoch": int(now * 1000),
                "domainName": headers.get("Host", "127.0.0.1") if headers else "127.0.0.1",
                "identity": {
                    "sourceIp": req.source_ip,
                    "userAgent": user_agent,
                    "accessKey": None,
                    "accountId": None,
                    "caller": None,
                    "cognitoIdentityId": None,
                    "cognitoIdentityPoolId": None,
                    "user": None,
                    "userArn": None,
                },
                "authorizer": None,
            },
        }

    def method_arn(self, api: Api, method: str, path: str) -> str:
        api_id = _api_id(api.logical_id)
        return f"arn:aws:execute-api:{self.region}:{ACCOUNT}:{api_id}/{api.stage}/{method}{path}"

    # -- authorizer

    def _authorize(self, req: Request, route: ApiRoute, api: Api, event: dict[str, Any]) -> dict[str, Any]:
        auth: Authorizer | None = api.authorizers.get(route.authorizer or "")
        if auth is None:
            log.error(
                "route %s %s names authorizer %s, which the Api lacks",
                route.method,
                route.path,
                route.authorizer,
            )
            raise GatewayError("AUTHORIZER_CONFIGURATION_ERROR")
        arn = self.method_arn(api, req.method, req.path)
        lower = {k.lower(): v for k, v in (event["headers"] or {}).items()}
        if auth.payload == "TOKEN":
            token = lower.get(auth.token_header.lower())
            if not token:
                raise GatewayError("UNAUTHORIZED")
            auth_event: dict[str, Any] = {"type": "TOKEN", "authorizationToken": token, "methodArn": arn}
        else:
            # Identity sources are required: API Gateway answers 401 without calling the Lambda.
            query = event["queryStringParameters"] or {}
            if any(not lower.get(h.lower()) for h in auth.headers) or any(
                not query.get(q) for q in auth.query
            ):
                raise GatewayError("UNAUTHORIZED")
            auth_event = {
                "type": "REQUEST",
                "methodArn": arn,
                **{k: event[k] for k in ("resource", "path", "httpMethod", "headers", "multiValueHeaders")},
                **{k: event[k] for k in ("queryStringParameters", "multiValueQueryStringParameters")},
                "pathParameters": event["pathParameters"] or {},
                "stageVariables": {},
                "requestContext": {k: v for k, v in event["requestContext"].items() if k != "authorizer"},
            }
        started = time.monotonic()
        try:
            answer = self.handlers.invoke(auth.function, auth_event)
        except Exception as exc:
            if str(exc) == "Unauthorized":
                raise GatewayError("UNAUTHORIZED") from None
            log.exception("authorizer %s failed", auth.function)
            raise GatewayError("AUTHORIZER_FAILURE") from None
        if not isinstance(answer, dict) or "principalId" not in answer:
            log.error("authorizer %s: answer without principalId/policyDocument: %r", auth.function, answer)
            raise GatewayError("AUTHORIZER_CONFIGURATION_ERROR")
        allowed = _policy_allows(answer.get("policyDocument"), arn)
        if allowed is None:
            log.error(
                "authorizer %s: malformed policyDocument %r", auth.function, answer.get("policyDocument")
            )
            raise GatewayError("AUTHORIZER_CONFIGURATION_ERROR")
        if not allowed:
            raise GatewayError("ACCESS_DENIED")
        context = answer.get("context") or {}
        if not isinstance(context, dict):
            raise GatewayError("AUTHORIZER_CONFIGURATION_ERROR")
        out: dict[str, Any] = {k: _context_value(v) for k, v in context.items()}
        out["principalId"] = str(answer["principalId"])
        out["integrationLatency"] = int((time.monotonic() - started) * 1000)
        return out

    # -- integration

    def _integrate(self, route: ApiRoute, event: dict[str, Any]) -> Response:
        size = len(json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode())
        if size > MAX_INVOKE_REQUEST:
            log.error("%s: proxy event of %d bytes, over Lambda's invoke limit", route.function, size)
            raise GatewayError("API_CONFIGURATION_ERROR")
        answer = self._invoke_within_timeout(route, event)
        try:
            size = len(json.dumps(answer, ensure_ascii=False).encode())
            if size > MAX_RESPONSE:
                raise ValueError(f"a {size}-byte response, over Lambda's 6 MB limit")
            return self._proxy_response(answer, event["requestContext"]["requestId"])
        except (TypeError, ValueError, KeyError) as exc:
            log.error("%s: malformed proxy response (%s): %.300r", route.function, exc, answer)
            raise GatewayError("DEFAULT_5XX") from None

    def _invoke_within_timeout(self, route: ApiRoute, event: dict[str, Any]) -> Any:
        """The handler's answer, or INTEGRATION_TIMEOUT when it takes longer than API Gateway
        waits (the handler is left to finish, as a deployed function runs to its own Timeout)."""
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["answer"] = self.handlers.invoke(route.function, event)
            except Exception as exc:  # noqa: BLE001 - reported below, as API Gateway's 502
                box["error"] = exc

        worker = threading.Thread(target=target, name=f"integration-{route.function}", daemon=True)
        worker.start()
        worker.join(self.integration_timeout_s)
        if worker.is_alive():
            log.error(
                "%s: no answer within API Gateway's %.0f s integration timeout (504)",
                route.function,
                self.integration_timeout_s,
            )
            raise GatewayError("INTEGRATION_TIMEOUT")
        if "error" in box:
            exc = box["error"]
            log.error("%s raised (API Gateway answers 502)", route.function, exc_info=exc)
            raise GatewayError("DEFAULT_5XX") from None
        return box.get("answer")

    def _streamed(self, route: ApiRoute, event: dict[str, Any]) -> Response:
        from .lwa import Streamed

        f = self.handlers.functions[route.function]
        try:
            app = self.handlers.handler(route.function)
        except Exception:
            log.exception("%s: app not loadable (API Gateway answers 502)", route.function)
            raise GatewayError("DEFAULT_5XX") from None
        stream = Streamed(app, event, f.logical_id, f.arn(self.region), f.timeout_s, f.memory_mb)
        return StreamedResponse(200, [], b"", stream)

    @staticmethod
    def _proxy_response(answer: Any, request_id: str) -> Response:
        if not isinstance(answer, dict):
            raise TypeError("not an object")
        status = answer.get("statusCode")
        if isinstance(status, bool) or not isinstance(status, (int, str)):
            raise TypeError("statusCode missing or not an integer")
        status = int(status)
        if not 100 <= status <= 599:
            raise ValueError(f"statusCode {status}")
        multi = answer.get("multiValueHeaders") or {}
        single = answer.get("headers") or {}
        if not isinstance(multi, dict) or not isinstance(single, dict):
            raise TypeError("headers are not objects")
        headers: list[tuple[str, str]] = []
        for k, vs in multi.items():
            if not isinstance(vs, list):
                raise TypeError(f"multiValueHeaders[{k}] is not a list")
            headers += [(str(k), str(v)) for v in vs]
        taken = {k.lower() for k in multi}
        headers += [(str(k), str(v)) for k, v in single.items() if k.lower() not in taken]
        raw = answer.get("body")
        if raw is None:
            body = b""
        elif not isinstance(raw, str):
            raise TypeError("body is not a string")
        elif answer.get("isBase64Encoded"):
            body = base64.b64decode(raw, validate=True)
        else:
            body = raw.encode("utf-8")
        names = {k.lower() for k, _ in headers}
        if "content-type" not in names:
            headers.append(("Content-Type", "application/json"))
        headers.append(("x-amzn-RequestId", request_id))
        return Response(status, headers, body)

    # -- gateway responses

    def _gateway_response(
        self, exc: GatewayError, api: Api | None, req: Request, request_id: str
    ) -> Response:
        default_status, default_body = DEFAULT_RESPONSES.get(exc.kind, DEFAULT_RESPONSES["DEFAULT_5XX"])
        declared = None
        if api is not None:
            declared = api.gateway_responses.get(exc.kind) or api.gateway_responses.get(
                "DEFAULT_4XX" if default_status < 500 else "DEFAULT_5XX"
            )
        status = default_status
        headers: list[tuple[str, str]] = []
        body = default_body
        content_type = "application/json"
        if declared is not None:
            status = declared.status or default_status
            for k, v in declared.headers.items():
                headers.append((k, self._param(v, req)))
            if declared.templates:
                content_type, template = next(iter(declared.templates.items()))
                if "application/json" in declared.templates:
                    content_type, template = "application/json", declared.templates["application/json"]
                body = _vtl(template, exc, request_id)
        if not any(k.lower() == "content-type" for k, _ in headers):
            headers.append(("Content-Type", content_type))
        headers += [
            ("x-amzn-RequestId", request_id),
            ("x-amzn-ErrorType", ERROR_TYPES.get(exc.kind, "InternalServerErrorException")),
        ]
        return Response(status, headers, body.encode("utf-8"))

    @staticmethod
    def _param(value: str, req: Request) -> str:
        m = re.fullmatch(r"method\.request\.(header|querystring)\.(.+)", value)
        if not m:
            return value
        if m.group(1) == "header":
            return next((v for k, v in req.headers if k.lower() == m.group(2).lower()), "")
        return dict(parse_qsl(req.query)).get(m.group(2), "")


def _vtl(template: str, exc: GatewayError, request_id: str) -> str:
    """The few $context variables gateway response templates use."""
    message = exc.message
    values = {
        "$context.error.messageString": json.dumps(message),
        "$context.error.message": "" if message is None else message,
        "$context.error.responseType": exc.kind,
        "$context.requestId": request_id,
        "$context.extendedRequestId": request_id,
    }
    return re.sub(
        r"\$\{(context\.[A-Za-z.]+)\}|\$(context\.[A-Za-z.]+)",
        lambda m: values.get("$" + (m.group(1) or m.group(2)), m.group(0)),
        template,
    )


# ---------------------------------------------------------------- HTTP


def make_server(gateway: Gateway, host: str = "127.0.0.1", port: int = 0, **kw: Any) -> Any:
    """The HTTP server in front of `gateway` (uvicorn: `local.server`), bound, not yet serving."""
    from .server import make_server as _make

    return _make(gateway, host, port, **kw)


def serve_in_thread(server: Any) -> threading.Thread:
    from .server import serve_in_thread as _serve

    return _serve(server)


def configure_logging(verbose: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO if verbose else logging.WARNING)
    log.propagate = False


__all__ = ["Gateway", "Request", "Response", "Router", "make_server", "serve_in_thread"]
