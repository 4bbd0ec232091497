"""policy.retry's defaults, apart from `engine.retry` so the agents file loader (every
handler's import) reads them without importing the fold."""

from __future__ import annotations

from typing import Any

#: policy.retry when thread_started.policy has no `retry` section (the contract's ADR defaults
#: are not in our sources; these are ours, chosen like the SDKs' own: a few quick retries, a
#: provider's retry-after honoured up to a minute, two minutes of waiting per turn at most).
DEFAULTS: dict[str, Any] = {
    "base_delay_ms": 1_000,
    "crash_resends": 1,
    "fallback_after": 2,
    "fallback_scope": "turn",
    "heartbeat_ms": 20_000,
    "max_delay_ms": 30_000,
    "max_retries": 3,
    "max_retry_after_ms": 60_000,
    "max_total_wait_ms": 120_000,
}
