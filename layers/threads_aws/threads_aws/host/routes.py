"""Every route: its operationId, its `x-error-codes` (a test checks them against
schemas/openapi.json) and the call from a parsed Request into `Host`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .errors import ApiError
from .http import Request, raw_response, response
from .service import Host

Call = Callable[[Host, Request], dict[str, Any]]

_BASE = ("unauthenticated", "forbidden", "not_found")


def _codes(*extra: str) -> frozenset[str]:
    return frozenset((*_BASE, *extra))


def _start_run(h: Host, r: Request) -> dict[str, Any]:
    return response(202, h.start_run(r.who(), r.json("StartRunRequest"), r.header("Idempotency-Key")))


def _timeline(h: Host, r: Request) -> dict[str, Any]:
    from . import paging

    paging.page_params(r.query)  # a malformed page is refused before the branch is read
    body, headers = paging.timeline_page(h.timeline(r.who(), r.thread_id, r.branch_id), r.query)
    return raw_response(200, body, headers)


def _fork_points(h: Host, r: Request) -> dict[str, Any]:
    from . import paging

    paging.page_params(r.query)
    body, headers = paging.fork_points_page(h.fork_points(r.who(), r.thread_id, r.branch_id), r.query)
    return raw_response(200, body, headers)


def _subscribe(h: Host, r: Request) -> dict[str, Any]:
    from . import sse
    from .live import format_headers, options

    opts = options(r.query, r.header("Last-Event-ID"))  # a bad parameter is refused first
    window = sse.Window.from_env(remaining_ms=r.remaining_ms)
    if opts.format != "native":
        from . import sse_formats

        run_id = r.uuid_param("run_id") or ""
        body = sse_formats.subscribe(
            h, r.who(), r.thread_id, run_id, fmt=opts.format, raw_cursor=opts.raw_cursor, window=window
        )
    else:
        body = sse.subscribe(
            h,
            r.who(),
            r.thread_id,
            r.uuid_param("run_id") or "",
            cursor=opts.cursor,
            window=window,
        )
    return {
        "statusCode": 200,
        "headers": {
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            **dict(format_headers(opts.format)),
        },
        "body": body.decode(),
        "isBase64Encoded": False,
    }


def _list_threads(h: Host, r: Request) -> dict[str, Any]:
    from . import listing, thread_meta

    limit, before = listing.list_params(r.query)
    filters = thread_meta.filter_params(r.query)  # a bad filter is refused before any read
    page, cursor = h.threads(r.who(), limit, before, filters)
    return response(200, page, thread_meta.next_link(cursor, limit, filters))


def _cancel(h: Host, r: Request) -> dict[str, Any]:
    from .errors import BadParameter

    try:  # optional (ours): {reason?}; checked like every body, before anything is read
        body = r.json("CancelRequest") if r.body else {}
    except ApiError as exc:  # the route declares no invalid_request: 403, as for a bad parameter
        raise BadParameter(exc.message) from None
    return response(200, h.cancel(r.who(), r.thread_id, r.branch_id, body))


def _stop(h: Host, r: Request) -> dict[str, Any]:
    body = r.json("StopRequest") if r.body else {}  # the body is optional
    return response(200, h.stop(r.who(), r.thread_id, r.branch_id, body))


def _schedules() -> Any:
    from .. import services
    from ..schedules.service import ScheduleService

    return ScheduleService.of(services.current())


def _create_schedule(h: Host, r: Request) -> dict[str, Any]:
    from . import limits
    from .errors import invalid

    if not r.body:
        raise invalid("a JSON body is required")
    body = limits.parse_body(r.body)  # a malformed body is invalid_request, as on every route
    return response(201, _schedules().create(h, r.who(), r.thread_id, body))


def _delete_schedule(h: Host, r: Request) -> dict[str, Any]:
    return response(200, _schedules().delete(h, r.who(), r.thread_id, r.uuid_param("schedule_id") or ""))


def _delete_thread(h: Host, r: Request) -> dict[str, Any]:
    h.delete_thread(r.who(), r.thread_id)  # 204 again for the tenant's deleted thread (host.deletion)
    return {"statusCode": 204, "headers": {}, "body": "", "isBase64Encoded": False}


ROUTES: dict[str, tuple[frozenset[str], Call]] = {
    "startRun": (
        _codes(
            "invalid_request",
            "branch_busy",
            "branch_not_runnable",
            "idempotency_key_reused",
            "idempotency_key_principal_mismatch",
        ),
        _start_run,
    ),
    "subscribeRun": (_codes(), _subscribe),
    "getTimeline": (
        _codes("log_corrupt", "unsupported_format", "unsupported_critical_event"),
        _timeline,
    ),
    "listBranches": (_codes(), lambda h, r: response(200, h.branches(r.who(), r.thread_id))),
    "listForkPoints": (
        _codes(),
        _fork_points,
    ),
    "fork": (
        _codes(
            "invalid_request",
            "sandbox_required",
            "no_snapshot_boundary",
            "snapshot_expired",
            "snapshot_missing",
            "snapshot_restore_failed",
            "snapshot_manifest_mismatch",
            "resource_unknown",
            "egress_policy_unsupported",
        ),
        lambda h, r: response(201, h.fork(r.who(), r.thread_id, r.branch_id, r.json("ForkRequest"))),
    ),
    "listApprovals": (
        _codes(),
        lambda h, r: response(200, h.pending_approvals(r.who(), r.thread_id, r.branch_id)),
    ),
    "decideApproval": (
        _codes(
            "invalid_request", "approval_mismatch", "approval_expired", "approval_duplicate", "branch_busy"
        ),
        lambda h, r: response(
            200,
            h.decide_approval(
                r.who(), r.thread_id, r.uuid_param("challenge_id") or "", r.json("ApprovalDecision")
            ),
        ),
    ),
    "answerQuestion": (
        _codes("invalid_request", "no_open_question", "branch_busy"),
        lambda h, r: response(
            200, h.answer_question(r.who(), r.thread_id, r.call_id(), r.branch_id, r.json("Answer"))
        ),
    ),
    "resolveParked": (
        _codes("invalid_request", "not_parked", "branch_busy"),
        lambda h, r: response(
            200,
            h.resolve_parked(
                r.who(), r.thread_id, r.text_param("effect_key"), r.branch_id, r.json("ParkedResolution")
            ),
        ),
    ),
    "cancel": (_codes("branch_busy"), _cancel),
    "setModel": (
        _codes("invalid_request", "invalid_transition", "branch_busy"),
        lambda h, r: response(200, h.set_model(r.who(), r.thread_id, r.branch_id, r.json("SettingsChange"))),
    ),
    "setMode": (
        _codes("invalid_request", "invalid_transition", "branch_busy"),
        lambda h, r: response(200, h.set_mode(r.who(), r.thread_id, r.branch_id, r.json("ModeChange"))),
    ),
    # ours (add-only; `x-threads-aws: ours` in the served contract): steer and stop when idle
    "steer": (
        _codes("invalid_request", "invalid_transition", "branch_busy"),
        lambda h, r: response(200, h.steer(r.who(), r.thread_id, r.branch_id, r.json("SteerRequest"))),
    ),
    "stop": (_codes("invalid_request", "invalid_transition", "branch_busy"), _stop),
    # ours: forget a span of a tool result (context_edited{manual} redact; host.redaction)
    "redactResult": (
        _codes("invalid_request", "branch_busy"),
        lambda h, r: response(200, h.redact(r.who(), r.thread_id, r.branch_id, r.json("RedactRequest"))),
    ),
    # ours (add-only; `x-threads-aws: ours` in the served contract): a thread's cron schedules
    "createSchedule": (_codes("invalid_request"), _create_schedule),
    "listSchedules": (_codes(), lambda h, r: response(200, _schedules().list_for(h, r.who(), r.thread_id))),
    "deleteSchedule": (_codes(), _delete_schedule),
    # ours: listing (issue 13 §1)
    "listThreads": (_codes("invalid_request"), _list_threads),
    "getThread": (_codes(), lambda h, r: response(200, h.thread(r.who(), r.thread_id))),
    # ours: a thread's title and metadata (issue 18 §6)
    "updateThread": (
        _codes("invalid_request"),
        lambda h, r: response(200, h.update_thread(r.who(), r.thread_id, r.json("UpdateThreadRequest"))),
    ),
    # ours: thread deletion (issue 17 §1)
    "deleteThread": (_codes("busy"), _delete_thread),
}
