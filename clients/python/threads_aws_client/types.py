"""The contract's wire shapes as TypedDicts (openapi.json `components.schemas`; a test checks
each one's required and optional keys against the served contract).

Results are the decoded JSON as the host sent it: plain dicts and lists, typed for readers and
type checkers, with nothing copied or renamed. Events stay open (`data` is per event type; the
contract has ~60 of them): read `event["type"]` and then `event["data"]`.
"""

from typing import Any, Literal, NotRequired, TypedDict

JsonObject = dict[str, Any]


class Principal(TypedDict):
    issuer: str
    tenant: str
    subject: str


class Actor(TypedDict):
    kind: Literal["user", "model", "host", "tool", "channel", "scheduler", "approver", "recovery"]
    principal: NotRequired[Principal]


class Event(TypedDict):
    """events_Envelope + the event type's `type`, `type_version`, `critical` and `data`."""

    seq: int
    event_id: str
    thread_id: str
    branch_id: str
    epoch: int
    type: str
    type_version: int
    critical: bool
    time: int
    actor: Actor
    prev_hash: str
    data: JsonObject


class ModelRef(TypedDict):
    provider: str
    name: str


class RunAccepted(TypedDict):
    """POST /v1/runs: the user_input is durable; run_id is its event_id."""

    thread_id: str
    branch_id: str
    run_id: str


class BranchRef(TypedDict):
    thread_id: str
    branch_id: str


class Appended(TypedDict):
    """A control operation's durable record."""

    event_id: str


class BranchInfo(TypedDict):
    branch_id: str
    parent_branch_id: NotRequired[str]
    fork_at_seq: NotRequired[int]
    mode: Literal["live", "stub"]
    runnable: bool


ThreadStatus = Literal["idle", "in_turn", "parked", "cancelled", "inspection_only", "unreadable"]


class ThreadSummary(TypedDict):
    """A thread in its tenant's list (ours): `status` as last recorded on `status_branch_id`."""

    thread_id: str
    main_branch_id: str
    agent: NotRequired[str]
    title: NotRequired[str]
    metadata: NotRequired[dict[str, str]]  # an app's labels (PATCH); absent when empty
    created_at: int
    last_activity_at: int
    status: ThreadStatus
    status_branch_id: str


class ThreadList(TypedDict):
    threads: list[ThreadSummary]


class ThreadUsage(TypedDict):
    input_tokens: int
    output_tokens: int
    unknown_responses: int


class ThreadCost(TypedDict):
    currency: str
    known_nanos: int
    upper_bound_nanos: int
    complete: bool
    bounded: bool


class ThreadBranch(TypedDict):
    branch_id: str
    parent_branch_id: NotRequired[str]
    fork_at_seq: NotRequired[int]
    mode: Literal["live", "stub"]
    runnable: bool
    head_seq: int
    created_at: int
    last_activity_at: int
    status: ThreadStatus
    open_approvals: NotRequired[int]
    open_questions: NotRequired[int]
    usage: NotRequired[ThreadUsage]
    cost: NotRequired[ThreadCost]


class ThreadDetail(TypedDict):
    """One thread (ours): the main branch's status, usage and cost; every branch's open items."""

    thread_id: str
    main_branch_id: str
    agent: NotRequired[str]
    title: NotRequired[str]
    metadata: NotRequired[dict[str, str]]
    created_at: int
    last_activity_at: int
    status: ThreadStatus
    status_branch_id: str
    branches: list[ThreadBranch]
    open_approvals: int
    open_questions: int
    usage: NotRequired[ThreadUsage]
    cost: NotRequired[ThreadCost]
    children: NotRequired[list[JsonObject]]  # {child_thread_id, status} per agent_spawned
    team_tasks: NotRequired[list[JsonObject]]  # {task_id, status, owner?} of a team lead
    parent: NotRequired[JsonObject]  # thread_started.parent of a child or handoff target


class ForkPoint(TypedDict):
    branch_id: str
    seq: int
    event_id: str  # the snapshot event: what fork() takes
    snapshot: JsonObject


class PendingApproval(TypedDict):
    challenge_id: str
    call_id: str
    tool: str
    input: JsonObject
    args_hash: str
    expires_at: int
    suggested_rules: list[str]


class TimelineEntry(TypedDict):
    event: Event
    fork_point: bool


