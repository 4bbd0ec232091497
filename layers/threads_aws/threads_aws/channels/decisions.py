"""Channel decisions: a press of one of our approval buttons, applied through the host's own
approval-decision path (`Host.decide_approval`: the challenge's binding, expiry, the approvals
row consumed in the decision's transaction, the park's `resumed`, the wake), so there is one
implementation of a decision, not two.

What differs for a channel, and only that:
- the principal is the sender's (`consumer.principal_of`), the thread is the conversation's
  (the inbox row's): a press in another conversation names a challenge of another thread and
  is `not_found`;
- authority: the installation's ``approvers`` (provider user ids, mapped to principals) when it
  lists any, else the host's rule (the root agent's approvers, else the principal who opened the
  root run);
- the inbox row is consumed in the transaction of the decision's events (a companion), so a
  decision is applied exactly once and its row says so.
A final refusal (forbidden, approval_duplicate, approval_expired, approval_mismatch, an unknown
challenge, invalid_request) consumes the row with nothing appended; branch_busy leaves it queued.
Free text is never a decision: only a ``decision`` item (our button ids) comes here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..core.lines import StoredLine
from ..host.errors import ApiError
from ..host.principal import Principal
from ..host.service import Host
from ..store.inbox import InboxRow
from ..store.records import Companion
from ..writer import View
from .installations import Installation, load_installations
from .model import InboxItem

if TYPE_CHECKING:
    from .consumer import Consumer, Outcome

FINAL = frozenset(
    {
        "forbidden",
        "approval_duplicate",
        "approval_expired",
        "approval_mismatch",
        "not_found",
        "invalid_request",
    }
)


class _ChannelHost(Host):
    """The host, deciding for one inbox row: its authority and its row's consumption."""

    row: InboxRow
    installation: Installation | None

    def _require_authority(self, principal: Principal, view: View) -> None:
        inst = self.installation
        if inst is not None and inst.approvers:
            if not inst.is_approver(principal.subject) or principal.tenant != inst.tenant:
                raise ApiError("forbidden", "not an approver of this channel installation")
            return
        super()._require_authority(principal, view)

    def _commit(
        self,
        view: View,
        makers: Sequence[Any],
        companions: Callable[[list[StoredLine]], Sequence[Companion]] | None = None,
    ) -> list[StoredLine]:
        now = self.clock()

        def with_row(built: list[StoredLine]) -> list[Companion]:
            side = list(companions(built)) if companions is not None else []
            return [*side, self.stores.inbox.consume(self.row, built[0].seq, now)]

        return super()._commit(view, makers, with_row)


def apply_decision(consumer: Consumer, row: InboxRow) -> Outcome:
    item = InboxItem.from_dict(row.item)
    if item.decision is None:
        return consumer.refuse(row, "a decision item without a decision")
    from .consumer import principal_of

    services = consumer.services
    host = _ChannelHost(services.stores, services.writer, services.steps, services.agents, services.clock)
    host.row = row
    host.installation = load_installations().get(row.channel, row.installation_id)
    p = principal_of(row)
    principal = Principal(p["issuer"], p["tenant"], p["subject"])
    try:
        host.decide_approval(
            principal, row.thread_id, item.decision.challenge_id, {"decision": item.decision.decision}
        )
    except ApiError as exc:
        if exc.code == "branch_busy":
            return "wait"
        if exc.code in FINAL:
            # approval_expired after the host recorded the expiry as a denial: the row was
            # consumed with it (refuse finds it consumed and changes nothing).
            return consumer.refuse(row, f"{exc.code}: {exc.message}")
        raise
    return "applied"
