"""Run-step worker: SQS FIFO batch of "advance branch X" messages (partial batch failures)."""

from __future__ import annotations

from typing import Any

from threads_aws import services
from threads_aws.engine.queue import handle_batch
from threads_aws.observability import entry


@entry("sqs")
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    # services.current(): once per container (clients, stores, the writer's view cache)
    return handle_batch(event, context, engine=services.current().engine())
