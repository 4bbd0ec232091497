"""Logs and metrics of the Lambda functions: one Powertools Logger, Powertools Metrics (EMF).

Logs. `logger` is the Powertools Logger of the service (POWERTOOLS_SERVICE_NAME). The library's
own `logging` loggers (`threads_aws` and its children: `threads_aws.host`, ...) write through
its handler, so every line the library writes is the same JSON with the same keys:
- the Lambda context (function name, memory, ARN, request id) and `cold_start`;
- `correlation_id`: API Gateway's request id; in the run-step worker, the id of the request
  whose wake-up the step serves (`enqueue_step` carries the bound id on the SQS message as the
  `correlation_id` attribute; the worker's own re-enqueue keeps it), else the message id;
- `thread_id`, `run_id`, `branch_id` as soon as the code serving the invocation knows them
  (`bind`).
The keys live in a context variable, cleared when an invocation starts (`entry`): the local
host serves many requests on threads of one process, and none sees another's keys.

Metrics. `count` and `duration_ms` collect values per invocation (a context variable as well);
`entry` writes them when the invocation ends, one CloudWatch EMF line per dimension set, on
stdout: CloudWatch Logs turns them into metrics, so emitting costs no API call and no latency.
Namespace POWERTOOLS_METRICS_NAMESPACE, dimension `service`. Names are in `Metric`.

Import cost: nothing beyond what every handler imports already (the Powertools package imports
its Logger and Metrics modules either way).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar, cast

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

SERVICE = os.environ.get("POWERTOOLS_SERVICE_NAME", "threads-aws")
NAMESPACE = os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "threads-aws")
CORRELATION_ATTRIBUTE = "correlation_id"  # SQS message attribute of a run step


class Metric:
    """Metric names (CloudWatch, namespace NAMESPACE)."""

    RUNS_ACCEPTED = "RunsAccepted"  # POST /v1/runs answered 202 (replays of a key included)
    RUNS_STARTED = "RunsStarted"  # a run committed with a new receipt (replays not counted)
    RUNS_SETTLED = "RunsSettled"  # a turn_completed appended; dimension outcome: its reason
    STEPS = "Steps"  # run-step records served; dimension state: idle, parked, more, busy, error
    STEP_DURATION = "StepDuration"  # ms per record, dimension state
    EVENTS_APPENDED = "EventsAppended"  # log lines a step appended
    REDELIVERIES = "QueueRedeliveries"  # run-step records received more than once
    MODEL_LATENCY = "ModelLatency"  # ms per model call; dimension adapter


logger = Logger(service=SERVICE)
# The library's loggers: `threads_aws` gets the Powertools handler (and its level), its
# children propagate to it. Registered first: copy_config only touches existing loggers.
logging.getLogger("threads_aws")
copy_config_to_registered_loggers(source_logger=logger, include={"threads_aws"})
_engine_log = logging.getLogger("threads_aws.engine")

Dimensions = tuple[tuple[str, str], ...]
_metrics: ContextVar[dict[Dimensions, list[tuple[str, str, float]]] | None] = ContextVar(
    "threads_aws_metrics", default=None
)
_cold = True

F = TypeVar("F", bound=Callable[..., Any])
A = TypeVar("A")


# ---------------------------------------------------------------- log keys


def bind(**keys: Any) -> None:
    """Add keys to every following log line of this invocation (None values are skipped)."""
    keys = {k: v for k, v in keys.items() if v is not None}
    if keys:
        logger.thread_safe_append_keys(**keys)


def correlation_id() -> str | None:
    value = logger.thread_safe_get_current_keys().get("correlation_id")
    return str(value) if value is not None else None


def bound(name: str) -> str | None:
    value = logger.thread_safe_get_current_keys().get(name)
    return str(value) if value is not None else None


def _path_keys(event: Mapping[str, Any]) -> dict[str, Any]:
    params = event.get("pathParameters") or {}
    query = event.get("queryStringParameters") or {}
    return {
        "thread_id": params.get("thread_id"),
        "run_id": params.get("run_id"),
        "branch_id": query.get("branch_id") or params.get("branch_id"),
    }


# ---------------------------------------------------------------- metrics


def count(name: str, value: float = 1, **dimensions: str) -> None:
    _add(name, MetricUnit.Count, value, dimensions)


def duration_ms(name: str, ms: float, **dimensions: str) -> None:
    _add(name, MetricUnit.Milliseconds, ms, dimensions)


@contextmanager
def timed(name: str, **dimensions: str) -> Iterator[dict[str, str]]:
    """Time the block as `name` (ms); the block may add dimensions to the yielded dict."""
    dims = dict(dimensions)
    t0 = time.perf_counter()
    try:
        yield dims
    finally:
        duration_ms(name, (time.perf_counter() - t0) * 1000, **dims)


def _add(name: str, unit: MetricUnit, value: float, dimensions: Mapping[str, str]) -> None:
    pending = _metrics.get()
    if pending is None:  # outside an invocation (tests, tools): nothing to flush into
        return
    key = tuple(sorted((k, str(v)) for k, v in dimensions.items()))
    pending.setdefault(key, []).append((name, unit.value, value))


def flush() -> None:
    """Write this invocation's metrics (one EMF line per dimension set) and start afresh."""
    pending = _metrics.get()
    _metrics.set({})
    for dims, values in (pending or {}).items():
        m = EphemeralMetrics(namespace=NAMESPACE, service=SERVICE)
        for k, v in dims:
            m.add_dimension(name=k, value=v)
        for name, unit, value in values:
            m.add_metric(name=name, unit=unit, value=value)
        m.flush_metrics()


