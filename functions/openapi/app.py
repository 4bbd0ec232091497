"""GET /openapi.json: the contract this host serves (no authorizer)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from threads_aws.host.runtime import openapi

logger = Logger()


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return openapi()
