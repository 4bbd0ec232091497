"""WhatsApp webhook on a Lambda function URL: /channels/{channel}/events of the whatsapp channels."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from threads_aws.channels.webhook import webhook

logger = Logger()


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return webhook(event, "whatsapp")
