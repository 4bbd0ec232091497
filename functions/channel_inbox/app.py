"""Channel inbox consumer: SQS FIFO batch of "apply thread T's inbox" wake-ups (partial batch
failures for the threads whose items must wait)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from threads_aws import services
from threads_aws.channels.consumer import handle_batch

logger = Logger()


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return handle_batch(event, services.current())
