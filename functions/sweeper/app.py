"""The sweeper on a schedule (template.yaml `SweepSchedule`): one pass of `threads_aws.sweeper`
(retention, deleted threads' last rows, S3 objects no live thread references)."""

from __future__ import annotations

from typing import Any

from threads_aws import services
from threads_aws.observability import entry, logger
from threads_aws.sweeper import run_pass, summary


@entry("event")
def handler(event: dict[str, Any], context: Any) -> dict[str, int]:
    done = summary(run_pass(services.current()))
    logger.info("sweep", extra=done)
    return done
