"""`reduce`: the normative ReducedState of a resolved chain (conformance README, ReducedState)."""

from __future__ import annotations

from typing import Any

from .fold import Fold


def reduce(fold: Fold, head_hash: str) -> dict[str, Any]:
    """ReducedState from a fold that has verified the chain. `head_hash` is the sha256 of the
    branch's last line (the fold never sees bytes)."""
    from .render import transcript  # render imports nothing from here; keep import order simple

    return {
        "thread_id": fold.thread_id,
        "branch_id": fold.branch_id,
        "head": {"seq": fold.head_seq, "hash": head_hash},
        "epoch": fold.epoch,
        "status": fold.status(),
        "turns_completed": fold.turns_completed,
        "pending_calls": list(fold.pending),
        "effects": [dict(e) for e in fold.effects.values()],
        "parked": [dict(p) for p in fold.parked.values()],
        "fork_points": fold.fork_points(),
        "usage": {
            "input_tokens": fold.usage_in,
            "output_tokens": fold.usage_out,
            "unknown_responses": fold.usage_unknown,
        },
        "transcript": transcript(fold.known_events()),
    }
