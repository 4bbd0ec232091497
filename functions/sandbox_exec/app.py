"""The exec sandbox: one command over the workspace in the payload, the changed files back
(threads_aws.sandbox.exec_runner). No AWS client, no network: nothing here reaches outside."""

from __future__ import annotations

from typing import Any

from threads_aws.sandbox.exec_runner import run


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return run(event)
