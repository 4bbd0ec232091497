"""Typed API failures: `ApiError(code, message)`. `code` is a contract failure code (an
ErrorCode the log records or an ApiErrorCode); `http.status_of` maps it to 400/401/403/404/409."""

from __future__ import annotations


class ApiError(Exception):
    def __init__(self, code: str, message: str = "") -> None:
        self.code = code
        self.message = message or code.replace("_", " ")
        super().__init__(f"{code}: {self.message}")


def invalid(message: str) -> ApiError:
    return ApiError("invalid_request", message)


def not_found(message: str = "not found") -> ApiError:
    return ApiError("not_found", message)


class BadParameter(ApiError):
    """A query parameter (or a resume header) outside what the route accepts: invalid_request
    where the route declares it; on a route that does not (the run subscription, the timeline,
    fork points) `http.dispatch` answers 403 forbidden naming the parameter, never not_found,
    which would read as "no such thread"."""

    def __init__(self, message: str) -> None:
        super().__init__("invalid_request", message)


def bad_param(message: str) -> BadParameter:
    return BadParameter(message)
