"""GET /openapi.json: the contract this host serves (no authorizer)."""

from __future__ import annotations

from typing import Any

from threads_aws.host.runtime import openapi
from threads_aws.observability import entry


@entry("api")
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return openapi()
