"""What AWS refuses and moto accepts: a botocore hook that checks every request against the
documented service limits moto does not enforce (or enforces differently), so a test or a
`threads-aws dev` run fails on a request the deployed stack would have refused.

Installed on botocore itself (`install`): the check is added to `botocore.handlers.
BUILTIN_HANDLERS`, so every botocore session created afterwards (boto3's default session, each
`boto3.Session()`, every client made anywhere) runs it, plus boto3's default session if it
already exists. It runs on `before-parameter-build` registered last (after boto3's own
transformations, before serialisation) and on `after-call` (Lambda's response size).

A violation is recorded (`violations`), logged, appended as a JSON line to
`$THREADS_AWS_LIMITS_LOG` if set, and, in the default strict mode, raised as `AwsLimitExceeded`,
a ClientError with the code AWS answers (ValidationException, ...), so the code under test sees
what it would see on AWS. The test suite (tests/conftest.py) fails any test that records one
(in process or in a dev subprocess's log) unless the test expects it (`expect_refusals`).
`$THREADS_AWS_LIMITS`: `strict` (raise), `warn` (record and log only), `off`; `threads-aws dev`
installs it when the variable is set (`install_from_env`).

Limits (and who enforces them; moto 5.2.x, checked in its source):

  DynamoDB (item and key sizes as DynamoDB counts them, `attribute_size`: UTF-8 names + values;
  a number 1 byte per two significant digits + 1; a list or map 3 bytes + 1 per element; null
  and boolean 1 byte)
    TransactWriteItems <= 100 actions        moto checks (> 100)
    TransactWriteItems <= 4 MB aggregate     hook only (Puts by item size; an Update, Delete or
                                             ConditionCheck by its key + values: the stored
                                             item's size is not known client-side)
    TransactGetItems <= 100 actions          moto refuses > 25 (stricter than AWS), hook: 100
    item <= 400 KB (409,600 bytes)           moto: ~405,000 by its own count (numbers as
                                             digits, no list/map overhead), also on updates;
                                             hook: Put items by DynamoDB's count
    partition key <= 2,048 B, sort <= 1,024  moto on stored items; hook also on Key params
                                             (tables whose CreateTable this process made)
    BatchGetItem <= 100 keys                 moto checks
    BatchWriteItem <= 25 requests            hook only
    expression strings <= 4 KB               hook only
  SQS
    message <= 1 MiB (1,048,576 bytes: body + attribute names, types and values; the limit
    since 2025, the API model's docs and moto's constant say so; it was 256 KiB)
                                             moto: body characters vs the queue's maximum;
                                             hook: UTF-8 bytes with attributes
    batch <= 10 entries                      moto checks SendMessageBatch; hook: every batch
    batch total <= 1 MiB                     hook only
    ReceiveMessage MaxNumberOfMessages 1-10  hook
  Lambda Invoke
    sync request <= 6 MB (6,291,456 bytes)   hook (and `lambda_invoke` answers 413 as Lambda)
    async (Event) request <= 1 MB (1,048,576; the API model's Invoke docs; it was 256 KB)
                                             hook
    sync response <= 6 MB (6,291,556 bytes)  moto's own Lambda (~6,000,000 by getsizeof);
                                             hook on the response; `lambda_invoke` answers
                                             Function.ResponseSizeTooLarge as Lambda does
  EventBridge Scheduler
    Name, GroupName 1-64 of [0-9a-zA-Z-_.]   botocore checks min length only, moto nothing;
                                             hook
    ScheduleExpression: at(...), rate(n unit), or cron with 6 fields (min hour dom month dow
    year), exactly one of day-of-month / day-of-week `?`     hook (moto stores any string)
  S3
    key <= 1,024 bytes UTF-8                 hook only
    user metadata <= 2 KB (2,048 bytes of UTF-8 keys + values)  hook only
    DeleteObjects <= 1,000 keys              hook
  API Gateway (not a botocore call: `local.gateway` enforces these as the deployed API answers)
    29 s integration timeout (non-streaming routes)  gateway: 504 INTEGRATION_TIMEOUT
    Lambda's 6 MB request / response                  gateway: 500 / 502
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import threading
from collections.abc import Callable, Iterator
from decimal import Decimal, InvalidOperation
from typing import Any

from botocore.exceptions import ClientError

log = logging.getLogger("threads_aws_dev.aws_limits")

KB = 1024
MB = 1024 * 1024
ITEM_MAX = 400 * KB
PARTITION_KEY_MAX = 2048
SORT_KEY_MAX = 1024
TRANSACT_ITEMS_MAX = 100
TRANSACT_BYTES_MAX = 4 * MB
BATCH_GET_MAX = 100
BATCH_WRITE_MAX = 25
EXPRESSION_MAX = 4 * KB
SQS_MESSAGE_MAX = 1_048_576
SQS_BATCH_MAX = 10
LAMBDA_SYNC_REQUEST_MAX = 6_291_456
LAMBDA_SYNC_RESPONSE_MAX = 6_291_556
LAMBDA_ASYNC_REQUEST_MAX = 1_048_576
S3_KEY_MAX = 1024
S3_METADATA_MAX = 2 * KB
S3_DELETE_MAX = 1000
SCHEDULER_NAME = re.compile(r"[0-9a-zA-Z\-_.]{1,64}\Z")

ENV_MODE = "THREADS_AWS_LIMITS"
ENV_LOG = "THREADS_AWS_LIMITS_LOG"


class AwsLimitExceeded(ClientError):
    """A request AWS would refuse (moto would have accepted it): the code AWS answers."""

    def __init__(self, service: str, operation: str, code: str, message: str) -> None:
        super().__init__({"Error": {"Code": code, "Message": message}}, operation)
        self.service = service
        self.message = message


# -- DynamoDB sizes, as DynamoDB counts them (CapacityUnitCalculations / ServiceQuotas docs)


def _utf8(s: Any) -> int:
    return len(s.encode("utf-8")) if isinstance(s, str) else len(s)


def _number_size(text: str) -> int:
    try:
        digits = Decimal(text).as_tuple().digits
    except (InvalidOperation, TypeError):
        return len(str(text))
    significant = "".join(map(str, digits)).strip("0") or "0"
    return (len(significant) + 1) // 2 + 1


def attribute_size(value: Any) -> int:
    """One AttributeValue's size in bytes (the low-level {"S": ...} form)."""
    if not isinstance(value, dict) or len(value) != 1:
        return 0
    ((kind, v),) = value.items()
    if kind == "S":
        return _utf8(v)
    if kind == "N":
        return _number_size(v)
    if kind == "B":
        return _utf8(v)
    if kind == "SS" or kind == "BS":
        return sum(_utf8(x) for x in v)
    if kind == "NS":
        return sum(_number_size(x) for x in v)
    if kind == "M":
        return 3 + sum(_utf8(k) + attribute_size(x) + 1 for k, x in v.items())
    if kind == "L":
        return 3 + sum(attribute_size(x) + 1 for x in v)
    return 1  # NULL, BOOL


