"""POST /v1/threads/{thread_id}/redactions (ours): forget a span of a tool result (context_edited{manual} redact)."""

from __future__ import annotations

from typing import Any

from threads_aws.host.runtime import api
from threads_aws.observability import entry


@entry("api")
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return api(event, "redactResult")
