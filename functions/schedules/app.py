"""POST/GET /v1/threads/{thread_id}/schedules and DELETE …/schedules/{schedule_id}: a thread's
cron schedules (add-only routes of this host, `x-threads-aws: ours` in the served contract)."""

from __future__ import annotations

from typing import Any

from threads_aws.host.runtime import api
from threads_aws.observability import entry

OPERATIONS = {"POST": "createSchedule", "GET": "listSchedules", "DELETE": "deleteSchedule"}


@entry("api")
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return api(event, OPERATIONS.get(str(event.get("httpMethod")), "listSchedules"))
