"""Run-step worker: SQS FIFO batch of "advance branch X" messages (partial batch failures)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from threads_aws.engine.queue import handle_batch
from threads_aws.engine.step import EngineContext

logger = Logger()
_engine: EngineContext | None = None  # once per container: clients, stores, the writer's view cache


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    global _engine
    if _engine is None:
        _engine = EngineContext.from_env()
    return handle_batch(event, context, engine=_engine)