def item_size(item: dict[str, Any]) -> int:
    return sum(_utf8(name) + attribute_size(v) for name, v in item.items())


# -- the checks: (service, operation) -> check(params) yielding (code, message) refusals

Refusal = tuple[str, str]
_key_schemas: dict[str, tuple[set[str], set[str]]] = {}  # table -> (hash attrs, range attrs)
_VALIDATION = "ValidationException"


def _learn_table(params: dict[str, Any]) -> None:
    hashes: set[str] = set()
    ranges: set[str] = set()
    schemas = [params.get("KeySchema") or []]
    for idx in (params.get("GlobalSecondaryIndexes") or []) + (params.get("LocalSecondaryIndexes") or []):
        schemas.append(idx.get("KeySchema") or [])
    for schema in schemas:
        for k in schema:
            (hashes if k.get("KeyType") == "HASH" else ranges).add(k.get("AttributeName"))
    if params.get("TableName"):
        _key_schemas[params["TableName"]] = (hashes, ranges)


def _key_refusals(table: str | None, attrs: dict[str, Any] | None) -> list[Refusal]:
    """Key sizes: a sort key (of the table or an index) <= 1,024 bytes, any other key attribute
    <= 2,048 (all of a Key's attributes are held to 2,048 when the table's schema is unknown)."""
    if not attrs:
        return []
    _, ranges = _key_schemas.get(table or "", (set(), set()))
    out = []
    for name, v in attrs.items():
        size = attribute_size(v)
        if name in ranges and size > SORT_KEY_MAX:
            out.append((_VALIDATION, f"{table}: sort key {name} is {size} bytes, over {SORT_KEY_MAX}"))
        elif size > PARTITION_KEY_MAX:
            out.append(
                (_VALIDATION, f"{table}: partition key {name} is {size} bytes, over {PARTITION_KEY_MAX}")
            )
    return out


