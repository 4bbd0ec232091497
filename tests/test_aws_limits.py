"""The limits hook (`threads_aws_dev.local.aws_limits`): each limit with one request just within
and one just over, DynamoDB's size rules, and the hook itself on real boto3 clients (moto
accepts what AWS refuses; the hook raises AWS's code and records it)."""

from __future__ import annotations

from typing import Any

import pytest
from threads_aws_dev.local import aws_limits as L

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


V = ["ValidationException"]


def s(n: int) -> dict[str, str]:
    return {"S": "x" * n}


def refused(service: str, op: str, params: dict[str, Any]) -> list[str]:
    return [code for code, _ in L.check(service, op, params)]


# -- DynamoDB sizes as DynamoDB counts them


def test_attribute_sizes_follow_dynamodb() -> None:
    assert L.attribute_size({"S": "héllo"}) == 6  # UTF-8 bytes
    assert L.attribute_size({"N": "123"}) == 3  # 2 digits per byte, + 1
    assert L.attribute_size({"N": "-0.000120"}) == 2  # leading/trailing zeros trimmed
    assert L.attribute_size({"N": "1e10"}) == 2
    assert L.attribute_size({"B": b"\x00\x01\x02"}) == 3
    assert L.attribute_size({"BOOL": True}) == L.attribute_size({"NULL": True}) == 1
    assert L.attribute_size({"L": []}) == L.attribute_size({"M": {}}) == 3
    assert L.attribute_size({"L": [{"S": "ab"}, {"N": "1"}]}) == 3 + (2 + 1) + (2 + 1)
    assert L.attribute_size({"M": {"k": {"S": "ab"}}}) == 3 + 1 + 2 + 1
    assert L.attribute_size({"SS": ["a", "bc"]}) == 3
    assert L.item_size({"pk": {"S": "abc"}, "n": {"N": "12"}}) == 2 + 3 + 1 + 2


def item_of(total: int) -> dict[str, Any]:
    """An item of exactly `total` bytes: pk "a" (names 2 + 1 bytes), body the rest."""
    return {"pk": {"S": "a"}, "b": {"S": "x" * (total - 3 - 1)}}


def test_item_size_limit() -> None:
    assert L.item_size(item_of(L.ITEM_MAX)) == L.ITEM_MAX
    assert refused("dynamodb", "PutItem", {"TableName": "t", "Item": item_of(L.ITEM_MAX)}) == []
    over = {"TableName": "t", "Item": item_of(L.ITEM_MAX + 1)}
    assert refused("dynamodb", "PutItem", over) == V
    batch = {"RequestItems": {"t": [{"PutRequest": {"Item": item_of(L.ITEM_MAX + 1)}}]}}
    assert refused("dynamodb", "BatchWriteItem", batch) == V


