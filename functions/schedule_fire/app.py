"""EventBridge Scheduler's target: fire one occurrence of a thread schedule."""

from __future__ import annotations

from typing import Any

from threads_aws import services
from threads_aws.observability import entry
from threads_aws.schedules.fire import handle


@entry("event")
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return handle(event, services.current())
