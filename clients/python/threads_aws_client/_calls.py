"""Every route of the served contract (host/openapi.json) as a `Call`: path, body, expected
status. One function per operationId; `Client` and `AsyncClient` send them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ._core import Call, new_idempotency_key, seg
from .types import (
    Appended,
    BranchInfo,
    BranchRef,
    ForkPoint,
    PendingApproval,
    RunAccepted,
    Schedule,
    ScheduleDeleted,
    ThreadDetail,
    ThreadList,
    ThreadStatus,
    ThreadSummary,
    Timeline,
)

Input = str | Sequence[dict[str, Any]]


def _thread(thread_id: str, rest: str = "") -> str:
    return f"/v1/threads/{seg(thread_id)}{rest}"


def start_run(
    agent: str,
    input: Input,
    *,
    thread_id: str | None = None,
    branch_id: str | None = None,
    budget: dict[str, int] | None = None,
    idempotency_key: str | None = None,
) -> Call[RunAccepted]:
    """startRun: POST /v1/runs (202 RunAccepted). Starts a run (a new thread unless `thread_id`).
    The Idempotency-Key is generated unless given; retries reuse it, and a failure carries it as
    `error.idempotency_key`."""
    body: dict[str, Any] = {"agent": agent, "input": input if isinstance(input, str) else list(input)}
    if thread_id is not None:
        body["thread_id"] = thread_id
    if branch_id is not None:
        body["branch_id"] = branch_id
    if budget is not None:
        body["budget"] = budget
    return Call.post("/v1/runs", body, ok=202, idempotency_key=idempotency_key or new_idempotency_key())


def timeline(
    thread_id: str, branch_id: str | None = None, *, after_seq: int | None = None, limit: int | None = None
) -> Call[Timeline]:
    """getTimeline: GET …/timeline (a page of entries; `Link: rel="next"` names the next)."""
    return Call.get(
        _thread(thread_id, "/timeline"), {"branch_id": branch_id, "after_seq": after_seq, "limit": limit}
    )


def branches(thread_id: str) -> Call[list[BranchInfo]]:
    """listBranches: GET …/branches."""
    return Call.get(_thread(thread_id, "/branches"))


def fork_points(
    thread_id: str, branch_id: str | None = None, *, after_seq: int | None = None, limit: int | None = None
) -> Call[list[ForkPoint]]:
    """listForkPoints: GET …/fork-points (a page; `Link: rel="next"` names the next)."""
    return Call.get(
        _thread(thread_id, "/fork-points"), {"branch_id": branch_id, "after_seq": after_seq, "limit": limit}
    )


def fork(
    thread_id: str,
    event_id: str,
    *,
    branch_id: str | None = None,
    mode: Literal["live", "stub"] | None = None,
    knowledge: Literal["pinned", "current"] | None = None,
) -> Call[BranchRef]:
    """fork: POST …/forks (201 BranchRef)."""
    body: dict[str, Any] = {"event_id": event_id}
    if mode is not None:
        body["mode"] = mode
    if knowledge is not None:
        body["knowledge"] = knowledge
    return Call.post(_thread(thread_id, "/forks"), body, ok=201, params={"branch_id": branch_id})


def approvals(thread_id: str, branch_id: str | None = None) -> Call[list[PendingApproval]]:
    """listApprovals: GET …/approvals."""
    return Call.get(_thread(thread_id, "/approvals"), {"branch_id": branch_id})


def decide(
    thread_id: str,
    challenge_id: str,
    decision: Literal["grant", "deny"],
    *,
    remember_rule: str | None = None,
    reason: str | None = None,
) -> Call[Appended]:
    """decideApproval: POST …/approvals/{challenge_id}."""
    body: dict[str, Any] = {"decision": decision}
    if remember_rule is not None:
        body["remember_rule"] = remember_rule
    if reason is not None:
        body["reason"] = reason
    return Call.post(_thread(thread_id, f"/approvals/{seg(challenge_id)}"), body)


def answer(
    thread_id: str, call_id: str, answer: str | Sequence[str], *, branch_id: str | None = None
) -> Call[Appended]:
    """answerQuestion: POST …/questions/{call_id}/answer."""
    value: str | list[str] = answer if isinstance(answer, str) else list(answer)
    return Call.post(
        _thread(thread_id, f"/questions/{seg(call_id)}/answer"),
        {"answer": value},
        params={"branch_id": branch_id},
    )


def resolve_parked(
    thread_id: str,
    effect_key: str,
    resolution: Literal["assume_done", "assume_not_done"],
    *,
    branch_id: str | None = None,
) -> Call[Appended]:
    """resolveParked: POST …/parked/{effect_key}/resolve."""
    return Call.post(
        _thread(thread_id, f"/parked/{seg(effect_key)}/resolve"),
        {"resolution": resolution},
        params={"branch_id": branch_id},
    )


def cancel(thread_id: str, branch_id: str | None = None) -> Call[Appended]:
    """cancel: POST …/cancel (no body)."""
    return Call.post(_thread(thread_id, "/cancel"), params={"branch_id": branch_id})


def steer(
    thread_id: str,
    text: str | None = None,
    *,
    content: list[dict[str, Any]] | None = None,
    branch_id: str | None = None,
) -> Call[Appended]:
    """steer: POST …/steer (ours): new input for the open turn, as text or input parts."""
    if (text is None) == (content is None):
        raise ValueError("steer takes text or content, not both")
    body: dict[str, Any] = {"text": text} if text is not None else {"content": list(content or [])}
    return Call.post(_thread(thread_id, "/steer"), body, params={"branch_id": branch_id})


def stop(thread_id: str, reason: str | None = None, *, branch_id: str | None = None) -> Call[Appended]:
    """stop: POST …/stop (ours): stop when idle; the body is optional."""
    body: dict[str, Any] = {} if reason is None else {"reason": reason}
    return Call.post(_thread(thread_id, "/stop"), body, params={"branch_id": branch_id})


def redact(
    thread_id: str,
    call_id: str,
    *,
    match: str | None = None,
    spans: list[dict[str, int]] | None = None,
    part: int | None = None,
    branch_id: str | None = None,
) -> Call[Appended]:
    """redactResult: POST …/redactions (ours): forget a span of a tool result (every occurrence
    of `match`, or UTF-8 byte `spans`) from the model's context."""
    if (match is None) == (spans is None):
        raise ValueError("redact takes match or spans, not both")
    body: dict[str, Any] = {"call_id": call_id}
    body.update({"match": match} if match is not None else {"spans": list(spans or [])})
    if part is not None:
        body["part"] = part
    return Call.post(_thread(thread_id, "/redactions"), body, params={"branch_id": branch_id})


