"""Stub mode (semantics.md §6 "`stub` mode"): a `mode: stub` fork where no mediated external
operation goes live.

- The recordings: at fork time, every external operation the parent's chain settled after the
  fork point (what the parent did next from the same state), in call order, as the conformance
  `StubScript` shape `{stubs: [{tool, args_hash, occurrence, output, is_error}]}` with
  `args_hash` = sha256(JCS(input)) and `occurrence` counting earlier recordings of the same
  `(tool, args_hash)`. Stored once as a content-addressed artifact; the child's branch record
  names it (`BranchRecord.stubs_sha256`, which is also what makes its BranchInfo `mode: stub`).
  Freezing them at fork time keeps the child deterministic while the parent goes on.
- Matching (`match`): the child's k-th invocation of `(tool, args_hash)` (k counted over the
  child's own calls that reached dispatch, from the log: the fold's calls, never a side counter)
  consumes the recording with occurrence k. A match is committed like a dispatch whose answer is
  the recording; nothing runs. A miss fails closed: the effect (begun, durable) is settled
  `not_sent` by the adapter, the call closes `not_executed`, and the turn ends `error`, which the
  run projection reports as `unmatched_external_op` (`core.projections`).
- What is external: every tool but the local built-ins (`LOCAL_TOOLS`): the workspace tools act
  on the child's own copy-on-write workspace (new content-addressed objects and a manifest only
  this branch's log names; exec runs with no network and no AWS access), `time`/`todo_write`
  touch nothing outside the log. Everything else (the `note` row, Lambda and MCP tools, read-only
  ones included: an MCP read still reaches its server) is answered from the recordings. A
  read-only call has no effect events: its match is its `executed` result, a miss closes it
  `not_executed` and ends the turn the same way.
- No sandbox is restored for a stub fork and no resources row is written: nothing is created.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..core.canonical import canonical_bytes, canonical_hash
from ..core.fold import Call, Fold

STUB_SANDBOX_ID = "stub"  # the fork event's sandbox_id: no sandbox was restored
LOCAL_TOOLS = frozenset(
    {
        "time",
        "todo_write",
        "ask_user",
        "read_file",
        "list_files",
        "glob",
        "grep",
        "write_file",
        "edit_file",
        "exec",
    }
)
_CACHE = 64
_loaded: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()


def is_external(call: Call) -> bool:
    return call.name not in LOCAL_TOOLS


def _settled_output(fold: Fold, call: Call, artifacts: Any) -> tuple[str, bool] | None:
    """The call's recorded outcome: the result its settlement stored (a commit, or a confirmed
    success), or None if it never took effect (not sent, denied, still open, assumed)."""
    entry = fold.effects.get(call.effect_key)
    if entry is None or entry["status"] not in ("committed", "resolved") or not call.settled_seq:
        return None
    settlement = fold.events[call.settled_seq - 1]["data"]
    if entry["status"] == "resolved" and settlement.get("outcome") != "confirmed_success":
        return None
    ref = settlement.get("result_ref")
    if ref is None:
        return None
    body = json.loads(artifacts.get_ref(ref))
    return str(body.get("text", "")), bool(body.get("is_error", False))


def _read_results(fold: Fold, after_seq: int) -> dict[str, tuple[str, bool]]:
    """The `executed` results after `after_seq`, by call_id (a read-only call's recording)."""
    return {
        ev["data"]["call_id"]: (str(ev["data"]["preview"]), bool(ev["data"]["is_error"]))
        for ev in fold.events[after_seq:]
        if ev["type"] == "tool_result" and ev["data"].get("origin") == "executed"
    }


def recordings(fold: Fold, after_seq: int, artifacts: Any) -> list[dict[str, Any]]:
    """The stubs of the external operations `fold`'s chain settled after `after_seq`."""
    seen: dict[tuple[str, str], int] = {}
    out: list[dict[str, Any]] = []
    reads = _read_results(fold, after_seq)
    for call in sorted(fold.calls.values(), key=lambda c: c.seq):
        if call.seq <= after_seq or not is_external(call):
            continue
        if call.effect_class == "read_only":
            settled = reads.get(call.call_id)
        else:
            settled = _settled_output(fold, call, artifacts)
        if settled is None:
            continue
        key = (call.name, canonical_hash(call.input))
        occurrence = seen.get(key, 0)
        seen[key] = occurrence + 1
        text, is_error = settled
        out.append(
            {
                "args_hash": key[1],
                "is_error": is_error,
                "occurrence": occurrence,
                "output": text,
                "tool": key[0],
            }
        )
    return out


def store_recordings(stubs: list[dict[str, Any]], artifacts: Any) -> str:
    """Put the recordings (JCS of the StubScript) once; returns their sha256."""
    ref = artifacts.put(canonical_bytes({"stubs": stubs}), "application/json")
    return str(ref["sha256"])


def load(artifacts: Any, sha256: str) -> list[dict[str, Any]]:
    """A branch's recordings, verified by hash (immutable: cached per process by hash)."""
    stubs = _loaded.get(sha256)
    if stubs is None:
        stubs = list(json.loads(artifacts.get(sha256))["stubs"])
        _loaded[sha256] = stubs
        while len(_loaded) > _CACHE:
            _loaded.popitem(last=False)
    return stubs


def occurrence(fold: Fold, call: Call, args_hash: str) -> int:
    """Earlier invocations of the same (tool, args_hash) on this branch that reached dispatch."""
    return sum(
        1
        for c in _own_dispatched(fold.calls.values(), call)
        if c.name == call.name and canonical_hash(c.input) == args_hash
    )


def _own_dispatched(calls: Iterable[Call], call: Call) -> Iterable[Call]:
    # An effect reached dispatch at its begin (attempt >= 1); a read-only call has no effect
    # events, so it counts once it was answered (`executed`: on this branch only ever from a
    # recording). A miss needn't count either way: occurrences are contiguous, so after a miss
    # at k every later one misses too.
    return (
        c
        for c in calls
        if c.branch_id == call.branch_id
        and c.seq < call.seq
        and (c.attempt >= 1 or (c.effect_class == "read_only" and c.result_origin == "executed"))
    )


@dataclass(frozen=True, slots=True)
class Miss:
    tool: str
    args_hash: str
    occurrence: int

    def message(self) -> str:
        return (
            f"unmatched_external_op: stub mode has no recorded {self.tool} call with args_hash "
            f"{self.args_hash} at occurrence {self.occurrence}; nothing was sent."
        )


def match(stubs: list[dict[str, Any]], fold: Fold, call: Call) -> dict[str, Any] | Miss:
    args_hash = canonical_hash(call.input)
    k = occurrence(fold, call, args_hash)
    for stub in stubs:
        if stub["tool"] == call.name and stub["args_hash"] == args_hash and stub["occurrence"] == k:
            return stub
    return Miss(call.name, args_hash, k)