# ---------------------------------------------------------------- entry-point call sites


def run_accepted(body: str) -> None:
    """POST /v1/runs answered 202: the rest of the invocation logs the run's ids."""
    try:
        ids = json.loads(body)
    except ValueError:
        return
    bind(thread_id=ids.get("thread_id"), branch_id=ids.get("branch_id"), run_id=ids.get("run_id"))
    count(Metric.RUNS_ACCEPTED)


def branch_loaded(thread_id: str, run_id: str | None) -> None:
    """The run step loaded its branch: its thread and the open turn's run on the log lines."""
    bind(thread_id=thread_id, run_id=run_id)


def turn_ends(types_and_data: Iterable[tuple[str, Mapping[str, Any]]]) -> None:
    """Appended events: each `turn_completed` counts a settled run by its reason."""
    for kind, data in types_and_data:
        if kind == "turn_completed":
            count(Metric.RUNS_SETTLED, outcome=str(data.get("reason")))


class _TimedAdapter:
    """A model adapter whose `complete` is timed as ModelLatency (failures included); every
    other attribute is the adapter's own (its `preflight`, capabilities, ...)."""

    def __init__(self, adapter: Any, name: str) -> None:
        self._adapter = adapter
        self._name = name

    def complete(self, *args: Any, **kwargs: Any) -> Any:
        with timed(Metric.MODEL_LATENCY, adapter=self._name):
            return self._adapter.complete(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._adapter, name)


def model_latency(adapter: A, ref: Mapping[str, Any]) -> A:
    """`adapter` with its model calls timed as ModelLatency, dimension adapter: the settings'
    adapter name (`ref`: the settings' `adapter` object)."""
    return cast(A, _TimedAdapter(adapter, str(ref.get("name") if isinstance(ref, Mapping) else ref)))


def message_attributes() -> dict[str, Any]:
    """`send_message` keyword arguments carrying the bound correlation id to the worker."""
    cid = correlation_id()
    if cid is None:
        return {}
    return {"MessageAttributes": {CORRELATION_ATTRIBUTE: {"DataType": "String", "StringValue": cid}}}


@contextmanager
def step(record: Any, branch_id: str) -> Iterator[dict[str, Any]]:
    """One run-step record (a Powertools SQSRecord): its keys on the log lines written while
    it is served (then the invocation's keys again), and the step's metrics. The block sets
    `state` and `appended` in the yielded dict; a block that raises counts as state `error`."""
    before = dict(logger.thread_safe_get_current_keys())
    attr = record.message_attributes[CORRELATION_ATTRIBUTE]  # None when absent (not dict.get)
    cid = attr.string_value if attr is not None else None
    bind(branch_id=branch_id, correlation_id=cid or record.message_id, message_id=record.message_id)
    if int(record.attributes.get("ApproximateReceiveCount") or 1) > 1:
        count(Metric.REDELIVERIES)
    got: dict[str, Any] = {}
    t0 = time.perf_counter()
    try:
        yield got
    except Exception:
        if "state" not in got:  # not an outcome (busy raises to fail the record): a failure
            _engine_log.exception("run step failed; the record is retried")
        raise
    finally:
        state = str(got.get("state", "error"))
        duration_ms(Metric.STEP_DURATION, (time.perf_counter() - t0) * 1000, state=state)
        count(Metric.STEPS, state=state)
        if got.get("appended"):
            count(Metric.EVENTS_APPENDED, got["appended"])
        logger.thread_safe_clear_keys()
        bind(**before)


# ---------------------------------------------------------------- handler wrapper


def entry(kind: str) -> Callable[[F], F]:
    """Wrap a function's `handler`: fresh log keys (Lambda context, cold start, correlation id,
    the ids in the path) and metrics for the invocation, written when it ends.
    `kind`: "api" (API Gateway REST proxy or REQUEST authorizer events) or "sqs" (the worker:
    per-record keys are bound by the record handler)."""

    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def handler(event: dict[str, Any], context: Any) -> Any:
            global _cold
            cold, _cold = _cold, False
            logger.thread_safe_clear_keys()
            keys: dict[str, Any] = {"cold_start": cold, **_context_keys(context)}
            if kind == "api":
                keys["correlation_id"] = (event.get("requestContext") or {}).get("requestId")
                keys.update(_path_keys(event))
            bind(**keys)
            _metrics.set({})
            try:
                return fn(event, context)
            finally:
                flush()
                _metrics.set(None)

        return handler  # type: ignore[return-value]

    return wrap


def _context_keys(context: Any) -> dict[str, Any]:
    if context is None:
        return {}
    return {
        "function_name": getattr(context, "function_name", None),
        "function_memory_size": getattr(context, "memory_limit_in_mb", None),
        "function_arn": getattr(context, "invoked_function_arn", None),
        "function_request_id": getattr(context, "aws_request_id", None),
    }


__all__ = [
    "CORRELATION_ATTRIBUTE",
    "Metric",
    "bind",
    "bound",
    "branch_loaded",
    "correlation_id",
    "count",
    "duration_ms",
    "entry",
    "flush",
    "logger",
    "message_attributes",
    "model_latency",
    "run_accepted",
    "step",
    "timed",
    "turn_ends",
]
