"""Wake a branch: one "advance branch X" message on the run-step FIFO queue, sent with the
worker's own `engine.queue.enqueue_step`, so producer and consumer share one message format.
A duplicate wake is harmless: the worker decides from the log and finds nothing to do."""

from __future__ import annotations

from typing import Any


def enqueue_step(sqs: Any, queue_url: str, branch_id: str, *, reason: str) -> None:
    from ..engine.queue import enqueue_step as _enqueue  # lazily: keeps the handlers' cold import small

    _enqueue(sqs, queue_url, branch_id, reason=reason)
