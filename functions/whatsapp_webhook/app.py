"""WhatsApp webhook on a Lambda function URL: /channels/{channel}/events of the whatsapp channels."""

from __future__ import annotations

from typing import Any

from threads_aws.channels.webhook import webhook
from threads_aws.observability import entry


@entry("api")
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return webhook(event, "whatsapp")
