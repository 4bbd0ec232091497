"""Steer and stop (ours, add-only routes): new input for the open turn, and "stop when idle"
(semantics.md §4 "steer, stop_when_idle, cancel").

- `steer{source: api, text|content}` (actor: the caller) lands only while a turn is open (rule
  12: input during a turn is a steer; it never opens one) and never after a handoff (rule 26);
  the worker renders it as a user line in the next model request.
- `stop_when_idle{reason?}` (actor: the caller): the in-flight attempt, pending calls and
  deferred results finish, nothing new starts, then the turn ends `interrupted`.

Same principal rule as cancel (any principal of the thread's tenant), each one append under the
writer epoch (`base._control`), then a wake. No open turn is `invalid_transition`.
"""

from __future__ import annotations

from typing import Any

from ..core.errors import LogError
from ..writer import Draft, View
from .base import HostBase, user
from .principal import Principal


class Steering(HostBase):
    def steer(
        self, principal: Principal, thread_id: str, branch_id: str | None, body: dict[str, Any]
    ) -> dict[str, str]:
        rec = self._branch(principal, thread_id, branch_id)
        data: dict[str, Any] = {"source": "api"}
        if "text" in body:
            data["text"] = body["text"]
        else:
            data["content"] = body["content"]

        def decide(view: View) -> Any:
            _require_open_turn(view, "steer")
            return self._commit(view, [lambda _: Draft("steer", data, user(principal))])

        lines = self._control(rec, decide)
        self._wake(rec.branch_id, "steer")
        return self._appended(lines)

    def stop(
        self, principal: Principal, thread_id: str, branch_id: str | None, body: dict[str, Any]
    ) -> dict[str, str]:
        rec = self._branch(principal, thread_id, branch_id)
        data = {"reason": body["reason"]} if "reason" in body else {}

        def decide(view: View) -> Any:
            _require_open_turn(view, "stop")
            return self._commit(view, [lambda _: Draft("stop_when_idle", data, user(principal))])

        lines = self._control(rec, decide)
        self._wake(rec.branch_id, "stop")
        return self._appended(lines)


def _require_open_turn(view: View, what: str) -> None:
    f = view.fold
    if f.handed_off:
        raise LogError("invalid_transition", None, f"the thread was handed off: no {what} (rule 26)")
    if not f.turn_open:
        raise LogError("invalid_transition", None, f"no turn is open to {what} (start a run instead)")
