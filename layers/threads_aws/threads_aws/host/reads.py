"""Reads: a branch's timeline, a thread's branches and its open approvals. They only read the
log (through the cached view, under the host lock: `base`) and the approvals rows."""

from __future__ import annotations

from typing import Any

from .base import HIDDEN, NOT_RUNNABLE, HostBase
from .forks import eligible_snapshots
from .principal import Principal


class Reads(HostBase):
    def timeline(self, principal: Principal, thread_id: str, branch_id: str | None) -> dict[str, Any]:
        rec = self._branch(principal, thread_id, branch_id)
        with self._lock:
            fold = self._load(rec).fold
            points = {seq for seq, _ in eligible_snapshots(fold, self.clock())}
            entries = [
                {"event": ev, "fork_point": ev["seq"] in points}
                for ev, known in zip(fold.events, fold.known, strict=True)
                if known
            ]
        return {"thread_id": thread_id, "branch_id": rec.branch_id, "entries": entries}

    def branches(self, principal: Principal, thread_id: str) -> list[dict[str, Any]]:
        self._thread(principal, thread_id)
        out = []
        for rec in self.index.list_branches(principal.tenant, thread_id):
            if rec.state in HIDDEN:
                continue
            info: dict[str, Any] = {
                "branch_id": rec.branch_id,
                "mode": rec.mode,
                "runnable": rec.state not in NOT_RUNNABLE,
            }
            if rec.parent_branch_id is not None:
                info["parent_branch_id"] = rec.parent_branch_id
            if rec.fork_at_seq is not None:
                info["fork_at_seq"] = rec.fork_at_seq
            out.append(info)
        return out

    def pending_approvals(
        self, principal: Principal, thread_id: str, branch_id: str | None
    ) -> list[dict[str, Any]]:
        """The branch's challenges parked on and not yet decided, with their rows (tool, input and
        suggested rules live there; the fold answers for the rest if a row is missing)."""
        rec = self._branch(principal, thread_id, branch_id)
        with self._lock:
            fold = self._load(rec).fold
            open_ = [
                (cid, ch, fold.calls.get(ch.call_id))
                for cid, ch in fold.challenges.items()
                if not ch.consumed and ("approval", cid) in fold.parked
            ]
        out = []
        for cid, ch, call in open_:
            row = self.stores.approvals.get(cid)
            expires = ch.expires_at if ch.expires_at is not None else (row.expires_at if row else 0)
            out.append(
                {
                    "challenge_id": cid,
                    "call_id": ch.call_id,
                    "tool": row.tool if row and row.tool else (call.name if call else "unknown"),
                    "input": row.input if row and not row.input_in_log else (call.input if call else {}),
                    "args_hash": ch.args_hash,
                    "expires_at": expires,
                    "suggested_rules": row.suggested_rules if row else [],
                }
            )
        return out
