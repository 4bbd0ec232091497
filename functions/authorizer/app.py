"""The REQUEST authorizer of every /v1 route: Bearer API key (hashed in the StateTable) →
Principal in the authorizer context; otherwise Unauthorized (a 401 gateway response)."""

from __future__ import annotations

from typing import Any

from threads_aws.host.runtime import authorize
from threads_aws.observability import entry


@entry("api")
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return authorize(event)
