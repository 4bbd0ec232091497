"""Deferred-call runner: SQS batch of deferred tool calls (engine/deferred_runner.py), each run
off its turn and recorded as tool_result_late (partial batch failures)."""

from __future__ import annotations

from typing import Any

from threads_aws import services
from threads_aws.engine.deferred_runner import handle_batch
from threads_aws.observability import entry


@entry("sqs")
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return handle_batch(event, context, engine=services.current().engine())
