"""`validate_next` and `reduce` as one incremental fold over a resolved chain.

A `Fold` holds exactly the state the semantic rules (semantics.md §3, rules 1-30) and the
ReducedState need. `apply` checks one parsed event against that state and then advances it, so
import, writers and recovery share one decision procedure, and reducing a log is the same walk
that verified it. Rules 14-15 (request bytes) need artifacts and live in `render.verify_requests`.

The fold is also the branch's derived state, so nobody rescans the log for it: the pinned agent
config (`started`), the current settings epoch (`settings`), the thread's permission rules, the
mode, the latest turn (`turn`: its opener, last model event, pauses, steer, stop_when_idle), each
call's effect history and each challenge's decision, and event_id → seq (`seq_of`). Every update
is O(1) per event: the fold is the import-time validator too.

The rules are grouped by concern in mixins over `FoldState` (core.fold_state): turns and model
attempts (fold_turns), tool calls and effects (fold_calls), approvals and parks (fold_parks), the
thread's configuration (fold_settings), compaction, context and restore points (fold_context), and
other agents (fold_agents). `_HANDLERS` maps each event type to its `_on_<type>` rule once, at
import, so `apply` dispatches with one dict lookup.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .fold_agents import AgentRules
from .fold_calls import CallRules
from .fold_context import ContextRules
from .fold_parks import ParkRules
from .fold_settings import SettingsRules
from .fold_state import Call, Challenge, FoldState, Turn, epoch_settings
from .fold_turns import TurnRules

__all__ = ["Call", "Challenge", "Fold", "FoldState", "Turn", "epoch_settings"]


class Fold(TurnRules, CallRules, ParkRules, SettingsRules, ContextRules, AgentRules):
    """Incremental validate_next + reduce state of one resolved chain."""

    __slots__ = ()

    def apply(self, ev: dict[str, Any], *, known: bool = True) -> None:
        """validate_next then advance. `ev` has passed its line schema already."""
        seq = ev["seq"]
        if seq != self.head_seq + 1:
            raise self._bad(seq, f"expected seq {self.head_seq + 1}", "seq_mismatch")
        if self.thread_id is not None and ev["thread_id"] != self.thread_id:
            raise self._bad(seq, "thread_id differs from the chain's")  # rule 4
        if self.branch_id is not None and ev["branch_id"] != self.branch_id:
            raise self._bad(seq, "branch_id differs from its segment header")  # rule 4
        # The envelope rules (1, 4, 6, 28) are chain-wide and hold for unknown events too; only
        # the per-type rules below skip them (inferred).
        if ev["epoch"] < self.epoch:
            raise self._bad(seq, "epoch decreased")  # rule 6
        if ev["event_id"] in self.seq_of:
            raise self._bad(seq, "event_id repeats along the resolved chain")  # rule 28
        if known:
            handler = _HANDLERS.get(ev["type"])
            if handler is not None:
                handler(self, ev, seq, ev["data"])
            self.last_known_seq = seq
        self.seq_of[ev["event_id"]] = seq
        self.events.append(ev)
        self.known.append(known)
        self.head_seq = seq
        self.epoch = ev["epoch"]
        self.boundary_after[seq] = not self.pending and not self.awaiting

    def begin_segment(self, thread_id: str, branch_id: str) -> None:
        if self.thread_id is None:
            self.thread_id = thread_id
        self.branch_id = branch_id
        self.own_fork_reason = None

    # ------------------------------------------------------------- reduce
    def status(self) -> str:
        if self.own_fork_reason == "repair":
            return "inspection_only"
        if self.cancelled_final:
            return "cancelled"
        if self.parked:
            return "parked"
        if self.turn_open:
            return "in_turn"
        return "idle"

    def fork_points(self) -> list[dict[str, Any]]:
        out = []
        for seq, (quiet, expires, event_id) in sorted(self.snapshots.items()):
            if quiet and (expires is None or self.now is None or expires > self.now):
                out.append({"seq": seq, "snapshot_event_id": event_id})
        return out

    def known_events(self) -> list[dict[str, Any]]:
        return [e for e, k in zip(self.events, self.known, strict=True) if k]


Handler = Callable[[Fold, dict[str, Any], int, dict[str, Any]], None]


def _handlers(cls: type) -> dict[str, Handler]:
    """event type -> its `_on_<type>` rule, from every rule mixin of `cls`. One type has one
    rule: a second definition would shadow the first by MRO order, so it is refused here."""
    table: dict[str, Handler] = {}
    for klass in cls.__mro__:
        for name, fn in vars(klass).items():
            if not name.startswith("_on_"):
                continue
            if name[4:] in table:
                raise TypeError(f"{name} is defined by more than one of {cls.__name__}'s rule mixins")
            table[name[4:]] = fn
    return table


_HANDLERS = _handlers(Fold)