def _key_of(table: str | None, item: dict[str, Any]) -> dict[str, Any]:
    """The key attributes of a Put item (all of them if the table's schema is unknown: none)."""
    hashes, ranges = _key_schemas.get(table or "", (set(), set()))
    return {k: v for k, v in item.items() if k in hashes or k in ranges}


def _put_refusals(table: str | None, item: dict[str, Any] | None) -> list[Refusal]:
    if not item:
        return []
    out = _key_refusals(table, _key_of(table, item))
    size = item_size(item)
    if size > ITEM_MAX:
        out.append((_VALIDATION, f"{table}: item of {size} bytes, over DynamoDB's 400 KB ({ITEM_MAX})"))
    return out


def _expression_refusals(params: dict[str, Any]) -> list[Refusal]:
    out = []
    for name in (
        "ConditionExpression",
        "UpdateExpression",
        "ProjectionExpression",
        "KeyConditionExpression",
        "FilterExpression",
    ):
        text = params.get(name)
        if isinstance(text, str) and _utf8(text) > EXPRESSION_MAX:
            out.append((_VALIDATION, f"{name} of {_utf8(text)} bytes, over {EXPRESSION_MAX}"))
    return out


def _values_size(params: dict[str, Any]) -> int:
    values = params.get("ExpressionAttributeValues") or {}
    return sum(attribute_size(v) for v in values.values())


def _ddb_single(params: dict[str, Any], op: str) -> list[Refusal]:
    table = params.get("TableName")
    out = _expression_refusals(params)
    if op == "PutItem":
        out += _put_refusals(table, params.get("Item"))
    else:
        out += _key_refusals(table, params.get("Key"))
    return out


def _ddb_transact_write(params: dict[str, Any]) -> list[Refusal]:
    items = params.get("TransactItems") or []
    out: list[Refusal] = []
    if len(items) > TRANSACT_ITEMS_MAX:
        out.append((_VALIDATION, f"TransactWriteItems of {len(items)} actions, over {TRANSACT_ITEMS_MAX}"))
    total = 0
    for entry in items:
        for kind, action in entry.items():
            table = action.get("TableName")
            out += _expression_refusals(action)
            if kind == "Put":
                out += _put_refusals(table, action.get("Item"))
                total += item_size(action.get("Item") or {})
            else:
                out += _key_refusals(table, action.get("Key"))
                total += item_size(action.get("Key") or {}) + _values_size(action)
    if total > TRANSACT_BYTES_MAX:
        out.append((_VALIDATION, f"TransactWriteItems of {total} bytes, over 4 MB ({TRANSACT_BYTES_MAX})"))
    return out


