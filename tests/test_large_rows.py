"""Rows that copy content from the log stay within DynamoDB's 400 KB item limit whatever the
content (a tool call's input or a question may be up to a line's 1 MiB): the approval row keeps
a large input in the log only (`input_in_log`, the pending-approvals read answers the call's
input from the fold), the question row clips its copy, and a note too large for its one item is
an error result instead of a put DynamoDB refuses (under the limits hook, any of these sent as
an oversized item fails the test)."""

from __future__ import annotations

from typing import Any

from helpers.engine import grant, make_ctx, new_thread, of_type, run, say, verify_export
from helpers.host import ALICE, make_host
from threads_aws.store.notes import TEXT_MAX
from threads_aws.store.records import INLINE_COPY_MAX

BIG = 450_000  # over 400 KB, within a line's 1 MiB


def test_a_large_call_input_awaits_approval_and_stays_whole(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    say(ctx, b, "note: " + "x" * BIG)
    assert run(ctx, b).state == "parked"
    (req,) = of_type(ctx, b, "approval_requested")
    row = aws.stores().approvals.get(req["data"]["challenge_id"])
    assert row is not None and row.input_in_log and row.input == {}
    thread_id = ctx.writer.load(b).record.thread_id
    (pending,) = make_host(aws).pending_approvals(ALICE, thread_id, b)
    assert pending["input"] == {"text": "x" * BIG}  # from the log's call
    grant(ctx, b)
    assert run(ctx, b).state == "idle"
    (res,) = of_type(ctx, b, "tool_result")
    assert res["data"]["is_error"] and f"over the {TEXT_MAX}-byte limit" in res["data"]["preview"]
    assert (
        aws.ddb.scan(
            TableName=aws.resources.state_table,
            FilterExpression="kind = :n",
            ExpressionAttributeValues={":n": {"S": "note"}},
        )["Items"]
        == []
    )
    verify_export(ctx, b)


def test_a_note_within_the_limit_is_stored(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    say(ctx, b, "note: " + "y" * (INLINE_COPY_MAX + 10))  # over the inline copy, under TEXT_MAX
    assert run(ctx, b).state == "parked"
    (req,) = of_type(ctx, b, "approval_requested")
    row = aws.stores().approvals.get(req["data"]["challenge_id"])
    assert row is not None and row.input_in_log
    grant(ctx, b)
    assert run(ctx, b).state == "idle"
    (res,) = of_type(ctx, b, "tool_result")
    assert not res["data"]["is_error"]


def test_a_large_question_parks(aws: Any) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    say(ctx, b, "ask: " + "q" * BIG)
    assert run(ctx, b).state == "parked"
    (call,) = of_type(ctx, b, "tool_call")
    row = aws.stores().questions.get(b, call["data"]["call_id"])
    assert row is not None and len(row.input["question"]) == INLINE_COPY_MAX
    verify_export(ctx, b)
