"""Checking recorded requests against Render v1 (semantics §7; conformance README "render").

`verify_requests` is the import's request verification (rule 15 and C7): one `Renderer` walks the
log once and, at each ``model_request``, re-renders from the events before it. The order of the
checks is the contract's, first failure wins: the declared prefix (C7) before the request_ref
artifact before the bytes. `history_prefix_violation` is the separate cache-reuse property (each
turn request a byte prefix of the next unless something excuses it), never a log error.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..canonical import sha256_hex
from ..errors import LogError
from ._events import DENYING, GetArtifact, is_event
from .artifacts import fetch_artifact
from .renderer import Renderer


def verify_requests(events: Iterable[dict[str, Any]], get_artifact: GetArtifact) -> int:
    """Check every model_request in seq order (first failure wins, as LogError):

    1. C7: declared_prefix equals line 0 of its own settings epoch → `prefix_changed`;
    2. its request_ref artifact exists and verifies → `artifact_missing`/`artifact_corrupt`;
    3. the bytes equal Render v1 of the events before it (plus the instruction line for
       `purpose: compaction`) → `request_hash_mismatch`; artifacts of rendered parts fail at the
       seq of the event carrying them.

    Returns the number of requests checked.
    """
    r = Renderer()
    checked = 0
    for ev in events:
        if is_event(ev) and ev["type"] == "model_request":
            seq = ev["seq"]
            data = ev["data"]
            head = r.line0()
            dp = data["declared_prefix"]
            if dp.get("bytes") != len(head) or dp.get("sha256") != sha256_hex(head):
                raise LogError(
                    "prefix_changed", seq, "declared_prefix differs from line 0 of its settings epoch"
                )
            recorded = fetch_artifact(get_artifact, data["request_ref"], seq)
            body = r.request(get_artifact, purpose=data.get("purpose", "turn"))
            if body != recorded:
                raise LogError(
                    "request_hash_mismatch", seq, "request bytes differ from Render v1 of the prior events"
                )
            checked += 1
        r.feed(ev)
    return checked


def history_prefix_violation(
    events: Iterable[dict[str, Any]], get_artifact: GetArtifact
) -> tuple[int, int] | None:
    """The first pair `(seq_a, seq_b)` of consecutive turn requests where the recorded bytes of a
    are not a byte prefix of b's although nothing excuses it, else None.

    Excuses between the two: `compacted`, `context_edited`, `settings_changed`, a denying
    (`deny`/`failed`) `before_input` hook_decision, or a memory injection whose visibility
    changed. Compaction requests are skipped.
    """
    r = Renderer()
    prev: tuple[int, bytes, frozenset[str], frozenset[str]] | None = None
    excused = False
    for ev in events:
        if not is_event(ev):
            continue
        t = ev["type"]
        data = ev["data"]
        if t in ("compacted", "context_edited", "settings_changed"):
            excused = True
        elif t == "hook_decision" and data.get("hook") == "before_input" and data.get("decision") in DENYING:
            excused = True
        elif t == "model_request" and data.get("purpose", "turn") == "turn":
            body = fetch_artifact(get_artifact, data["request_ref"], ev["seq"])
            memories = r.memory_injections()
            hidden = r.hidden_memories()
            if prev is not None and not excused and not body.startswith(prev[1]):
                memory_flip = (hidden & prev[2]) != prev[3]
                if not memory_flip:
                    return (prev[0], ev["seq"])
            prev = (ev["seq"], body, memories, hidden)
            excused = False
        r.feed(ev)
    return None


def history_prefix_holds(events: Iterable[dict[str, Any]], get_artifact: GetArtifact) -> bool:
    return history_prefix_violation(events, get_artifact) is None
