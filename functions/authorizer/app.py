"""The REQUEST authorizer of every /v1 route: Bearer API key (hashed in the StateTable) →
Principal in the authorizer context; otherwise Unauthorized (a 401 gateway response)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from threads_aws.host.runtime import authorize

logger = Logger()


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return authorize(event)