def _ddb_transact_get(params: dict[str, Any]) -> list[Refusal]:
    items = params.get("TransactItems") or []
    out: list[Refusal] = []
    if len(items) > TRANSACT_ITEMS_MAX:
        out.append((_VALIDATION, f"TransactGetItems of {len(items)} actions, over {TRANSACT_ITEMS_MAX}"))
    for entry in items:
        get = entry.get("Get") or {}
        out += _key_refusals(get.get("TableName"), get.get("Key"))
    return out


def _ddb_batch_write(params: dict[str, Any]) -> list[Refusal]:
    requests = params.get("RequestItems") or {}
    n = sum(len(v) for v in requests.values())
    out: list[Refusal] = []
    if n > BATCH_WRITE_MAX:
        out.append((_VALIDATION, f"BatchWriteItem of {n} requests, over {BATCH_WRITE_MAX}"))
    for table, reqs in requests.items():
        for r in reqs:
            if "PutRequest" in r:
                out += _put_refusals(table, r["PutRequest"].get("Item"))
            elif "DeleteRequest" in r:
                out += _key_refusals(table, r["DeleteRequest"].get("Key"))
    return out


def _ddb_batch_get(params: dict[str, Any]) -> list[Refusal]:
    requests = params.get("RequestItems") or {}
    n = sum(len(v.get("Keys") or []) for v in requests.values())
    out: list[Refusal] = []
    if n > BATCH_GET_MAX:
        out.append((_VALIDATION, f"BatchGetItem of {n} keys, over {BATCH_GET_MAX}"))
    for table, req in requests.items():
        for key in req.get("Keys") or []:
            out += _key_refusals(table, key)
    return out


def _ddb_query(params: dict[str, Any]) -> list[Refusal]:
    return _expression_refusals(params)


# -- SQS


def _sqs_message_size(entry: dict[str, Any]) -> int:
    size = _utf8(entry.get("MessageBody") or "")
    for name, attr in (entry.get("MessageAttributes") or {}).items():
        size += _utf8(name) + _utf8(attr.get("DataType") or "")
        size += _utf8(attr.get("StringValue") or "") + len(attr.get("BinaryValue") or b"")
    return size


def _sqs_send(params: dict[str, Any]) -> list[Refusal]:
    size = _sqs_message_size(params)
    if size > SQS_MESSAGE_MAX:
        return [("InvalidParameterValue", f"message of {size} bytes, over SQS's 1 MiB ({SQS_MESSAGE_MAX})")]
    return []


def _sqs_batch(params: dict[str, Any], op: str) -> list[Refusal]:
    entries = params.get("Entries") or []
    out: list[Refusal] = []
    if len(entries) > SQS_BATCH_MAX:
        out.append(("TooManyEntriesInBatchRequest", f"{op} of {len(entries)} entries, over {SQS_BATCH_MAX}"))
    if op == "SendMessageBatch":
        sizes = [_sqs_message_size(e) for e in entries]
        for size in sizes:
            if size > SQS_MESSAGE_MAX:
                out.append(("InvalidParameterValue", f"message of {size} bytes, over {SQS_MESSAGE_MAX}"))
        if sum(sizes) > SQS_MESSAGE_MAX:
            out.append(("BatchRequestTooLong", f"batch of {sum(sizes)} bytes, over {SQS_MESSAGE_MAX}"))
    return out


def _sqs_receive(params: dict[str, Any]) -> list[Refusal]:
    n = params.get("MaxNumberOfMessages")
    if n is not None and not 1 <= int(n) <= SQS_BATCH_MAX:
        return [("InvalidParameterValue", f"MaxNumberOfMessages {n}, not 1-{SQS_BATCH_MAX}")]
    return []


# -- Lambda


def _payload_size(payload: Any) -> int | None:
    if payload is None:
        return 0
    if isinstance(payload, (bytes, bytearray, str)):
        return _utf8(payload)
    return None  # a file-like body: not read here


