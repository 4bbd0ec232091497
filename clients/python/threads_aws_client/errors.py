"""Typed failures of the host API, one class per contract error code a route (or the gateway in
front of it) can answer.

Every non-2xx answer of the host is an ErrorBody `{"error": {"code", "message"}}` (openapi.json
`Failure`: a wire ErrorCode or an ApiErrorCode). `error_for(code)` picks the class; a code this
client does not know yet (add-only enums) still raises, as the base `ThreadsError` with that code.

Two classes are the client's own, not contract codes on the wire:
- `ConnectionFailed` (an `UnavailableError`, code `unavailable`, status None): the host could not
  be reached or the connection broke, after the retries the call allows;
- `UnexpectedResponse` (code `unexpected_response`): an answer that is not the contract's (not
  JSON, or not an ErrorBody), e.g. from a proxy in between.
"""

from __future__ import annotations

from typing import ClassVar


class ThreadsError(Exception):
    """A typed failure: `code` (the contract's), `message` (the host's words), `status` (HTTP).

    `idempotency_key` is set on failures of `start_run`: retry the same call with it and the host
    replays the receipt instead of starting a second run. `retryable` says the host did nothing
    and the same call may simply be sent again later."""

    code: str = "error"
    retryable: ClassVar[bool] = False

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        status: int | None = None,
        idempotency_key: str | None = None,
    ) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.status = status
        self.idempotency_key = idempotency_key

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, status={self.status!r}, message={self.message!r})"


# ------------------------------------------------------------------ HTTP-level codes
class InvalidRequestError(ThreadsError):
    code = "invalid_request"  # 400: the body, a parameter or a header is not what the route takes


class UnauthenticatedError(ThreadsError):
    code = "unauthenticated"  # 401: no valid bearer token


class ForbiddenError(ThreadsError):
    code = "forbidden"  # 403: authenticated, but not allowed (e.g. no approval authority)


class NotFoundError(ThreadsError):
    code = "not_found"  # 404: no such thread/branch/run in this tenant, or no such route


class TooLargeError(ThreadsError):
    code = "too_large"  # 413 from the gateway: the request is over what API Gateway accepts


class UnavailableError(ThreadsError):
    code = "unavailable"  # 429/5xx from the gateway: throttled or failed; retry later
    retryable = True


class GatewayTimeoutError(ThreadsError):
    code = "timeout"  # 504 from the gateway: the function did not answer in time
    retryable = True


# ------------------------------------------------------------------ domain codes (409)
class BranchBusyError(ThreadsError):
    code = "branch_busy"  # another writer holds the branch lease; nothing was written
    retryable = True


class BusyError(ThreadsError):
    code = "busy"  # deleteThread: a branch holds a lease or an effect in doubt; nothing was deleted
    retryable = True


class BranchNotRunnableError(ThreadsError):
    code = "branch_not_runnable"  # an inspection-only branch


class IdempotencyKeyReusedError(ThreadsError):
    code = "idempotency_key_reused"  # the key was used with a different body


class IdempotencyKeyPrincipalMismatchError(ThreadsError):
    code = "idempotency_key_principal_mismatch"  # the key belongs to another principal


class LogCorruptError(ThreadsError):
    code = "log_corrupt"


class UnsupportedFormatError(ThreadsError):
    code = "unsupported_format"


class UnsupportedCriticalEventError(ThreadsError):
    code = "unsupported_critical_event"


class InvalidTransitionError(ThreadsError):
    code = "invalid_transition"  # a settings or mode change the log's rules refuse now


class ApprovalMismatchError(ThreadsError):
    code = "approval_mismatch"


class ApprovalExpiredError(ThreadsError):
    code = "approval_expired"


class ApprovalDuplicateError(ThreadsError):
    code = "approval_duplicate"  # the challenge was already decided


class NoOpenQuestionError(ThreadsError):
    code = "no_open_question"


class NotParkedError(ThreadsError):
    code = "not_parked"


class SandboxRequiredError(ThreadsError):
    code = "sandbox_required"


class NoSnapshotBoundaryError(ThreadsError):
    code = "no_snapshot_boundary"


class SnapshotExpiredError(ThreadsError):
    code = "snapshot_expired"


class SnapshotMissingError(ThreadsError):
    code = "snapshot_missing"


class SnapshotRestoreFailedError(ThreadsError):
    code = "snapshot_restore_failed"


class SnapshotManifestMismatchError(ThreadsError):
    code = "snapshot_manifest_mismatch"


class ResourceUnknownError(ThreadsError):
    code = "resource_unknown"


class EgressPolicyUnsupportedError(ThreadsError):
    code = "egress_policy_unsupported"


# ------------------------------------------------------------------ the client's own
class ConnectionFailed(UnavailableError):
    """The host could not be reached, or the connection broke, after the allowed retries."""

    def __init__(self, message: str, *, idempotency_key: str | None = None) -> None:
        super().__init__(message, idempotency_key=idempotency_key)


class UnexpectedResponse(ThreadsError):
    """An answer that is not the contract's: not JSON, not an ErrorBody, not the route's shape."""

    code = "unexpected_response"


def _by_code() -> dict[str, type[ThreadsError]]:
    out: dict[str, type[ThreadsError]] = {}
    stack: list[type[ThreadsError]] = [ThreadsError]
    while stack:
        cls = stack.pop()
        for sub in cls.__subclasses__():
            stack.append(sub)
            if sub in (ConnectionFailed, UnexpectedResponse):
                continue
            out.setdefault(sub.code, sub)
    return out


ERRORS: dict[str, type[ThreadsError]] = _by_code()


def error_for(code: str) -> type[ThreadsError]:
    """The class for a contract code; the base class for a code this client does not know."""
    return ERRORS.get(code, ThreadsError)


def make_error(
    code: str, message: str, status: int | None, idempotency_key: str | None = None
) -> ThreadsError:
    return error_for(code)(message, code=code, status=status, idempotency_key=idempotency_key)
