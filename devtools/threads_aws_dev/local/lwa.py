"""Response streaming for the local gateway: API Gateway's `responseTransferMode: STREAM` into a
function run by the AWS Lambda Web Adapter, emulated, so `threads-aws dev` serves the run stream
through the very ASGI app Lambda runs.

From the template:
- a *web adapter function* has a script as its Handler and `AWS_LAMBDA_EXEC_WRAPPER:
  /opt/bootstrap`; the app is the `module:attr` its script hands to uvicorn (`asgi_target`),
  loaded from the function's CodeUri like a handler (`load_asgi`);
- routes an Api declares in its inline `DefinitionBody` (`definition_routes`), with the
  integration chosen by an `Fn::If` on the template's conditions (parameter defaults, or the
  overrides `threads-aws dev` was given), the function named in its URI, STREAM when
  `responseTransferMode` says so, and the Api's default authorizer unless the method sets
  `security`. Routes from function events stay `local.sam`'s.

Per request (`Streamed.serve`), what the adapter does: the proxy event the gateway built
(authorizer context included) becomes an HTTP request to the app — the event's path without the
stage, its query and headers, plus `x-amzn-request-context` (the requestContext as JSON, which
replaces any such header the client sent) and `x-amzn-lambda-context` (request id, deadline from
the function's Timeout). The app's status, headers and body chunks go to the client as they come,
with API Gateway's `x-amzn-RequestId`; an app that fails before answering is the gateway's 502,
and an invocation that outlives its Timeout is cut off, as Lambda would.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import re
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import orjson

log = logging.getLogger("threads_aws_dev.local")

WRAPPER = "/opt/bootstrap"
_TARGET = re.compile(r"\buvicorn\b[^\n]*?\s([A-Za-z_][\w.]*:[A-Za-z_]\w*)\s*$", re.M)
_FUNCTION_IN_URI = re.compile(r"\$\{([A-Za-z0-9]+)\.Arn\}")

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


# ---------------------------------------------------------------- the template


def asgi_target(code_dir: Path, handler: str, env: Mapping[str, Any]) -> str | None:
    """`module:attr` of a web adapter function's app, or None for an ordinary handler."""
    if env.get("AWS_LAMBDA_EXEC_WRAPPER") != WRAPPER:
        return None
    script = code_dir / handler
    if not script.is_file():
        raise FileNotFoundError(f"start script {script} not found")
    m = _TARGET.search(script.read_text().replace("\\\n", " "))  # continued lines joined
    if m is None:
        raise ValueError(f"{script}: no `uvicorn ... module:app` line")
    return m.group(1)


def load_asgi(logical_id: str, code_dir: Path, target: str) -> Any:
    """The ASGI app `module:attr`, its module loaded from `code_dir` under a unique name."""
    mod_path, _, attr = target.partition(":")
    file = code_dir.joinpath(*mod_path.split(".")).with_suffix(".py")
    name = f"_threads_local_asgi_{logical_id}_{mod_path.replace('.', '_')}"
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {file}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    app = getattr(module, attr, None)
    if not callable(app):
        raise AttributeError(f"{logical_id}: {file} has no ASGI app {attr!r}")
    return app


def condition(name: str, conditions: Mapping[str, Any], params: Mapping[str, str]) -> bool:
    """Evaluate template condition `name` (Equals, Not, And, Or, Condition over Refs)."""

    def value(v: Any) -> Any:
        if isinstance(v, dict) and "Ref" in v:
            return params.get(v["Ref"], "")
        if isinstance(v, dict) and "Fn::Join" in v:
            sep, parts = v["Fn::Join"]
            return sep.join(str(value(p)) for p in (parts if isinstance(parts, list) else [parts]))
        return v

    def ev(c: Any) -> bool:
        ((k, arg),) = c.items()
        if k == "Fn::Equals":
            return str(value(arg[0])) == str(value(arg[1]))
        if k == "Fn::Not":
            return not ev(arg[0])
        if k == "Fn::And":
            return all(ev(x) for x in arg)
        if k == "Fn::Or":
            return any(ev(x) for x in arg)
        if k in ("Condition", "Fn::Condition"):  # `!Condition X` loads as Fn::Condition
            return ev(conditions[arg])
        raise ValueError(f"condition {name}: {k} is not evaluated locally")

    return ev(conditions[name])


def choose(v: Any, conditions: Mapping[str, Any], params: Mapping[str, str]) -> Any:
    """`v` with every `Fn::If` decided."""
    if isinstance(v, list):
        return [choose(x, conditions, params) for x in v]
    if not isinstance(v, dict):
        return v
    if set(v) == {"Fn::If"}:
        name, yes, no = v["Fn::If"]
        return choose(yes if condition(name, conditions, params) else no, conditions, params)
    return {k: choose(x, conditions, params) for k, x in v.items()}