def _lambda_invoke(params: dict[str, Any]) -> list[Refusal]:
    size = _payload_size(params.get("Payload"))
    if size is None:
        return []
    if params.get("InvocationType") == "Event":
        if size > LAMBDA_ASYNC_REQUEST_MAX:
            return [
                (
                    "RequestEntityTooLargeException",
                    f"async payload of {size} bytes, over {LAMBDA_ASYNC_REQUEST_MAX}",
                )
            ]
    elif size > LAMBDA_SYNC_REQUEST_MAX:
        return [
            ("RequestEntityTooLargeException", f"payload of {size} bytes, over {LAMBDA_SYNC_REQUEST_MAX}")
        ]
    return []


# -- EventBridge Scheduler


_CRON_FIELDS = (  # name, lo, hi, extra characters allowed
    ("minutes", 0, 59, ""),
    ("hours", 0, 23, ""),
    ("day-of-month", 1, 31, "?LW"),
    ("month", 1, 12, ""),
    ("day-of-week", 1, 7, "?L#"),
    ("year", 1970, 2199, ""),
)
_MONTHS = "JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC".split()
_DAYS = "SUN MON TUE WED THU FRI SAT".split()
_RATE = re.compile(r"rate\(([1-9][0-9]*) (minute|minutes|hour|hours|day|days)\)\Z")
_AT = re.compile(r"at\(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\)\Z")


def _cron_value(tok: str, name: str, lo: int, hi: int) -> bool:
    names = _MONTHS if name == "month" else _DAYS if name == "day-of-week" else []
    if tok in names:
        return True
    return tok.isdigit() and lo <= int(tok) <= hi


def _cron_part(part: str, name: str, lo: int, hi: int, extra: str) -> bool:
    if part == "*" or (part == "?" and "?" in extra):
        return True
    if "L" in extra and (part in ("L", "LW") or re.fullmatch(r"L-\d+", part)):
        return part == "L" or name == "day-of-month"
    if "L" in extra and part.endswith("L") and len(part) > 1:
        return name == "day-of-week" and _cron_value(part[:-1], name, lo, hi)
    if "W" in extra and part.endswith("W"):
        return _cron_value(part[:-1], name, lo, hi)
    if "#" in extra and "#" in part:
        day, _, nth = part.partition("#")
        return _cron_value(day, name, lo, hi) and nth in ("1", "2", "3", "4", "5")
    span, slash, step = part.partition("/")
    if slash and (not step.isdigit() or int(step) < 1 or name == "day-of-week"):
        return False
    if span == "*":
        return bool(slash)
    a, dash, b = span.partition("-")
    return _cron_value(a, name, lo, hi) and (not dash or _cron_value(b, name, lo, hi))


def cron_refusal(expression: str) -> str | None:
    """Why EventBridge Scheduler refuses this ScheduleExpression (None: it accepts it)."""
    if not 1 <= len(expression) <= 256:
        return f"expression of {len(expression)} characters, not 1-256"
    if expression.startswith("rate("):
        return None if _RATE.match(expression) else f"{expression!r} is not rate(value unit)"
    if expression.startswith("at("):
        return None if _AT.match(expression) else f"{expression!r} is not at(yyyy-mm-ddThh:mm:ss)"
    if not (expression.startswith("cron(") and expression.endswith(")")):
        return f"{expression!r} is not at(...), rate(...) or cron(...)"
    fields = expression[5:-1].split(" ")
    if len(fields) != 6:
        return f"{expression!r}: a cron expression has 6 fields (minutes hours dom month dow year)"
    for text, (name, lo, hi, extra) in zip(fields, _CRON_FIELDS, strict=True):
        parts = text.split(",")
        if any(not p or not _cron_part(p, name, lo, hi, extra) for p in parts):
            return f"{expression!r}: cannot read the {name} field {text!r}"
        if "?" in parts and len(parts) > 1:
            return f"{expression!r}: '?' stands alone in {name}"
    if (fields[2] == "?") == (fields[4] == "?"):
        return f"{expression!r}: exactly one of day-of-month and day-of-week must be '?'"
    return None


