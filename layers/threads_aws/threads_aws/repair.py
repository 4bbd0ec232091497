"""Recovery of a torn-tail import: `log_repaired` (semantics.md §1 "Torn tail").

An import whose JSONL ends in an unterminated chunk stores every terminated line, keeps the
dropped bytes as an artifact (the branch row's `dropped_ref`) and leaves the branch
`inspection_only` with `head_verified` false (`store.ingest`). Recovery is this module: under
the branch's lease (so its epoch fences any other holder) it appends
`log_repaired{truncated_bytes, at_offset, dropped_ref}` (actor recovery, non-critical), then
marks the branch `ready` and its head verified: the head is now a line this host wrote and
checked, and the evidence of what was dropped is in the log itself.

Inferred: at_offset is the byte offset of the dropped chunk in the imported export, i.e. the
bytes of the terminated lines before it (the resolved chain's lines as stored, ancestors included),
when the caller does not pass the importer's own figure.

Ordering: append, then the state change. A crash in between leaves a branch whose log already
says `log_repaired` after its imported head; running the recovery again finds it and only
changes the state, so the event is appended once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .core.errors import LogError
from .store.protocol import EventLog
from .store.records import NotFound, wall_ms
from .writer import Draft, Writer

RECOVERY = {"kind": "recovery"}
LEASE_TTL_MS = 60_000


@dataclass(frozen=True, slots=True)
class Repaired:
    seq: int  # the log_repaired event's seq
    appended: bool  # False: an earlier recovery had appended it (only the state moved)
    data: dict[str, Any]


def repair_torn_tail(
    events: EventLog,
    branch_id: str,
    *,
    holder_id: str,
    now: int | None = None,
    at_offset: int | None = None,
) -> Repaired:
    """Append `log_repaired` to an `inspection_only` branch left by a torn-tail import and make
    it `ready`. Raises NotFound, or LogError(`invalid_transition`) for a branch with nothing to
    repair (no dropped tail), or the lease's `branch_busy`."""
    at = wall_ms() if now is None else now
    rec = events.head(branch_id)
    if rec is None:
        raise NotFound(f"branch {branch_id} not found")
    writer = Writer(events, clock=lambda: at)
    view = writer.load(branch_id, record=rec)
    done = _already_repaired(view.fold.events, rec.head_seq)
    if done is not None and rec.state == "ready":
        return Repaired(done["seq"], False, done["data"])
    if rec.state != "inspection_only" or not rec.dropped_ref:
        raise LogError("invalid_transition", None, f"branch {branch_id} has no torn tail to repair")
    dropped = json.loads(rec.dropped_ref)
    lease = events.acquire_lease(branch_id, holder_id, ttl_ms=LEASE_TTL_MS, now_ms=at)
    try:
        if done is None:
            if at_offset is None:
                at_offset = sum(len(line.raw) + 1 for _, line in events.resolved_chain(branch_id, rec=rec))
            data = {"at_offset": at_offset, "dropped_ref": dropped, "truncated_bytes": dropped["bytes"]}
            _, lines = writer.append(
                branch_id, [Draft("log_repaired", data, RECOVERY)], epoch=lease.epoch, view=view, now=at
            )
            done = {"seq": lines[0].seq, "data": data}
            appended = True
        else:
            appended = False
        events.set_state(branch_id, "ready", expected_state="inspection_only", head_verified=True)
    finally:
        try:
            events.release(branch_id, lease)
        except Exception:  # noqa: BLE001 - the lease lapses by itself
            pass
    return Repaired(done["seq"], appended, done["data"])


def _already_repaired(evs: list[dict[str, Any]], head_seq: int) -> dict[str, Any] | None:
    """The branch's last event, when it is a recovery's log_repaired (the crash-between case)."""
    last = evs[-1] if evs else None
    if last is not None and last["seq"] == head_seq and last["type"] == "log_repaired":
        return last
    return None
