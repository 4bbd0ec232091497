"""API Gateway REST (v1 proxy) events in, proxy responses out.

Every failure body is `{"error": {"code", "message"}}` with the status of openapi.json's
`info.description`: 400 invalid_request, 401 unauthenticated, 403 forbidden, 404 not_found,
409 every domain code. A route answers only its `x-error-codes` (`routes.ROUTES`); anything
else is a bug and becomes a logged 500 with a generic body, never a client-input failure."""

from __future__ import annotations

import base64
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..core.errors import LogError
from ..store.records import NotFound
from . import _bodies, limits
from .errors import ApiError, BadParameter, invalid
from .principal import Principal

log = logging.getLogger("threads_aws.host")

STATUS = {"invalid_request": 400, "unauthenticated": 401, "forbidden": 403, "not_found": 404}
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_CALL_ID = re.compile(r"[A-Za-z0-9_.-]{1,128}")
JSON = "application/json"
# The generated validators say "must be valid exactly by one definition" for a oneOf, which
# tells a caller nothing: name the alternatives instead.
_ONE_OF_RULE = "must be valid exactly by one definition"
_ONE_OF = {
    ("StartRunRequest", ".input"): "must be a non-empty string or a non-empty array of input parts",
    ("Answer", ".answer"): "must be a non-empty string or a non-empty array of strings",
}


def status_of(code: str) -> int:
    return STATUS.get(code, 409)


def response(status: int, body: Any = None, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
    h = {"Content-Type": JSON}
    if headers:
        h.update(headers)
    return {
        "statusCode": status,
        "headers": h,
        "body": "" if body is None else orjson.dumps(body).decode(),
        "isBase64Encoded": False,
    }


def raw_response(status: int, body: bytes, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A response whose JSON body is already serialised (`paging` measures it as it builds it)."""
    return {
        "statusCode": status,
        "headers": {"Content-Type": JSON, **(headers or {})},
        "body": body.decode(),
        "isBase64Encoded": False,
    }


def error_response(code: str, message: str) -> dict[str, Any]:
    return response(status_of(code), {"error": {"code": code, "message": message}})


@dataclass
class Request:
    """The parts of a proxy event a route reads. `principal` comes from the authorizer context."""

    principal: Principal | None
    path: dict[str, str]
    query: dict[str, str]
    headers: dict[str, str]  # lower-cased names
    body: bytes | None
    raw: dict[str, Any] = field(repr=False, default_factory=dict)
    parsed: Any = field(repr=False, default=None)  # the body once `json` parsed it
    remaining_ms: int | None = None  # the invocation's time left (its Lambda context), if known

    @classmethod
    def of(cls, event: Mapping[str, Any], context: Any = None) -> Request:
        ctx = (event.get("requestContext") or {}).get("authorizer") or {}
        remaining = getattr(context, "get_remaining_time_in_millis", None)
        body = event.get("body")
        raw_body: bytes | None = None
        if body is not None:
            if event.get("isBase64Encoded"):
                try:
                    raw_body = base64.b64decode(body, validate=True)
                except ValueError:
                    raise invalid("body is not valid base64") from None
            else:
                raw_body = body.encode() if isinstance(body, str) else bytes(body)
        return cls(
            principal=Principal.from_mapping(ctx),
            path=dict(event.get("pathParameters") or {}),
            query=dict(event.get("queryStringParameters") or {}),
            headers={k.lower(): v for k, v in (event.get("headers") or {}).items() if v is not None},
            body=raw_body,
            raw=dict(event),
            remaining_ms=int(remaining()) if callable(remaining) else None,
        )

    # -------------------------------------------------------------- access
    def who(self) -> Principal:
        if self.principal is None:
            raise ApiError("unauthenticated", "no authenticated principal")
        why = self.principal.too_long()
        if why is not None:  # an authorizer that minted what no key can hold
            raise ApiError("forbidden", why)
        return self.principal

    def uuid_param(self, name: str, *, where: str = "path", required: bool = True) -> str | None:
        src = self.path if where == "path" else self.query
        v = src.get(name)
        if v is None:
            if required:
                raise invalid(f"{where} parameter {name} is required")
            return None
        if not _UUID.fullmatch(v):
            raise invalid(f"{where} parameter {name} must be a lowercase UUID")
        return v

    @property
    def thread_id(self) -> str:
        v = self.uuid_param("thread_id")
        assert v is not None
        return v

    @property
    def branch_id(self) -> str | None:
        return self.uuid_param("branch_id", where="query", required=False)

    def call_id(self, name: str = "call_id") -> str:
        v = self.path.get(name, "")
        if not _CALL_ID.fullmatch(v):
            raise invalid(f"path parameter {name} must match ^[A-Za-z0-9_.-]{{1,128}}$")
        return v

    def text_param(self, name: str) -> str:
        v = self.path.get(name) or ""
        if not v:
            raise invalid(f"path parameter {name} is required")
        return v

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    def json(self, schema: str) -> dict[str, Any]:
        """The body parsed as JSON and validated against components.schemas[schema]; a failure
        is invalid_request naming the field (`body.input must be ...`)."""
        if not self.body:
            raise invalid("a JSON body is required")
        value = self.parsed = limits.parse_body(self.body)
        try:
            _bodies.BODY_VALIDATORS[schema](value)
        except _bodies.SchemaError as exc:
            rule = _ONE_OF.get((schema, exc.path), exc.rule) if exc.rule == _ONE_OF_RULE else exc.rule
            raise invalid("body" + exc.path + " " + rule) from None
        if not isinstance(value, dict):  # every body schema is an object; keep mypy honest
            raise invalid("body must be an object")
        return value


def dispatch(
    event: Mapping[str, Any],
    codes: frozenset[str],
    call: Callable[[Request], dict[str, Any]],
    context: Any = None,
) -> dict[str, Any]:
    """Run `call` on the parsed request and map typed failures to this route's error bodies.
    A line the writer refused because of the body (`invalid_line`: too large or too deep to
    record) is the body's `invalid_request`, naming the field (`limits.blame`)."""
    req: Request | None = None
    exc_seen: Exception | None = None
    try:
        req = Request.of(event, context)
        return call(req)
    except ApiError as exc:
        code, message, exc_seen = exc.code, exc.message, exc
    except LogError as exc:
        named = limits.blame(req.parsed, exc) if req is not None else None
        code, message = (named.code, named.message) if named is not None else (exc.code, exc.message)
    except NotFound as exc:
        code, message = "not_found", str(exc) or "not found"
    except Exception:  # noqa: BLE001 - the catch-all: logged, generic to the caller
        log.exception("unhandled error")
        return response(500, {"error": {"code": "internal", "message": "internal error"}})
    if code == "invalid_request" and code not in codes:
        # A malformed id on a route without invalid_request names nothing that exists; a query
        # parameter (or Last-Event-ID) the route refuses is the nearest code the route declares
        # that does not claim the thread is gone: 403, "understood and refused", with the
        # parameter named in the message (RFC 9110 §15.5.4).
        code = "forbidden" if isinstance(exc_seen, BadParameter) else "not_found"
    if code not in codes:
        log.error("route answered %s, which is not among its x-error-codes: %s", code, message)
        return response(500, {"error": {"code": "internal", "message": "internal error"}})
    return error_response(code, message)
