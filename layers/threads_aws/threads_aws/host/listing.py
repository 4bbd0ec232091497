"""Listing (ours, add-only: `x-threads-aws: ours` in the served contract): a tenant's threads,
most recent activity first, filtered; one thread's summary; its title and metadata (PATCH).

`GET /v1/threads` reads the thread index only (`store.thread_query`: one query of an activity
index backwards and one BatchGetItem of the status branches' heads per page), never a log: its
cost is the page's, not the tenant's. The filters and the PATCH body: `host.thread_meta`. Each
row's status is the one its last status-changing append recorded (`Writer`'s activity
companion); `GET /v1/threads/{thread_id}` is exact: it folds each branch (the cached views every
control uses) for its status, open approvals and questions, usage and cost.

Paging: `limit` (1..MAX_LIMIT, default DEFAULT_LIMIT) and `before` (the cursor of the previous
page's last thread). A page that stops before the end says where the rest is with
`Link: <threads?before=C&limit=L[&filters]>; rel="next"`, relative to the request's URL, like
the timeline. A malformed value is invalid_request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core import projections
from ..core.errors import LogError
from ..core.fold import Fold
from ..store.branches import BranchRecord
from ..store.index import ThreadRecord, valid_cursor
from ..store.thread_query import MetadataFull, ThreadFilter
from .base import HIDDEN, NOT_RUNNABLE, HostBase
from .errors import bad_param, invalid, not_found
from .principal import Principal

DEFAULT_LIMIT = 50
MAX_LIMIT = 200


def list_params(query: Mapping[str, str]) -> tuple[int, str | None]:
    """(limit, before) of a list request, checked before anything is read."""
    raw = query.get("limit")
    limit = DEFAULT_LIMIT
    if raw is not None:
        if not raw.isascii() or not raw.isdigit() or not 1 <= int(raw) <= MAX_LIMIT:
            raise bad_param(f"query parameter limit must be an integer in 1..{MAX_LIMIT}")
        limit = int(raw)
    before = query.get("before")
    if before is not None and not valid_cursor(before):
        raise bad_param("query parameter before must be a cursor from a previous page's Link")
    return limit, before


def _row(t: ThreadRecord, last_activity: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "thread_id": t.thread_id,
        "main_branch_id": t.main_branch_id,
        "created_at": t.created_at,
        "last_activity_at": last_activity,
        "status": t.status,
        "status_branch_id": t.status_branch_id,
    }
    if t.agent is not None:
        out["agent"] = t.agent
    if t.title is not None:
        out["title"] = t.title
    if t.metadata:
        out["metadata"] = dict(t.metadata)
    return out


def _usage(fold: Fold) -> dict[str, int]:
    return {
        "input_tokens": fold.usage_in,
        "output_tokens": fold.usage_out,
        "unknown_responses": fold.usage_unknown,
    }


def _open(fold: Fold) -> tuple[int, int]:
    """(open approvals, open questions): what a person can answer now."""
    approvals = 0
    for kind, ident in fold.parked:
        ch = fold.challenges.get(ident) if kind == "approval" else None
        approvals += ch is not None and not ch.consumed
    questions = sum(1 for (kind, _id) in fold.parked if kind == "input")
    return approvals, questions


def _composition(host: HostBase, main_id: str, branches: list[BranchRecord]) -> dict[str, Any]:
    """The main branch's `children` and `team_tasks` (the fold's: those projections, no scan)
    and its `thread_started.parent`, when it has them."""
    rec = next((r for r in branches if r.branch_id == main_id), None)
    if rec is None:
        return {}
    try:
        with host._lock:
            fold = host._load(rec).fold
    except LogError:
        return {}
    out: dict[str, Any] = {}
    if fold.children:
        out["children"] = [
            {"child_thread_id": tid, "status": status or "running"} for tid, status in fold.children.items()
        ]
    if fold.tasks:  # a team lead's board (engine.team): the team_tasks projection, from the fold
        out["team_tasks"] = [
            {"status": t["status"], "task_id": tid, **({"owner": t["owner"]} if t["owner"] else {})}
            for tid, t in fold.tasks.items()
        ]
    parent = (fold.started or {}).get("parent")
    if isinstance(parent, dict):
        out["parent"] = parent
    return out


class Listing(HostBase):
    def threads(
        self, principal: Principal, limit: int, before: str | None, filters: ThreadFilter | None = None
    ) -> tuple[dict[str, Any], str | None]:
        """One page of the tenant's threads, and the next page's cursor (None: the last page)."""
        page, cursor = self.index.list_threads(principal.tenant, limit=limit, before=before, filters=filters)
        last = self.index.last_activity(page) if page else {}
        return {"threads": [_row(t, last.get(t.thread_id, t.status_at)) for t in page]}, cursor

    def update_thread(self, principal: Principal, thread_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """PATCH: set the title, merge the metadata (`host.thread_meta`); the updated list row."""
        from .thread_meta import MAX_KEYS, patch_body

        title, metadata = patch_body(body)
        try:
            t = self.index.update_meta(
                principal.tenant, thread_id, title=title, metadata=metadata, max_keys=MAX_KEYS
            )
        except MetadataFull as exc:
            raise invalid(f"body.metadata: {exc}") from None
        if t is None:
            raise not_found(f"thread {thread_id} not found")
        last = self.index.last_activity([t])
        return _row(t, last.get(t.thread_id, t.status_at))

    def thread(self, principal: Principal, thread_id: str) -> dict[str, Any]:
        t = self._thread(principal, thread_id)
        branches = [r for r in self.index.list_branches(principal.tenant, thread_id) if r.state not in HIDDEN]
        infos = [self._branch_info(r) for r in branches]
        main = next((i for i in infos if i["branch_id"] == t.main_branch_id), infos[0] if infos else None)
        out = _row(t, max([t.status_at, *(r.updated_at for r in branches)]))
        if main is not None:
            out["status"] = main["status"]
            for k in ("usage", "cost"):
                if k in main:
                    out[k] = main[k]
        out["open_approvals"] = sum(i.get("open_approvals", 0) for i in infos)
        out["open_questions"] = sum(i.get("open_questions", 0) for i in infos)
        out["branches"] = infos
        out.update(_composition(self, t.main_branch_id, branches))
        return out

    def _branch_info(self, rec: BranchRecord) -> dict[str, Any]:
        info: dict[str, Any] = {
            "branch_id": rec.branch_id,
            "mode": "live",
            "runnable": rec.state not in NOT_RUNNABLE,
            "head_seq": rec.head_seq,
            "created_at": rec.created_at,
            "last_activity_at": rec.updated_at,
        }
        if rec.parent_branch_id is not None:
            info["parent_branch_id"] = rec.parent_branch_id
        if rec.fork_at_seq is not None:
            info["fork_at_seq"] = rec.fork_at_seq
        try:
            with self._lock:
                fold = self._load(rec).fold
                info["status"] = fold.status()
                info["open_approvals"], info["open_questions"] = _open(fold)
                info["usage"] = _usage(fold)
                cost = projections.cost(fold.events)
        except LogError:
            # A branch this host cannot read (corrupt, an unknown critical event): listed, with
            # what its head says; its timeline answers the typed error.
            info["status"] = "unreadable"
            return info
        if cost is not None and "error" not in cost:
            info["cost"] = cost
        return info
