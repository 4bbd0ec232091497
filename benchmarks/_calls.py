"""AWS calls counted in one process on moto, for the benchmarks that print calls per stage
(`tool_calls.py`, `channel_ack.py`).

`moto_env()` first (before any client is built): moto's in-process mock wants credentials to
sign with, and a set `AWS_ENDPOINT_URL` would send the clients past `mock_aws` to that server.
Then `count_calls(session)` after the resources exist, so their creation is not counted; every
client made from the session afterwards counts each request once, before it is sent (retries by
botocore count again)."""

from __future__ import annotations

import os
from collections import Counter
from typing import Any


def moto_env() -> None:
    for k, v in (
        ("AWS_ACCESS_KEY_ID", "x"),
        ("AWS_SECRET_ACCESS_KEY", "x"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
    ):
        os.environ.setdefault(k, v)
    os.environ.pop("AWS_ENDPOINT_URL", None)


def count_calls(session: Any) -> Counter[str]:
    """A counter of `service.Operation` the session's clients fill (clear it per stage)."""
    counter: Counter[str] = Counter()
    session.events.register(
        "before-call",
        lambda model, **kw: counter.update([f"{model.service_model.service_name}.{model.name}"]),
    )
    return counter


def summary(counter: Counter[str]) -> tuple[int, str]:
    """(total calls, "service.Operation n, ..." sorted) of one stage."""
    return sum(counter.values()), ", ".join(f"{k} {v}" for k, v in sorted(counter.items()))