def set_model(
    thread_id: str,
    model: dict[str, str],
    *,
    model_params: dict[str, Any] | None = None,
    reasoning_carryover: Literal["keep", "omit_prior"] | None = None,
    branch_id: str | None = None,
) -> Call[Appended]:
    """setModel: POST …/settings."""
    body: dict[str, Any] = {"model": dict(model)}
    if model_params is not None:
        body["model_params"] = model_params
    if reasoning_carryover is not None:
        body["reasoning_carryover"] = reasoning_carryover
    return Call.post(_thread(thread_id, "/settings"), body, params={"branch_id": branch_id})


def set_mode(thread_id: str, mode: str, *, branch_id: str | None = None) -> Call[Appended]:
    """setMode: POST …/mode."""
    return Call.post(_thread(thread_id, "/mode"), {"mode": mode}, params={"branch_id": branch_id})


def create_schedule(
    thread_id: str,
    cron: str,
    input: str,
    *,
    timezone: str | None = None,
    branch_id: str | None = None,
) -> Call[Schedule]:
    """createSchedule: POST …/schedules (ours; 201 the schedule): a cron schedule on the thread,
    each occurrence starts a run with `input`. Not resent on doubt: a second create is a second
    schedule."""
    body: dict[str, Any] = {"cron": cron, "input": input}
    if timezone is not None:
        body["timezone"] = timezone
    if branch_id is not None:
        body["branch_id"] = branch_id
    return Call.post(_thread(thread_id, "/schedules"), body, ok=201)


