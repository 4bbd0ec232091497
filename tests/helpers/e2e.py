"""A `threads-aws dev` subprocess as the end-to-end tests drive it: `Dev` is the one dev-process
helper (`helpers.dev_process`) under their names: `start` a run, `stream` its SSE windows,
`hook_dir` for the files their preloaded hooks read and write."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers.dev_process import ALICE, REPO, STREAM_DEADLINE_S, DevProcess, dev_process

__all__ = ["ALICE", "DEADLINE_S", "MALLORY", "REPO", "TEMPLATE", "Dev", "dev", "types"]

TEMPLATE = Path(os.environ.get("THREADS_E2E_TEMPLATE") or REPO / "template.yaml")
MALLORY = "dev:api:other:mallory"  # another tenant
DEADLINE_S = STREAM_DEADLINE_S
# Short SSE windows so resubscription (Last-Event-ID) is exercised and tests stay fast.
SHORT_WINDOWS = {"SSE_WAIT_MS": "1500", "SSE_POLL_MS": "50", "SSE_RETRY_MS": "100"}


@dataclass
class Dev(DevProcess):
    call_timeout: float = 30

    @property
    def hook_dir(self) -> Path:
        return self.dir

    def start(self, text: str, **extra: Any) -> dict[str, str]:
        return self.start_run(text, **extra)


@contextmanager
def dev(
    tmp: Path, env: dict[str, str] | None = None, args: list[str] | None = None, **kw: Any
) -> Iterator[Dev]:
    """The e2e host: the repo's template (or $THREADS_E2E_TEMPLATE), short SSE windows."""
    with dev_process(
        tmp, {**SHORT_WINDOWS, **(env or {})}, ["--template", str(TEMPLATE), *(args or [])], cls=Dev, **kw
    ) as d:
        yield d


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]
