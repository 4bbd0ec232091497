"""Branch leases, kept on the branch's head item (``lease_holder``, ``lease_epoch``,
``lease_expires_at``; `store.branches`).

``acquire`` sets ``epoch = max(lease_epoch, head_epoch) + 1`` by compare-and-set on the read
lease_epoch, allowed when no holder is recorded, the lease expired, or the holder is the caller;
another holder's unexpired lease is ``branch_busy``. ``renew``/``release`` require the same
holder and epoch (``stale_epoch`` otherwise). Releasing keeps lease_epoch so later epochs stay
higher. Fencing is the ``lease_epoch <= :epoch`` condition on every append (`store.append`).
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from ..core.errors import LogError
from .branches import Branches, branch_key
from .dynamo import Expr, N, S, condition_failed
from .records import Clock, Lease


class Leases:
    def __init__(
        self, ddb: Any, state_table: str, branches: Branches, *, clock: Clock, max_attempts: int = 6
    ):
        self.ddb = ddb
        self.table = state_table
        self.branches = branches
        self.clock = clock
        self.max_attempts = max_attempts

    def acquire(self, branch_id: str, holder_id: str, *, ttl_ms: int, now_ms: int | None = None) -> Lease:
        """Take the branch's lease with a new epoch; branch_busy if another holder's lease is
        unexpired."""
        now = self.clock() if now_ms is None else now_ms
        for _ in range(self.max_attempts):
            rec = self.branches.require(branch_id)
            if rec.lease_holder is not None and rec.lease_holder != holder_id and rec.lease_expires_at > now:
                raise LogError("branch_busy", None, f"leased by another holder until {rec.lease_expires_at}")
            epoch = max(rec.lease_epoch, rec.head_epoch) + 1
            expires = now + ttl_ms
            e = Expr()
            le, lh, lx, he = (
                e.n("lease_epoch"),
                e.n("lease_holder"),
                e.n("lease_expires_at"),
                e.n("head_epoch"),
            )
            cas = f"{le} = {e.v(N(rec.lease_epoch))}" if rec.lease_epoch else f"attribute_not_exists({le})"
            cond = (
                f"attribute_exists(pk) AND {cas} AND {he} = {e.v(N(rec.head_epoch))}"
                f" AND (attribute_not_exists({lh}) OR {lh} = {e.v(S(holder_id))} OR {lx} <= {e.v(N(now))})"
            )
            update = f"SET {le} = {e.v(N(epoch))}, {lh} = {e.v(S(holder_id))}, {lx} = {e.v(N(expires))}"
            request = {
                "TableName": self.table,
                "Key": branch_key(branch_id),
                "UpdateExpression": update,
                "ConditionExpression": cond,
            }
            try:
                self.ddb.update_item(**e.apply(request))
            except ClientError as exc:
                if not condition_failed(exc):
                    raise
                continue  # someone moved the lease or the head between our read and write: re-read
            return Lease(epoch=epoch, expires_at=expires, holder_id=holder_id)
        raise LogError("branch_busy", None, "lease contended")

    def renew(self, branch_id: str, lease: Lease, now_ms: int | None = None, ttl_ms: int = 30_000) -> Lease:
        """Extend the lease; stale_epoch if it is no longer this holder's at this epoch."""
        now = self.clock() if now_ms is None else now_ms
        expires = now + ttl_ms
        if not self._update(branch_id, lease, "SET #lease_expires_at = :exp", {":exp": N(expires)}):
            raise LogError("stale_epoch", None, "the lease was taken over or released")
        return Lease(epoch=lease.epoch, expires_at=expires, holder_id=lease.holder_id)

    def release(self, branch_id: str, lease: Lease) -> bool:
        """Give the lease up (keeps lease_epoch). False if it wasn't ours any more."""
        return self._update(
            branch_id, lease, "REMOVE #lease_holder SET #lease_expires_at = :zero", {":zero": N(0)}
        )

    def _update(self, branch_id: str, lease: Lease, update: str, values: dict[str, Any]) -> bool:
        e = Expr()
        e.names.update(
            {
                "#lease_epoch": "lease_epoch",
                "#lease_holder": "lease_holder",
                "#lease_expires_at": "lease_expires_at",
            }
        )
        e.values.update(values)
        cond = f"#lease_holder = {e.v(S(lease.holder_id))} AND #lease_epoch = {e.v(N(lease.epoch))}"
        request = {
            "TableName": self.table,
            "Key": branch_key(branch_id),
            "UpdateExpression": update,
            "ConditionExpression": cond,
        }
        try:
            self.ddb.update_item(**e.apply(request))
            return True
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            return False
