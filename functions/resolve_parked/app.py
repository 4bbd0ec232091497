"""POST /v1/threads/{thread_id}/parked/{effect_key}/resolve: settle an unknown effect."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from threads_aws.host.runtime import api

logger = Logger()


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return api(event, "resolveParked")
