"""PATCH /v1/threads/{thread_id} (ours): a thread's title and metadata."""

from __future__ import annotations

from typing import Any

from threads_aws.host.runtime import api
from threads_aws.observability import entry


@entry("api")
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return api(event, "updateThread")
