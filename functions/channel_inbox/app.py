"""Channel inbox consumer: SQS FIFO batch of "apply thread T's inbox" wake-ups (partial batch
failures for the threads whose items must wait)."""

from __future__ import annotations

from typing import Any

from threads_aws import services
from threads_aws.channels.consumer import handle_batch
from threads_aws.observability import entry


@entry("sqs")
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return handle_batch(event, services.current())
