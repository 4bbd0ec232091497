"""Executors of the built-in tools (specs, incl. effect class: `config.builtin_tools.BUILTIN_TOOLS`).

- `time` (read_only): the injected clock as ISO 8601 UTC.
- `todo_write` (read_only): echoes the list; the worker also appends `todos_updated`.
- `ask_user`: never executes; the worker parks `awaiting_input`.
- `note` (idempotent, effectful): stores the note (`store.notes`, at most `TEXT_MAX` bytes: a
  longer one is an error result, stored nowhere) keyed by its effect key, the
  idempotency key: a re-dispatch (same key, attempt+1) finds the stored note and returns the
  same result, so a note is never stored twice.

An executor raises `ToolUncertain` when it cannot know whether its effect happened (timeout,
transport error after sending): the worker records `effect_unknown` and parks, never an error
result; `ToolNotSent` when it knows the request never left (settled `not_sent`). Any other
failure it reports as `ToolOutput(is_error=True)`. An executor may also have `reconcile(args, tc)`
(a `reconcilable` tool): the earlier attempt's result with finality, or None if it never ran.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..store.notes import TEXT_MAX, Note
from ..store.protocol import Stores


@dataclass(frozen=True)
class ToolOutput:
    text: str
    is_error: bool = False
    receipt: str | None = None  # the effect_commit's provider_receipt (workspace writes)
    # read-only tools only: `injected` data appended after the result (recalled memories),
    # each with the principal it belongs to (its actor's)
    injected: tuple[tuple[dict[str, Any], dict[str, Any]], ...] = ()


class ToolUncertain(Exception):
    """The effect's outcome is unknown: `reason` is `timeout` or `transport_error`."""

    def __init__(self, reason: str = "transport_error") -> None:
        super().__init__(reason)
        self.reason = reason


class ToolNotSent(Exception):
    """The request never reached the tool (no connection, or refused before it ran): the effect
    is settled `not_sent` and may be sent again under the same key (`retryable`)."""

    def __init__(self, reason: str, *, retryable: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable


@dataclass(frozen=True)
class ToolContext:
    tenant: str
    thread_id: str
    branch_id: str
    call_id: str
    effect_key: str | None  # None for read_only tools
    attempt: int
    clock: Callable[[], int]
    stores: Stores
    workspace: str | None = None  # the branch's current manifest hash (the fold's)
    principal: dict[str, Any] | None = None  # whom the turn answers (`Turn.principal`): memory's owner


Executor = Callable[[dict[str, Any], ToolContext], ToolOutput]


def run_time(args: dict[str, Any], tc: ToolContext) -> ToolOutput:
    now = datetime.fromtimestamp(tc.clock() / 1000, tz=UTC)
    return ToolOutput(now.isoformat(timespec="milliseconds").replace("+00:00", "Z"))


def run_todo_write(args: dict[str, Any], tc: ToolContext) -> ToolOutput:
    todos = args.get("todos") or []
    return ToolOutput(f"todo list updated ({len(todos)} items)")


def run_note(args: dict[str, Any], tc: ToolContext) -> ToolOutput:
    assert tc.effect_key is not None
    text = str(args.get("text", ""))
    size = len(text.encode("utf-8"))
    if size > TEXT_MAX:  # one DynamoDB item holds a note: refused here, not by a failing put
        return ToolOutput(f"note not stored: {size} bytes, over the {TEXT_MAX}-byte limit", is_error=True)
    note = Note(
        tenant=tc.tenant,
        effect_key=tc.effect_key,
        text=text,
        thread_id=tc.thread_id,
        branch_id=tc.branch_id,
        call_id=tc.call_id,
        created_at=tc.clock(),
    )
    try:
        n = tc.stores.notes.store(note)
    except Exception as exc:  # the put may or may not have landed
        raise ToolUncertain("transport_error") from exc
    return ToolOutput(f"stored note {n}")


MAX_LATER_MS = 600_000


def run_later(args: dict[str, Any], tc: ToolContext) -> ToolOutput:
    """The demo's deferred tool (declared `deferred` by the demo agent, so the deferred runner
    runs it off the turn): it takes `delay_ms`, then answers its text."""
    import time

    delay = args.get("delay_ms", 3000)
    time.sleep(max(0, min(int(delay) if isinstance(delay, int) else 0, MAX_LATER_MS)) / 1000)
    return ToolOutput(f"later: {args.get('text', '')}")


# ask_user has no executor: the worker parks on it.
BUILTIN_EXECUTORS: dict[str, Executor] = {
    "time": run_time,
    "todo_write": run_todo_write,
    "note": run_note,
    "later": run_later,
}
