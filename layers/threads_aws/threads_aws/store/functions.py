"""Lambda functions as tools: the only code that calls `lambda.invoke` (the "store owns AWS
calls" rule, extended to Lambda). The engine gets a `Functions`, never a client.

`invoke` is one synchronous `Invoke` (RequestResponse) and classifies how it ended, because the
effect rules need to know whether the request may have reached the function:

- `Invoked(payload, function_error)`: the function ran and answered (`X-Amz-Function-Error` set
  when it raised or timed out: Lambda reports both as a function error);
- `NotSent(retryable, reason)`: the request never reached the function (no connection, or Lambda
  refused it before running anything: throttled, not found, access denied, a bad request);
- `Uncertain(reason)`: it was sent and the answer was lost (`timeout`: the read timed out;
  `transport_error`: the connection broke): the function may have run.

The client must not retry by itself (a retried Invoke is a second run of the effect):
`client_config` builds it with one attempt and the tool's read timeout. Logical ids of this
stack's functions resolve through `TOOL_FUNCTIONS` (JSON: logical id -> function name or ARN,
set by template.yaml); an ARN is used as given.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

CONNECT_TIMEOUT_S = 5
#: Lambda error codes that mean "never ran; trying again may work".
RETRYABLE_CODES = frozenset(
    {
        "TooManyRequestsException",
        "ResourceNotReadyException",
        "EC2ThrottledException",
        "ResourceConflictException",
    }
)


@dataclass(frozen=True)
class Invoked:
    payload: bytes
    function_error: str | None  # "Unhandled" / "Handled" when the function failed


@dataclass(frozen=True)
class NotSent:
    retryable: bool
    reason: str


@dataclass(frozen=True)
class Uncertain:
    reason: str  # timeout | transport_error


Outcome = Invoked | NotSent | Uncertain


def client_config(read_timeout_s: float) -> Any:
    from botocore.config import Config

    return Config(
        read_timeout=read_timeout_s,
        connect_timeout=CONNECT_TIMEOUT_S,
        retries={"total_max_attempts": 1, "mode": "standard"},
        tcp_keepalive=True,
    )


def function_names(environ: Mapping[str, str]) -> dict[str, str]:
    raw = environ.get("TOOL_FUNCTIONS") or "{}"
    try:
        names = json.loads(raw)
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in names.items()} if isinstance(names, dict) else {}


class Functions:
    """Invokes tool functions; one client per read timeout (`make_client(read_timeout_s)`)."""

    def __init__(self, make_client: Callable[[float], Any], names: Mapping[str, str]) -> None:
        self._make_client = make_client
        self._names = dict(names)
        self._clients: dict[float, Any] = {}
        self._lock = threading.Lock()

    def resolve(self, function: str) -> str:
        return function if function.startswith("arn:") else self._names.get(function, function)

    def _client(self, timeout_s: float) -> Any:
        with self._lock:
            if timeout_s not in self._clients:
                self._clients[timeout_s] = self._make_client(timeout_s)
            return self._clients[timeout_s]

    def invoke(self, function: str, payload: bytes, *, timeout_ms: int) -> Outcome:
        from botocore.exceptions import (
            ClientError,
            ConnectTimeoutError,
            EndpointConnectionError,
            ReadTimeoutError,
        )

        client = self._client(timeout_ms / 1000)
        try:
            out = client.invoke(
                FunctionName=self.resolve(function), InvocationType="RequestResponse", Payload=payload
            )
        except (EndpointConnectionError, ConnectTimeoutError) as exc:
            return NotSent(True, f"could not connect: {exc}")
        except ReadTimeoutError:
            return Uncertain("timeout")
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
            if status >= 500 and code not in RETRYABLE_CODES:
                return Uncertain("transport_error")  # a 5xx of unknown cause: it may have run
            return NotSent(code in RETRYABLE_CODES, f"{code}: {exc}")
        except Exception:  # noqa: BLE001 - a broken connection after sending: it may have run
            return Uncertain("transport_error")
        try:
            body = out["Payload"].read()
        except Exception:  # noqa: BLE001 - the answer was lost while being read
            return Uncertain("transport_error")
        return Invoked(body, out.get("FunctionError"))