def _scheduler(params: dict[str, Any]) -> list[Refusal]:
    out: list[Refusal] = []
    for field in ("Name", "GroupName"):
        v = params.get(field)
        if v is not None and not SCHEDULER_NAME.match(str(v)):
            out.append((_VALIDATION, f"{field} {v!r} is not 1-64 characters of [0-9a-zA-Z-_.]"))
    expr = params.get("ScheduleExpression")
    if expr is not None:
        why = cron_refusal(str(expr))
        if why:
            out.append((_VALIDATION, f"Invalid Schedule Expression: {why}"))
    return out


# -- S3


def _s3(params: dict[str, Any], op: str) -> list[Refusal]:
    out: list[Refusal] = []
    keys = [params["Key"]] if isinstance(params.get("Key"), str) else []
    if op == "DeleteObjects":
        objects = (params.get("Delete") or {}).get("Objects") or []
        if len(objects) > S3_DELETE_MAX:
            out.append(("MalformedXML", f"DeleteObjects of {len(objects)} keys, over {S3_DELETE_MAX}"))
        keys += [o.get("Key") or "" for o in objects]
    for key in keys:
        if _utf8(key) > S3_KEY_MAX:
            out.append(("KeyTooLongError", f"key of {_utf8(key)} bytes, over {S3_KEY_MAX}"))
    meta = params.get("Metadata") or {}
    size = sum(_utf8(k) + _utf8(v) for k, v in meta.items())
    if size > S3_METADATA_MAX:
        out.append(("MetadataTooLarge", f"user metadata of {size} bytes, over {S3_METADATA_MAX}"))
    return out


_DDB_SINGLE = ("PutItem", "GetItem", "UpdateItem", "DeleteItem")
CHECKS: dict[tuple[str, str], Callable[[dict[str, Any]], list[Refusal]]] = {
    **{("dynamodb", op): (lambda p, op=op: _ddb_single(p, op)) for op in _DDB_SINGLE},  # type: ignore[misc]
    ("dynamodb", "TransactWriteItems"): _ddb_transact_write,
    ("dynamodb", "TransactGetItems"): _ddb_transact_get,
    ("dynamodb", "BatchWriteItem"): _ddb_batch_write,
    ("dynamodb", "BatchGetItem"): _ddb_batch_get,
    ("dynamodb", "Query"): _ddb_query,
    ("dynamodb", "Scan"): _ddb_query,
    ("sqs", "SendMessage"): _sqs_send,
    ("sqs", "SendMessageBatch"): lambda p: _sqs_batch(p, "SendMessageBatch"),
    ("sqs", "DeleteMessageBatch"): lambda p: _sqs_batch(p, "DeleteMessageBatch"),
    ("sqs", "ChangeMessageVisibilityBatch"): lambda p: _sqs_batch(p, "ChangeMessageVisibilityBatch"),
    ("sqs", "ReceiveMessage"): _sqs_receive,
    ("lambda", "Invoke"): _lambda_invoke,
    ("scheduler", "CreateSchedule"): _scheduler,
    ("scheduler", "UpdateSchedule"): _scheduler,
    ("scheduler", "GetSchedule"): _scheduler,
    ("scheduler", "DeleteSchedule"): _scheduler,
    **{
        ("s3", op): (lambda p, op=op: _s3(p, op))  # type: ignore[misc]
        for op in (
            "PutObject",
            "GetObject",
            "HeadObject",
            "DeleteObject",
            "DeleteObjects",
            "CopyObject",
            "CreateMultipartUpload",
            "UploadPart",
            "CompleteMultipartUpload",
        )
    },
}


