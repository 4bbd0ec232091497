"""The deployed resources by role: the table, bucket and queue names a function reads from its
environment (template.yaml's Globals), and the logical ids of template.yaml that hold them."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# Logical ids of template.yaml the runtime knows by role.
ROLES = {
    "events_table": "EventsTable",
    "state_table": "StateTable",
    "bucket": "ArtifactsBucket",
    "run_step_queue_url": "RunStepQueue",
    "inbox_queue_url": "ChannelInboxQueue",
    "run_step_dlq_url": "RunStepDLQ",
    "inbox_dlq_url": "ChannelInboxDLQ",
    "run_step_timer_url": "RunStepTimerQueue",
    "deferred_call_url": "DeferredCallQueue",
}
ENV = {
    "events_table": "EVENTS_TABLE",
    "state_table": "STATE_TABLE",
    "bucket": "ARTIFACTS_BUCKET",
    "run_step_queue_url": "RUN_STEP_QUEUE_URL",
    "inbox_queue_url": "CHANNEL_INBOX_QUEUE_URL",
}
# Read when set (only the worker has them).
OPTIONAL_ENV = {
    "run_step_timer_url": "RUN_STEP_TIMER_QUEUE_URL",
    "deferred_call_url": "DEFERRED_CALL_QUEUE_URL",
}


@dataclass(frozen=True)
class ResourceNames:
    events_table: str
    state_table: str
    bucket: str
    run_step_queue_url: str
    inbox_queue_url: str
    run_step_dlq_url: str | None = None
    inbox_dlq_url: str | None = None
    run_step_timer_url: str | None = None
    deferred_call_url: str | None = None
    physical: Mapping[str, str] = field(default_factory=dict)  # logical id -> name / queue url

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ResourceNames:
        env = os.environ if environ is None else environ
        missing = [v for v in ENV.values() if not env.get(v)]
        if missing:
            raise KeyError(f"missing environment variables: {', '.join(missing)}")
        values: dict[str, Any] = {attr: env[var] for attr, var in ENV.items()}
        values.update({attr: env[var] for attr, var in OPTIONAL_ENV.items() if env.get(var)})
        return cls(**values)

    def env(self) -> dict[str, str]:
        """The environment variables a function reads (inverse of from_env)."""
        out = {var: getattr(self, attr) for attr, var in ENV.items()}
        out.update({var: getattr(self, attr) for attr, var in OPTIONAL_ENV.items() if getattr(self, attr)})
        return out