@dataclass(frozen=True)
class DefinedRoute:
    path: str
    method: str
    function: str
    stream: bool
    authorizer: str | None


def definition_routes(
    body: Any, conditions: Mapping[str, Any], params: Mapping[str, str], default_authorizer: str | None
) -> list[DefinedRoute]:
    """The Lambda proxy routes of an Api's inline DefinitionBody."""
    out: list[DefinedRoute] = []
    paths = body.get("paths") if isinstance(body, dict) else None
    for path, item in (paths or {}).items():
        for method, op in (choose(item, conditions, params) or {}).items():
            integ = op.get("x-amazon-apigateway-integration") if isinstance(op, dict) else None
            if not isinstance(integ, dict) or integ.get("type") != "aws_proxy":
                continue
            uri = integ.get("uri")
            text = uri.get("Fn::Sub") if isinstance(uri, dict) else uri
            m = _FUNCTION_IN_URI.search(text if isinstance(text, str) else "")
            if m is None:
                continue
            authorizer = default_authorizer
            security = op.get("security")
            if isinstance(security, list):
                names = [n for s in security if isinstance(s, dict) for n in s]
                authorizer = next((n for n in names if n != "NONE"), None)
            out.append(
                DefinedRoute(
                    path=str(path),
                    method="ANY" if method == "x-amazon-apigateway-any-method" else method.upper(),
                    function=m.group(1),
                    stream=integ.get("responseTransferMode") == "STREAM",
                    authorizer=authorizer,
                )
            )
    return out


# ---------------------------------------------------------------- one streamed request


@dataclass
class Streamed:
    """A STREAM integration's invocation, ready to be served on the client's connection."""

    app: Any
    event: dict[str, Any]
    function: str
    arn: str
    timeout_s: int
    memory_mb: int
    headers_out: list[tuple[bytes, bytes]] = field(default_factory=list)

    def scope(self) -> dict[str, Any]:
        ev = self.event
        request_id = ev["requestContext"]["requestId"]
        multi = ev.get("multiValueHeaders") or {k: [v] for k, v in (ev.get("headers") or {}).items()}
        headers = [
            (k.lower().encode("latin-1"), str(v).encode("latin-1"))
            for k, vs in multi.items()
            if k.lower() not in ("x-amzn-request-context", "x-amzn-lambda-context")
            for v in vs
        ]
        deadline = int(time.time() * 1000) + self.timeout_s * 1000
        lambda_ctx = {
            "request_id": request_id,
            "deadline": deadline,
            "invoked_function_arn": self.arn,
            "xray_trace_id": None,
            "client_context": None,
            "identity": None,
            "env_config": {
                "function_name": self.function,
                "memory": self.memory_mb,
                "version": "$LATEST",
                "log_stream": f"local/{self.function}",
                "log_group": f"/aws/lambda/{self.function}",
            },
        }
        headers += [
            (b"x-amzn-request-context", orjson.dumps(ev["requestContext"])),
            (b"x-amzn-lambda-context", orjson.dumps(lambda_ctx)),
        ]
        query = urlencode(
            [(k, v) for k, vs in (ev.get("multiValueQueryStringParameters") or {}).items() for v in vs]
        )
        path = ev["path"]
        return {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": ev["httpMethod"],
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": query.encode(),
            "root_path": "",
            "headers": headers,
            "client": ("127.0.0.1", 0),
            "server": ("127.0.0.1", 8080),
        }

    async def serve(self, receive: Receive, send: Send) -> bool:
        """Run the app on the client's connection; False if it failed before answering (the
        caller then sends the gateway's 502)."""
        request_id = self.event["requestContext"]["requestId"]
        body_sent = False
        started = False

        async def app_receive() -> Message:
            nonlocal body_sent
            if not body_sent:
                body_sent = True
                return {"type": "http.request", "body": b"", "more_body": False}
            return await receive()

        async def app_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = list(message.get("headers") or [])
                headers.append((b"x-amzn-RequestId", request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        from .iam import CURRENT

        token = CURRENT.set(self.function)  # its AWS requests signed with its role (local.iam)
        try:
            await asyncio.wait_for(self.app(self.scope(), app_receive, app_send), self.timeout_s)
        except TimeoutError:
            log.warning("%s: timed out after %d s (Lambda ends it)", self.function, self.timeout_s)
        except OSError:
            pass  # the client went away
        except Exception:
            log.exception("%s raised (API Gateway answers 502)", self.function)
        finally:
            CURRENT.reset(token)
        return started
