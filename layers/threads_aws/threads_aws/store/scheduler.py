"""EventBridge Scheduler: one schedule per thread schedule, whose target is the schedule-fire
function (`functions/schedule_fire`), invoked with ``{schedule_id, tenant, scheduled_for}`` at
each occurrence (``<aws.scheduler.scheduled-time>``, the occurrence's own instant, even on a
late retry). The only module that calls the ``scheduler`` API.

Names: ``threads-<schedule_id>`` in the group ``$SCHEDULE_GROUP`` (default "default"); the target
is ``$SCHEDULE_TARGET_ARN`` with the role ``$SCHEDULER_ROLE_ARN`` (template.yaml: the function
and a role EventBridge Scheduler assumes to invoke it). Without a target (`threads-aws dev`) the
schedule is not created here: the local ticker fires occurrences through the same code.
"""

from __future__ import annotations

import json
import os
from typing import Any

from botocore.exceptions import ClientError

RETRY = {"MaximumEventAgeInSeconds": 86_400, "MaximumRetryAttempts": 185}


class EventBridgeSchedules:
    def __init__(
        self,
        client: Any,
        *,
        target_arn: str | None = None,
        role_arn: str | None = None,
        group: str | None = None,
    ) -> None:
        self.client = client
        self.target_arn = target_arn if target_arn is not None else os.environ.get("SCHEDULE_TARGET_ARN", "")
        self.role_arn = role_arn if role_arn is not None else os.environ.get("SCHEDULER_ROLE_ARN", "")
        self.group = group or os.environ.get("SCHEDULE_GROUP") or "default"

    @property
    def enabled(self) -> bool:
        return bool(self.target_arn and self.role_arn)

    @staticmethod
    def name(schedule_id: str) -> str:
        return f"threads-{schedule_id}"

    def create(self, schedule_id: str, tenant: str, expression: str, timezone: str) -> None:
        if not self.enabled:
            return
        payload = {
            "schedule_id": schedule_id,
            "tenant": tenant,
            "scheduled_for": "<aws.scheduler.scheduled-time>",
        }
        self.client.create_schedule(
            Name=self.name(schedule_id),
            GroupName=self.group,
            ScheduleExpression=expression,
            ScheduleExpressionTimezone=timezone,
            FlexibleTimeWindow={"Mode": "OFF"},
            State="ENABLED",
            Target={
                "Arn": self.target_arn,
                "RoleArn": self.role_arn,
                "Input": json.dumps(payload),
                "RetryPolicy": RETRY,
            },
        )

    def delete(self, schedule_id: str) -> None:
        if not self.enabled:
            return
        try:
            self.client.delete_schedule(Name=self.name(schedule_id), GroupName=self.group)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
                raise
