"""The Lambda REQUEST authorizer: `Authorization: Bearer <token>` → Principal{issuer, tenant,
subject} in the authorizer context (`requestContext.authorizer` of the routes' events).

No token, a malformed header, an unknown or revoked key: `Unauthorized`, which API Gateway
answers 401 with the GatewayResponse body `{"error":{"code":"unauthenticated",...}}`
(template.yaml). Dev mode (env THREADS_DEV_TOKENS=1, local work and tests only, never set in
template.yaml) also accepts `dev:<issuer>:<tenant>:<subject>`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .keys import ApiKeys
from .principal import Principal


class Unauthorized(Exception):
    """API Gateway maps an authorizer raising exactly 'Unauthorized' to a 401."""

    def __init__(self) -> None:
        super().__init__("Unauthorized")


def dev_tokens_enabled(environ: Mapping[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    return env.get("THREADS_DEV_TOKENS") == "1"


def bearer(headers: Mapping[str, Any] | None) -> str | None:
    for name, value in (headers or {}).items():
        if name.lower() == "authorization" and isinstance(value, str):
            scheme, _, token = value.strip().partition(" ")
            token = token.strip()
            if scheme.lower() == "bearer" and token:
                return token
    return None


def dev_principal(token: str) -> Principal | None:
    parts = token.split(":")
    if len(parts) != 4 or parts[0] != "dev" or not all(parts[1:]):
        return None
    principal = Principal(parts[1], parts[2], parts[3])
    return None if principal.too_long() else principal


def authenticate(headers: Mapping[str, Any] | None, keys: ApiKeys, *, dev: bool = False) -> Principal:
    token = bearer(headers)
    if token is None:
        raise Unauthorized()
    if dev and token.startswith("dev:"):
        principal = dev_principal(token)
        if principal is not None:
            return principal
    principal = keys.lookup(token)
    if principal is None:
        raise Unauthorized()
    return principal


def policy(principal: Principal, method_arn: str) -> dict[str, Any]:
    """Allow the whole API for this principal (`<api>/<stage>/*`), so API Gateway's
    authorizer cache, keyed by the Authorization header, serves every route."""
    arn = method_arn
    parts = method_arn.split("/")
    if len(parts) >= 2:
        arn = "/".join(parts[:2]) + "/*"
    return {
        "principalId": principal.key,
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [{"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": arn}],
        },
        "context": principal.as_dict(),
    }


def authorize(event: Mapping[str, Any], keys: ApiKeys, *, dev: bool | None = None) -> dict[str, Any]:
    principal = authenticate(event.get("headers"), keys, dev=dev_tokens_enabled() if dev is None else dev)
    return policy(principal, str(event.get("methodArn", "")))
