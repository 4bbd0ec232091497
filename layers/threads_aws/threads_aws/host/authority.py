"""Who may decide on a branch (semantics.md §5).

- Approvals and parked-effect resolutions: the ROOT run's approver set, i.e. the root agent's
  configured approvers (when the deployed agent still has the pinned config_hash), else the
  root thread's latest user_input principal; principals compare by issuer, tenant, subject. A
  child thread reaches its root through `thread_started.parent` (at most 16 hops).
- Questions: only the principal who opened the turn may answer.
"""

from __future__ import annotations

from ..core.fold import Fold
from ..writer import View
from .base import HostBase
from .errors import ApiError
from .principal import Principal

MAX_DEPTH = 16


def opened_turn(principal: Principal, fold: Fold) -> bool:
    opener = fold.turn.opener
    return opener is not None and principal.same(opener["actor"].get("principal"))


class Authority(HostBase):
    def _require_authority(self, principal: Principal, view: View) -> None:
        if not self._has_authority(principal, view):
            raise ApiError("forbidden", "no approval authority under the root run's approver set")

    def _has_authority(self, principal: Principal, view: View) -> bool:
        fold = self._root_fold(principal, view.fold)
        if fold is None:
            return False
        started = fold.started
        if started is not None:
            agent = self.agents.get(started.get("agent_name", ""))
            if agent is not None and agent.config_hash == started.get("config_hash") and agent.approvers:
                return any(principal.same(a) for a in agent.approvers)
        return opened_turn(principal, fold)

    def _root_fold(self, principal: Principal, fold: Fold) -> Fold | None:
        """The fold of the root run's branch: each `thread_started.parent` names the parent
        thread AND the branch holding the event that created the child (agent_spawned or
        handoff), so a child of a forked branch answers to that branch's run. None if a parent
        is not this tenant's."""
        for _ in range(MAX_DEPTH):
            parent = (fold.started or {}).get("parent") or {}
            parent_tid = parent.get("thread_id") if isinstance(parent, dict) else None
            if not parent_tid:
                break
            rec = self.index.branch_of(principal.tenant, parent_tid, str(parent.get("branch_id")))
            if rec is None:
                return None
            with self._lock:
                fold = self.writer.load(rec.branch_id).fold
        return fold
