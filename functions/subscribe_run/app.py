"""GET /v1/threads/{thread_id}/runs/{run_id}/events: one buffered SSE window of a run."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from threads_aws.host.runtime import api

logger = Logger()


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return api(event, "subscribeRun", context)  # the window's wait ends before the timeout
