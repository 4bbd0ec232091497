"""Run-step worker: SQS FIFO batch of "advance branch X" messages (partial batch failures)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from threads_aws import services
from threads_aws.engine.queue import handle_batch

logger = Logger()


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    # services.current(): once per container (clients, stores, the writer's view cache)
    return handle_batch(event, context, engine=services.current().engine())