def test_key_sizes_by_the_table_schema() -> None:
    L.check(
        "dynamodb",
        "CreateTable",
        {
            "TableName": "keys-t",
            "KeySchema": [
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
        },
    )
    ok = {"TableName": "keys-t", "Key": {"pk": s(2048), "sk": s(1024)}}
    assert refused("dynamodb", "GetItem", ok) == []
    assert refused("dynamodb", "GetItem", {"TableName": "keys-t", "Key": {"pk": s(2049), "sk": s(1)}}) == V
    assert refused("dynamodb", "DeleteItem", {"TableName": "keys-t", "Key": {"pk": s(1), "sk": s(1025)}}) == V
    put = {"TableName": "keys-t", "Item": {"pk": s(1), "sk": s(1025)}}
    assert refused("dynamodb", "PutItem", put) == V
    # unknown table: every Key attribute is held to the partition key's 2,048
    assert refused("dynamodb", "GetItem", {"TableName": "other", "Key": {"a": s(2048)}}) == []
    assert refused("dynamodb", "GetItem", {"TableName": "other", "Key": {"a": s(2049)}}) == V


def puts(n: int, size: int = 10) -> list[dict[str, Any]]:
    return [{"Put": {"TableName": "t", "Item": {"pk": {"S": f"{i:08}"}, "b": s(size)}}} for i in range(n)]


def test_transaction_actions_and_bytes() -> None:
    assert refused("dynamodb", "TransactWriteItems", {"TransactItems": puts(100)}) == []
    assert refused("dynamodb", "TransactWriteItems", {"TransactItems": puts(101)}) == V
    # 16 items of (2 + 8) + (1 + body) bytes: exactly 4 MB, then one byte over
    body = L.TRANSACT_BYTES_MAX // 16 - 11
    assert refused("dynamodb", "TransactWriteItems", {"TransactItems": puts(16, body)}) == []
    over = puts(16, body)
    over[0]["Put"]["Item"]["b"] = s(body + 1)
    assert refused("dynamodb", "TransactWriteItems", {"TransactItems": over}) == V
    gets = [{"Get": {"TableName": "t", "Key": {"pk": {"S": str(i)}}}} for i in range(101)]
    assert refused("dynamodb", "TransactGetItems", {"TransactItems": gets[:100]}) == []
    assert refused("dynamodb", "TransactGetItems", {"TransactItems": gets}) == V


def test_batches() -> None:
    keys = [{"pk": {"S": str(i)}} for i in range(101)]
    assert refused("dynamodb", "BatchGetItem", {"RequestItems": {"t": {"Keys": keys[:100]}}}) == []
    assert refused("dynamodb", "BatchGetItem", {"RequestItems": {"t": {"Keys": keys}}}) == V
    writes = [{"DeleteRequest": {"Key": k}} for k in keys]
    assert refused("dynamodb", "BatchWriteItem", {"RequestItems": {"t": writes[:25]}}) == []
    assert refused("dynamodb", "BatchWriteItem", {"RequestItems": {"t": writes[:26]}}) == V


def test_expression_length() -> None:
    ok = {"TableName": "t", "Key": {"pk": s(1)}, "UpdateExpression": "x" * 4096}
    assert refused("dynamodb", "UpdateItem", ok) == []
    assert refused("dynamodb", "UpdateItem", {**ok, "UpdateExpression": "x" * 4097}) == V


# -- SQS


def test_sqs_message_size_counts_bytes_and_attributes() -> None:
    assert refused("sqs", "SendMessage", {"MessageBody": "x" * L.SQS_MESSAGE_MAX}) == []
    over = {"MessageBody": "x" * (L.SQS_MESSAGE_MAX + 1)}
    assert refused("sqs", "SendMessage", over) == ["InvalidParameterValue"]
    # moto counts characters: a 2-byte character per position is twice as big for SQS
    assert refused("sqs", "SendMessage", {"MessageBody": "é" * (L.SQS_MESSAGE_MAX // 2 + 1)}) != []
    attrs = {"a": {"DataType": "String", "StringValue": "v"}}  # 1 + 6 + 1 bytes
    body = "x" * (L.SQS_MESSAGE_MAX - 8)
    assert refused("sqs", "SendMessage", {"MessageBody": body, "MessageAttributes": attrs}) == []
    assert refused("sqs", "SendMessage", {"MessageBody": body + "x", "MessageAttributes": attrs}) != []


def test_sqs_batches() -> None:
    entries = [{"Id": str(i), "MessageBody": "x"} for i in range(11)]
    assert refused("sqs", "SendMessageBatch", {"Entries": entries[:10]}) == []
    assert refused("sqs", "SendMessageBatch", {"Entries": entries}) == ["TooManyEntriesInBatchRequest"]
    handles = [{"Id": str(i), "ReceiptHandle": "h"} for i in range(11)]
    assert refused("sqs", "DeleteMessageBatch", {"Entries": handles[:10]}) == []
    assert refused("sqs", "DeleteMessageBatch", {"Entries": handles}) == ["TooManyEntriesInBatchRequest"]
    half = L.SQS_MESSAGE_MAX // 2
    two = [{"Id": "a", "MessageBody": "x" * half}, {"Id": "b", "MessageBody": "x" * half}]
    assert refused("sqs", "SendMessageBatch", {"Entries": two}) == []
    two[1]["MessageBody"] += "x"
    assert refused("sqs", "SendMessageBatch", {"Entries": two}) == ["BatchRequestTooLong"]
    assert refused("sqs", "ReceiveMessage", {"MaxNumberOfMessages": 10}) == []
    assert refused("sqs", "ReceiveMessage", {"MaxNumberOfMessages": 11}) == ["InvalidParameterValue"]


# -- Lambda


def test_lambda_payloads() -> None:
    sync = L.LAMBDA_SYNC_REQUEST_MAX
    assert refused("lambda", "Invoke", {"FunctionName": "f", "Payload": b"x" * sync}) == []
    assert refused("lambda", "Invoke", {"FunctionName": "f", "Payload": b"x" * (sync + 1)}) == [
        "RequestEntityTooLargeException"
    ]
    a = L.LAMBDA_ASYNC_REQUEST_MAX
    within = {"FunctionName": "f", "InvocationType": "Event", "Payload": b"x" * a}
    assert refused("lambda", "Invoke", within) == []
    over = {"FunctionName": "f", "InvocationType": "Event", "Payload": b"x" * (a + 1)}
    assert refused("lambda", "Invoke", over) == ["RequestEntityTooLargeException"]

    class Http:
        def __init__(self, n: int) -> None:
            self.headers = {"Content-Length": str(n)}

    assert L.response_refusals("lambda", "Invoke", Http(L.LAMBDA_SYNC_RESPONSE_MAX)) == []
    assert L.response_refusals("lambda", "Invoke", Http(L.LAMBDA_SYNC_RESPONSE_MAX + 1)) != []


# -- EventBridge Scheduler


def test_scheduler_names() -> None:
    assert refused("scheduler", "CreateSchedule", {"Name": "a" * 64, "GroupName": "default"}) == []
    assert refused("scheduler", "CreateSchedule", {"Name": "a" * 65}) == V
    assert refused("scheduler", "CreateSchedule", {"Name": "threads-A_b.c-9"}) == []
    assert refused("scheduler", "CreateSchedule", {"Name": "has space"}) == V
    assert refused("scheduler", "DeleteSchedule", {"Name": "x", "GroupName": "g/h"}) == V


@pytest.mark.parametrize(
    "expression",
    [
        "cron(0 9 ? * MON-FRI *)",
        "cron(0/15 * * * ? *)",
        "cron(30 2 1,15 * ? 2030)",
        "cron(0 0 L * ? *)",
        "cron(0 0 ? * 6L *)",
        "cron(0 0 ? * 2#1 *)",
        "cron(0 0 15W * ? *)",
        "cron(5 4 ? JAN,JUL SUN *)",
        "rate(5 minutes)",
        "rate(1 day)",
        "at(2030-01-02T03:04:05)",
    ],
)
def test_schedule_expressions_aws_accepts(expression: str) -> None:
    assert L.cron_refusal(expression) is None


@pytest.mark.parametrize(
    "expression",
    [
        "cron(0 9 * * 1-5)",  # five fields (crontab), not six
        "cron(0 9 * * MON *)",  # both day fields given: one must be ?
        "cron(0 9 ? * ? *)",  # both ?
        "cron(60 9 ? * MON *)",  # minute out of range
        "cron(0 9 ? * 0 *)",  # day-of-week is 1-7
        "cron(0 9 1 * ? 1969)",  # year 1970-2199
        "cron(0 9 ?,1 * ? *)",
        "rate(0 minutes)",
        "rate(5 weeks)",
        "at(2030-01-02 03:04:05)",
        "every day",
    ],
)
def test_schedule_expressions_aws_refuses(expression: str) -> None:
    assert L.cron_refusal(expression) is not None
    assert refused("scheduler", "CreateSchedule", {"Name": "n", "ScheduleExpression": expression}) == V


def test_our_cron_spelling_is_what_aws_accepts() -> None:
    """Every expression `schedules.cron` accepts is spelled as EventBridge accepts it."""
    from threads_aws.schedules.cron import parse

    ours = [
        "0 9 * * 1-5",
        "*/15 * * * *",
        "30 2 1,15 * *",
        "0 0 * JAN,JUL SUN",
        "5 */2 * * 0,7",
        "0 0 1 */3 *",
    ]
    for text in ours:
        assert L.cron_refusal(parse(text).eventbridge()) is None, text


# -- S3


def test_s3_keys_and_metadata() -> None:
    assert refused("s3", "PutObject", {"Bucket": "b", "Key": "k" * 1024}) == []
    assert refused("s3", "PutObject", {"Bucket": "b", "Key": "k" * 1025}) == ["KeyTooLongError"]
    assert refused("s3", "GetObject", {"Bucket": "b", "Key": "é" * 513}) == ["KeyTooLongError"]
    meta = {"a": "v" * 2047}
    assert refused("s3", "PutObject", {"Bucket": "b", "Key": "k", "Metadata": meta}) == []
    meta["a"] += "v"
    assert refused("s3", "PutObject", {"Bucket": "b", "Key": "k", "Metadata": meta}) == ["MetadataTooLarge"]
    objects = [{"Key": str(i)} for i in range(1001)]
    assert refused("s3", "DeleteObjects", {"Bucket": "b", "Delete": {"Objects": objects[:1000]}}) == []
    assert refused("s3", "DeleteObjects", {"Bucket": "b", "Delete": {"Objects": objects}}) == ["MalformedXML"]


# -- the hook on real clients


def test_the_hook_refuses_what_moto_accepts(aws: Any) -> None:
    """moto stores a 26-request BatchWriteItem; with the hook the client raises AWS's error, and
    the refusal is recorded (here: expected, so this test passes)."""
    table = aws.resources.state_table
    key = {"pk": {"S": "limits"}, "sk": {"S": "x"}}
    aws.ddb.put_item(TableName=table, Item=key)  # within every limit: untouched
    writes = [{"PutRequest": {"Item": {"pk": {"S": "limits"}, "sk": {"S": str(i)}}}} for i in range(26)]
    with L.expect_refusals() as got:
        with pytest.raises(L.AwsLimitExceeded) as exc:
            aws.ddb.batch_write_item(RequestItems={table: writes})
    assert exc.value.response["Error"]["Code"] == "ValidationException"
    assert [r["operation"] for r in got] == ["BatchWriteItem"]
    assert "pk" in aws.ddb.get_item(TableName=table, Key=key)["Item"]
    # a fresh boto3 session (made anywhere, by any code) runs it too
    import boto3

    other = boto3.Session(region_name="us-east-1").client("s3")
    with L.expect_refusals() as got, pytest.raises(L.AwsLimitExceeded):
        other.put_object(Bucket=aws.resources.bucket, Key="k" * 1025, Body=b"")
    assert got[0]["code"] == "KeyTooLongError"


def test_warn_mode_records_without_raising(aws: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(L.ENV_MODE, "warn")
    with L.expect_refusals() as got:
        aws.s3.put_object(Bucket=aws.resources.bucket, Key="k" * 1025, Body=b"")
    assert got and got[0]["code"] == "KeyTooLongError"


def test_a_subprocess_reports_to_the_log(tmp_path: Any) -> None:
    """What a `threads-aws dev` subprocess does with THREADS_AWS_LIMITS=strict (dev calls
    install_from_env at start): the request fails there, and the refusal lands in the log the
    suite reads after each test (a log of its own here, so this test doesn't fail itself)."""
    import json
    import os
    import subprocess
    import sys

    code = (
        "from threads_aws_dev.local.aws_limits import install_from_env\n"
        "assert install_from_env()\n"
        "import boto3\n"
        "s3 = boto3.client('s3', region_name='us-east-1', endpoint_url='http://127.0.0.1:9',\n"
        "                  aws_access_key_id='t', aws_secret_access_key='t')\n"
        "s3.put_object(Bucket='b', Key='k' * 1025, Body=b'')\n"
    )
    log = tmp_path / "limits.jsonl"
    env = {**os.environ, L.ENV_MODE: "strict", L.ENV_LOG: str(log)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "AwsLimitExceeded" in done.stderr
    (record,) = [json.loads(x) for x in log.read_text().splitlines()]
    assert (record["service"], record["operation"], record["code"]) == ("s3", "PutObject", "KeyTooLongError")
    assert record["pid"] != str(os.getpid())