def schedules(thread_id: str) -> Call[list[Schedule]]:
    """listSchedules: GET …/schedules (ours; the thread's schedules, oldest first)."""
    return Call.get(_thread(thread_id, "/schedules"))


def delete_schedule(thread_id: str, schedule_id: str) -> Call[ScheduleDeleted]:
    """deleteSchedule: DELETE …/schedules/{schedule_id} (ours; no further occurrences)."""
    return Call.delete(_thread(thread_id, f"/schedules/{seg(schedule_id)}"))


def openapi() -> Call[dict[str, Any]]:
    """The served contract: GET /openapi.json (no token needed)."""
    return Call.get("/openapi.json")


# ------------------------------------------------------------------ listing (ours)
def threads(
    *,
    limit: int | None = None,
    before: str | None = None,
    status: ThreadStatus | None = None,
    agent: str | None = None,
    metadata: Mapping[str, str] | None = None,
    updated_after: int | None = None,
    updated_before: int | None = None,
    title_contains: str | None = None,
) -> Call[ThreadList]:
    """listThreads: GET /v1/threads (a page of the tenant's threads, most recent activity first;
    `Link: rel="next"` names the next, filters included). Filters combine with AND: `metadata`
    pairs are sent as `metadata[key]=value`; `updated_after`/`updated_before` are ms."""
    params: dict[str, Any] = {
        "limit": limit,
        "before": before,
        "status": status,
        "agent": agent,
        "updated_after": updated_after,
        "updated_before": updated_before,
        "title_contains": title_contains,
    }
    params.update({f"metadata[{k}]": v for k, v in (metadata or {}).items()})
    return Call.get("/v1/threads", params)


def update_thread(
    thread_id: str, *, title: str | None = None, metadata: Mapping[str, str | None] | None = None
) -> Call[ThreadSummary]:
    """updateThread: PATCH /v1/threads/{thread_id} (ours; the updated list row). `title`
    replaces the title; `metadata` is merged (a None value removes its key). At most 16 keys
    after the merge, keys 1..64 of A-Za-z0-9_.:-, values up to 512 characters, title 1..256."""
    body: dict[str, Any] = {}
    if title is not None:
        body["title"] = title
    if metadata is not None:
        body["metadata"] = dict(metadata)
    return Call.patch(_thread(thread_id), body)


def thread(thread_id: str) -> Call[ThreadDetail]:
    """getThread: GET /v1/threads/{thread_id} (its summary and branches with their status, open
    approvals and questions, usage and cost)."""
    return Call.get(_thread(thread_id))


def delete_thread(thread_id: str) -> Call[None]:
    """deleteThread: DELETE /v1/threads/{thread_id} (ours; 204, again for a thread the tenant
    already deleted). The thread, its branches and its subagent children; `BusyError` while a
    branch runs or has an effect in doubt."""
    return Call.delete(_thread(thread_id), ok=204)


OPERATIONS: dict[str, str] = {
    # operationId -> the function building its call (a test checks every served operation has one)
    "startRun": "start_run",
    "subscribeRun": "stream",
    "getTimeline": "timeline",
    "listBranches": "branches",
    "listForkPoints": "fork_points",
    "fork": "fork",
    "listApprovals": "approvals",
    "decideApproval": "decide",
    "answerQuestion": "answer",
    "resolveParked": "resolve_parked",
    "cancel": "cancel",
    "steer": "steer",
    "stop": "stop",
    "redactResult": "redact",
    "setModel": "set_model",
    "setMode": "set_mode",
    "createSchedule": "create_schedule",
    "listSchedules": "schedules",
    "deleteSchedule": "delete_schedule",
    "listThreads": "threads",
    "getThread": "thread",
    "updateThread": "update_thread",
    "deleteThread": "delete_thread",
}