class Timeline(TypedDict):
    thread_id: str
    branch_id: str
    entries: list[TimelineEntry]


class Schedule(TypedDict):
    """A thread's cron schedule (ours: createSchedule / listSchedules)."""

    schedule_id: str
    thread_id: str
    branch_id: str
    cron: str  # five fields: minute hour day-of-month month day-of-week
    timezone: str  # IANA zone the cron is read in
    input: str  # the user_input text each fired occurrence starts a run with
    created_at: int


class ScheduleDeleted(TypedDict):
    schedule_id: str
    deleted: Literal[True]


# ------------------------------------------------------------------ RunOutcome (oneOf by status)
class ParkAddress(TypedDict):
    kind: Literal["approval", "effect", "input", "resource", "child"]
    id: str


class RunError(TypedDict):
    code: str  # a RunErrorCode
    message: str


class Completed(TypedDict):
    status: Literal["completed"]
    thread_id: str
    branch_id: str
    output: Any


class Parked(TypedDict):
    status: Literal["parked"]
    thread_id: str
    branch_id: str
    reason: Literal["awaiting_approval", "effect_unknown", "awaiting_input", "awaiting_resource"]
    pending: list[ParkAddress]


class Cancelled(TypedDict):
    status: Literal["cancelled"]
    thread_id: str
    branch_id: str


class Failed(TypedDict):
    status: Literal["failed"]
    thread_id: str
    branch_id: str
    error: RunError


class BudgetExhausted(TypedDict):
    status: Literal["budget_exhausted"]
    thread_id: str
    branch_id: str
    budget: JsonObject


class HandedOff(TypedDict):
    status: Literal["handed_off"]
    thread_id: str
    branch_id: str
    to_thread_id: str


RunOutcome = Completed | Parked | Cancelled | Failed | BudgetExhausted | HandedOff


# ------------------------------------------------------------------ SseMessage
class EventMessage(TypedDict):
    """A committed log event (durable); its SSE id is the event's seq."""

    kind: Literal["event"]
    event: Event


class DeltaMessage(TypedDict):
    """Streamed model text (transient, never logged)."""

    kind: Literal["delta"]
    request_event_id: str
    text: str
    offset: NotRequired[int]  # ours: the chunk's position in the request's text, in code points
    thinking: NotRequired[Literal[True]]  # ours: a reasoning chunk (only with thinking=True)


class StatusMessage(TypedDict):
    """The run waits to retry a model call until `until` (epoch ms; transient)."""

    kind: Literal["status"]
    status: Literal["retry_wait"]
    until: int


class ResultMessage(TypedDict):
    kind: Literal["result"]
    run_id: str
    result: RunOutcome


StreamMessage = EventMessage | DeltaMessage | StatusMessage

# The contract schema each TypedDict mirrors (tests compare their keys).
SCHEMAS: dict[str, type] = {
    "RunAccepted": RunAccepted,
    "BranchRef": BranchRef,
    "Appended": Appended,
    "BranchInfo": BranchInfo,
    "ForkPoint": ForkPoint,
    "ThreadSummary": ThreadSummary,
    "ThreadList": ThreadList,
    "ThreadUsage": ThreadUsage,
    "ThreadCost": ThreadCost,
    "ThreadBranch": ThreadBranch,
    "ThreadDetail": ThreadDetail,
    "PendingApproval": PendingApproval,
    "TimelineEntry": TimelineEntry,
    "Timeline": Timeline,
    "events_Envelope": Event,
    "events_Actor": Actor,
    "events_Principal": Principal,
    "events_ModelRef": ModelRef,
    "events_ParkAddress": ParkAddress,
}
OUTCOMES: dict[str, type] = {
    "completed": Completed,
    "parked": Parked,
    "cancelled": Cancelled,
    "failed": Failed,
    "budget_exhausted": BudgetExhausted,
    "handed_off": HandedOff,
}
# Ours, whose response schemas are inline in the served contract: operationId -> TypedDict.
RESPONSES: dict[str, type] = {
    "createSchedule": Schedule,
    "listSchedules": Schedule,  # the array's items
    "deleteSchedule": ScheduleDeleted,
}
MESSAGES: dict[str, type] = {
    "event": EventMessage,
    "delta": DeltaMessage,
    "status": StatusMessage,
    "result": ResultMessage,
}