def check(service: str, operation: str, params: dict[str, Any]) -> list[Refusal]:
    """The refusals AWS would answer this request with (empty: within every limit checked)."""
    if service == "dynamodb" and operation == "CreateTable":
        _learn_table(params)
        return []
    fn = CHECKS.get((service, operation))
    if fn is None or not isinstance(params, dict):
        return []
    try:
        return fn(params)
    except (AttributeError, TypeError, ValueError):  # malformed params: botocore's validation says so
        return []


def response_refusals(service: str, operation: str, http_response: Any) -> list[Refusal]:
    if (service, operation) != ("lambda", "Invoke") or http_response is None:
        return []
    size = int((getattr(http_response, "headers", None) or {}).get("Content-Length") or 0)
    if size > LAMBDA_SYNC_RESPONSE_MAX:
        return [
            ("Function.ResponseSizeTooLarge", f"response of {size} bytes, over {LAMBDA_SYNC_RESPONSE_MAX}")
        ]
    return []


# -- recording and the hook

violations: list[dict[str, str]] = []
_lock = threading.Lock()
_expecting = threading.local()


def mode() -> str:
    return os.environ.get(ENV_MODE, "strict").strip().lower() or "strict"


def _report(service: str, operation: str, refusals: list[Refusal]) -> None:
    code, message = refusals[0]
    expected = getattr(_expecting, "on", None)
    record = {
        "service": service,
        "operation": operation,
        "code": code,
        "message": message,
        "pid": str(os.getpid()),
    }
    if expected is not None:
        expected.append(record)
    else:
        with _lock:
            violations.append(record)
        log.error("AWS would refuse %s.%s: %s (%s)", service, operation, message, code)
        path = os.environ.get(ENV_LOG)
        if path:
            with contextlib.suppress(OSError), open(path, "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")
    if mode() != "warn":
        raise AwsLimitExceeded(service, operation, code, message)


def _names(model: Any) -> tuple[str, str]:
    return model.service_model.service_name, model.name


def _before_params(params: Any, model: Any, **_: Any) -> None:
    if mode() == "off":
        return
    service, operation = _names(model)
    refusals = check(service, operation, params)
    if refusals:
        _report(service, operation, refusals)


def _after_call(http_response: Any = None, model: Any = None, **_: Any) -> None:
    if mode() == "off" or model is None:
        return
    service, operation = _names(model)
    refusals = response_refusals(service, operation, http_response)
    if refusals:
        _report(service, operation, refusals)


def install() -> None:
    """Check every request of every botocore session created from now on (and boto3's default
    session if it exists). Idempotent."""
    from botocore import handlers

    specs = [
        ("before-parameter-build", _before_params, handlers.REGISTER_LAST),
        ("after-call.lambda.Invoke", _after_call),
    ]
    for spec in specs:
        if spec not in handlers.BUILTIN_HANDLERS:
            handlers.BUILTIN_HANDLERS.append(spec)  # type: ignore[arg-type]
    try:
        import boto3
    except ImportError:  # pragma: no cover - botocore alone
        return
    default = boto3.DEFAULT_SESSION
    if default is not None and not getattr(default, "_threads_limits", False):
        core = default._session
        emitter = core.get_component("event_emitter")
        emitter.register_last("before-parameter-build", _before_params)
        emitter.register("after-call.lambda.Invoke", _after_call)
        default._threads_limits = True  # type: ignore[attr-defined]


def install_from_env() -> bool:
    """`install` if $THREADS_AWS_LIMITS asks for it (strict or warn); True if installed."""
    if os.environ.get(ENV_MODE, "").strip().lower() in ("strict", "warn", "1", "on"):
        install()
        return True
    return False


@contextlib.contextmanager
def expect_refusals() -> Iterator[list[dict[str, str]]]:
    """Within this block (this thread), refusals are collected in the yielded list instead of
    failing the test: for a test that shows what the code does when AWS refuses."""
    got: list[dict[str, str]] = []
    previous = getattr(_expecting, "on", None)
    _expecting.on = got
    try:
        yield got
    finally:
        _expecting.on = previous
