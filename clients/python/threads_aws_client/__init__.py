"""A typed Python client of the threads host API (sync and asyncio), over every served route.

    from threads_aws_client import Client

    with Client() as c:                                   # $THREADS_URL/$THREADS_TOKEN, else the dev host
        stream = c.run("demo", "note: buy milk")
        for msg in stream:                                # event / delta / status messages
            ...
        if stream.result["status"] == "parked":           # the RunOutcome
            (pending,) = c.approvals(stream.thread_id)
            c.approve(stream.thread_id, pending["challenge_id"])
            c.stream(stream.thread_id, stream.run_id, after_seq=stream.cursor).wait()

It needs only `httpx` and `httpx-sse` (the `client` extra) and imports nothing of the server
side; it is dev/client tooling, not part of the Lambda layer. Failures are typed
(`threads_aws_client.errors`), results are the contract's shapes (`threads_aws_client.types`).
"""

from __future__ import annotations

from ._core import DEFAULT_TOKEN, DEFAULT_URL, FORMATS, Call, Retries, new_idempotency_key
from .aio import AsyncClient, AsyncEventStream, AsyncRunStream
from .errors import (
    ERRORS,
    ApprovalDuplicateError,
    ApprovalExpiredError,
    ApprovalMismatchError,
    BranchBusyError,
    BranchNotRunnableError,
    BusyError,
    ConnectionFailed,
    EgressPolicyUnsupportedError,
    ForbiddenError,
    GatewayTimeoutError,
    IdempotencyKeyPrincipalMismatchError,
    IdempotencyKeyReusedError,
    InvalidRequestError,
    InvalidTransitionError,
    LogCorruptError,
    NoOpenQuestionError,
    NoSnapshotBoundaryError,
    NotFoundError,
    NotParkedError,
    ResourceUnknownError,
    SandboxRequiredError,
    SnapshotExpiredError,
    SnapshotManifestMismatchError,
    SnapshotMissingError,
    SnapshotRestoreFailedError,
    ThreadsError,
    TooLargeError,
    UnauthenticatedError,
    UnavailableError,
    UnexpectedResponse,
    UnsupportedCriticalEventError,
    UnsupportedFormatError,
    error_for,
)
from .sync import Client, EventStream, RunStream

__all__ = [
    "DEFAULT_TOKEN",
    "DEFAULT_URL",
    "ERRORS",
    "FORMATS",
    "ApprovalDuplicateError",
    "ApprovalExpiredError",
    "ApprovalMismatchError",
    "AsyncClient",
    "AsyncEventStream",
    "AsyncRunStream",
    "BranchBusyError",
    "BusyError",
    "BranchNotRunnableError",
    "Call",
    "Client",
    "ConnectionFailed",
    "EgressPolicyUnsupportedError",
    "ForbiddenError",
    "GatewayTimeoutError",
    "IdempotencyKeyPrincipalMismatchError",
    "IdempotencyKeyReusedError",
    "InvalidRequestError",
    "InvalidTransitionError",
    "LogCorruptError",
    "NoOpenQuestionError",
    "NoSnapshotBoundaryError",
    "NotFoundError",
    "NotParkedError",
    "ResourceUnknownError",
    "Retries",
    "EventStream",
    "RunStream",
    "SandboxRequiredError",
    "SnapshotExpiredError",
    "SnapshotManifestMismatchError",
    "SnapshotMissingError",
    "SnapshotRestoreFailedError",
    "ThreadsError",
    "TooLargeError",
    "UnauthenticatedError",
    "UnavailableError",
    "UnexpectedResponse",
    "UnsupportedCriticalEventError",
    "UnsupportedFormatError",
    "error_for",
    "new_idempotency_key",
]
