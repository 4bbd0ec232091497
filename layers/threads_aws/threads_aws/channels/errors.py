"""Channel failures, typed so the route and the effect dispatcher map them without guessing.

Webhook side: ``Unverified`` → 401 ``unverified``, nothing stored; ``NoChallenge`` and
``UnknownChannel`` → 404 ``not_found``.

Send side (one class per effect outcome, semantics.md §4 "Effects and exactly-once"):
- ``SendRetryable``: the provider did not act (connection refused, 429, a documented transient
  rejection): resend later with the same call id (``not_sent`` by ``adapter``).
- ``SendRejected``: the provider refused for good (bad token, unknown channel, window closed):
  the send fails, never retried.
- ``SendOutcomeUnknown``: the request may have been acted on (timeout after the bytes left, a
  dropped connection, a 5xx): ``effect_unknown{reason}``, then reconcile, never a blind resend.
"""

from __future__ import annotations

from typing import Literal


class Unverified(Exception):
    """verify (or a challenge) failed: the route answers 401 ``unverified`` and stores nothing."""

    code = "unverified"


class NoChallenge(Exception):
    """GET on a channel whose provider has no subscription challenge: 404 ``not_found``."""

    code = "not_found"


class UnknownChannel(Exception):
    """A channel name no enabled installation uses: 404 ``not_found``."""

    code = "not_found"


class SendError(Exception):
    def __init__(self, message: str, *, provider_code: str | None = None, http_status: int | None = None):
        self.provider_code = provider_code
        self.http_status = http_status
        super().__init__(message)


class SendRetryable(SendError):
    def __init__(
        self,
        message: str,
        *,
        retry_after_s: float | None = None,
        provider_code: str | None = None,
        http_status: int | None = None,
    ):
        self.retry_after_s = retry_after_s
        super().__init__(message, provider_code=provider_code, http_status=http_status)


class SendRejected(SendError):
    pass


class SendOutcomeUnknown(SendError):
    def __init__(
        self,
        message: str,
        *,
        reason: Literal["timeout", "transport_error"],
        provider_code: str | None = None,
        http_status: int | None = None,
    ):
        self.reason = reason  # effect_unknown.reason
        super().__init__(message, provider_code=provider_code, http_status=http_status)
