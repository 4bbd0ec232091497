"""Thread deletion (ours, add-only `DELETE /v1/threads/{thread_id}`; semantics.md §8 "Thread
deletion"): the thread and its subagent children, in one transaction (`store.deletion`), then
their rows purged (`store.purge`).

Same principal rule as cancel: any principal of the thread's tenant; another tenant's thread is
`not_found`. Refused `busy` (409) while any branch of the cascade holds an unexpired lease or an
effect in doubt. A second DELETE of the same tenant's thread answers 204 again: the tombstone
(`tombstones(thread_id, tenant_id, deleted_at)`) records that the tenant deleted it, so the
repeat is the same success, not a lookup of something unknown (a retry after a lost response
must not read as a failure); every other route answers `not_found` for it.
"""

from __future__ import annotations

from collections.abc import Callable

from ..store.records import NotFound
from .base import HostBase
from .errors import ApiError, not_found
from .principal import Principal


class Deletion(HostBase):
    # Removes a schedule's EventBridge entry (`Services.host` sets it; None: nothing deployed).
    schedule_remover: Callable[[str], None] | None = None

    def delete_thread(self, principal: Principal, thread_id: str) -> bool:
        """True if this call deleted the thread, False if it was deleted before."""
        from ..store.deletion import DeletionRefused, ThreadDeletion

        deletion = ThreadDeletion(
            self.stores,
            clock=self.clock,
            on_schedule=self.schedule_remover,
            fold_of=lambda rec: self.writer.load(rec.branch_id, record=rec).fold,
        )
        try:
            return deletion.delete(principal.tenant, thread_id)
        except NotFound:
            raise not_found(f"thread {thread_id} not found") from None
        except DeletionRefused as exc:
            raise ApiError(exc.code, exc.message) from None
