"""Per-container wiring: the entry points the functions' `app.handler`s call, over this
container's `services.current()` (built lazily from the environment: template.yaml's
EVENTS_TABLE, STATE_TABLE, ARTIFACTS_BUCKET, RUN_STEP_QUEUE_URL; AGENTS_FILE optional). Building
lazily keeps cold imports small and lets tests and the local gateway point the environment at
moto first."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .. import observability, services
from .http import dispatch, error_response, response

if TYPE_CHECKING:  # the Host graph loads with the first request (`services.host()`), never at import:
    # the authorizer, the 405 route and /openapi.json never need it (tests/test_cold_import_modules.py)
    from .keys import ApiKeys
    from .service import Host


def host() -> Host:
    return services.current().host()


def keys() -> ApiKeys:
    return services.current().api_keys()


def reset() -> None:
    """Forget the cached services (tests that re-point the environment)."""
    services.reset()


def api(event: Mapping[str, Any], operation: str, context: Any = None) -> dict[str, Any]:
    """A route's whole handler: parse, call Host, map the result or failure. `context` (the
    Lambda context) lets a route bound its work by the invocation's time left."""
    from .routes import ROUTES

    codes, call = ROUTES[operation]
    out = dispatch(event, codes, lambda req: call(host(), req), context)
    if operation == "startRun" and out["statusCode"] == 202:
        observability.run_accepted(out["body"])
    return out


def authorize(event: Mapping[str, Any]) -> dict[str, Any]:
    from .auth import authorize as _authorize

    return _authorize(event, keys())


def method_not_allowed(event: Mapping[str, Any]) -> dict[str, Any]:
    """A method the served contract does not declare on this path (every /v1 path has an ANY
    route to this; API Gateway prefers a path's declared methods): 405 with the path's methods
    in `Allow` (RFC 9110 15.5.6). Without it API Gateway answers MISSING_AUTHENTICATION_TOKEN,
    which would say the route does not exist. The body is the contract's ErrorBody: the method
    and path together name no route (`not_found`)."""
    path = str(event.get("resource") or event.get("path") or "")
    allow = ", ".join(_methods().get(path, ()))
    message = f"{event.get('httpMethod')} is not a method of {path} (Allow: {allow})"
    return response(405, {"error": {"code": "not_found", "message": message}}, {"Allow": allow})


@functools.cache
def _methods() -> dict[str, tuple[str, ...]]:
    """Each path of the served contract: its declared methods (upper case, sorted)."""
    doc = json.loads(openapi()["body"])
    methods = {"get", "put", "post", "delete", "options", "head", "patch", "trace", "query"}
    return {p: tuple(sorted(m.upper() for m in item if m in methods)) for p, item in doc["paths"].items()}


def openapi() -> dict[str, Any]:
    """GET /openapi.json: the contract this host serves (packaged with the layer)."""
    from importlib import resources

    body = resources.files(__package__).joinpath("openapi.json").read_text()
    return {
        "statusCode": 200,
        "headers": {"Content-Type": "application/json"},
        "body": body,
        "isBase64Encoded": False,
    }


__all__ = ["api", "authorize", "error_response", "host", "keys", "method_not_allowed", "openapi", "reset"]
