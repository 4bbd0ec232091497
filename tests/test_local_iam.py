"""Each function under its own IAM role in `threads-aws dev` (local.iam, local.iam_authz).

The template is expanded by the SAM translator, each function's role is created in moto's IAM
and assumed through its STS, and a request its role does not allow answers AccessDenied. Fast
cases: the policy evaluator and the request mapping. Slow cases (one dev subprocess each): a
full run (start, approval, question) under the repo's template with no denial, and a copy of
the template with one statement removed from StartRunFunction's policy, whose route then fails
with AccessDenied while the other functions keep working.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import e2e
from helpers.dev_process import dev_process
from helpers.e2e import Dev, types
from threads_aws_dev.local.iam import plan
from threads_aws_dev.local.iam_authz import Mapper, Need, Request, decide
from threads_aws_dev.local.infra import load_template, physical_name

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "template.yaml"
ACCOUNT = "123456789012"
TABLE = f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/t"


# ---------------------------------------------------------------- the evaluator


def test_allow_needs_a_matching_action_and_resource() -> None:
    doc = {"Statement": [{"Effect": "Allow", "Action": ["dynamodb:GetItem"], "Resource": TABLE}]}
    assert decide([doc], Need("dynamodb:GetItem", TABLE)) == "Allow"
    assert decide([doc], Need("dynamodb:getitem", TABLE)) == "Allow"  # actions ignore case
    assert decide([doc], Need("dynamodb:PutItem", TABLE)) == "ImplicitDeny"
    assert decide([doc], Need("dynamodb:GetItem", TABLE + "2")) == "ImplicitDeny"
    assert decide([doc], Need("dynamodb:GetItem", TABLE + "/index/gsi1")) == "ImplicitDeny"


def test_explicit_deny_wins_and_wildcards_match() -> None:
    allow = {"Statement": {"Effect": "Allow", "Action": "s3:*", "Resource": "arn:aws:s3:::b/sha256/*"}}
    deny = {"Statement": [{"Effect": "Deny", "Action": "s3:PutObject", "Resource": "*"}]}
    assert decide([allow], Need("s3:GetObject", "arn:aws:s3:::b/sha256/ab")) == "Allow"
    assert decide([allow], Need("s3:GetObject", "arn:aws:s3:::b/other")) == "ImplicitDeny"
    assert decide([allow, deny], Need("s3:PutObject", "arn:aws:s3:::b/sha256/ab")) == "Deny"


def test_leading_keys_condition() -> None:
    doc = {
        "Statement": [
            {
                "Effect": "Allow",
                "Action": "dynamodb:GetItem",
                "Resource": TABLE,
                "Condition": {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["APIKEY#*"]}},
            }
        ]
    }
    assert decide([doc], Need("dynamodb:GetItem", TABLE, {"dynamodb:LeadingKeys": ("APIKEY#ab",)})) == "Allow"
    other = Need("dynamodb:GetItem", TABLE, {"dynamodb:LeadingKeys": ("THREAD#x",)})
    assert decide([doc], other) == "ImplicitDeny"


def _request(target: str, body: dict[str, Any], service: str = "dynamodb") -> Request:
    return Request(
        access_key="ASIAX",
        region="us-east-1",
        service=service,
        method="POST",
        path="/",
        query={},
        headers={"x-amz-target": target, "content-type": "application/x-amz-json-1.0"},
        body=json.dumps(body).encode(),
    )


def test_a_transaction_needs_each_items_action() -> None:
    """AWS authorizes TransactWriteItems by the items' own actions, never a TransactWriteItems
    action (moto's access control checks that one, on resource *)."""
    body = {
        "TransactItems": [
            {"Put": {"TableName": "ev", "Item": {"pk": {"S": "B#1"}}}},
            {"Update": {"TableName": "st", "Key": {"pk": {"S": "H#1"}}}},
            {"ConditionCheck": {"TableName": "st", "Key": {"pk": {"S": "R#1"}}}},
        ]
    }
    needs = Mapper(ACCOUNT, {"ev": "pk", "st": "pk"}).needs(
        _request("DynamoDB_20120810.TransactWriteItems", body)
    )
    assert [(n.action, n.resource.rsplit("/", 1)[1]) for n in needs] == [
        ("dynamodb:PutItem", "ev"),
        ("dynamodb:UpdateItem", "st"),
        ("dynamodb:ConditionCheckItem", "st"),
    ]
    assert needs[1].context == {"dynamodb:LeadingKeys": ("H#1",)}
    query = _request("DynamoDB_20120810.Query", {"TableName": "st", "IndexName": "gsi1"})
    assert (
        Mapper(ACCOUNT).needs(query)[0].resource
        == f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/st/index/gsi1"
    )
    batch = _request("AmazonSQS.SendMessageBatch", {"QueueUrl": "http://h/123/q.fifo"}, service="sqs")
    assert Mapper(ACCOUNT).needs(batch) == [
        Need("sqs:SendMessage", f"arn:aws:sqs:us-east-1:{ACCOUNT}:q.fifo")
    ]


def test_the_roles_name_what_dev_creates() -> None:
    """After the SAM expansion, StartRunFunction's role is HostControlPolicy resolved to dev's
    physical names (tables, bucket, the run-step queue)."""
    doc = load_template(TEMPLATE)
    physical: dict[str, str] = {}
    for lid, r in doc["Resources"].items():
        if r["Type"] in ("AWS::DynamoDB::Table", "AWS::S3::Bucket"):
            physical[lid] = physical_name("p", lid)
        elif r["Type"] == "AWS::SQS::Queue":
            fifo = ".fifo" if (r.get("Properties") or {}).get("FifoQueue") else ""
            physical[lid] = f"http://h/{ACCOUNT}/{physical_name('p', lid)}{fifo}"
    names = {lid: lid for lid, r in doc["Resources"].items() if r["Type"] == "AWS::Serverless::Function"}
    plans, warnings = plan(TEMPLATE, physical, names, region="us-east-1", prefix="p")
    assert warnings == []
    docs = plans["StartRunFunction"].documents()
    events = f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/p-events-table"
    assert decide(docs, Need("dynamodb:PutItem", events)) == "Allow"
    assert decide(docs, Need("dynamodb:DeleteItem", events)) == "ImplicitDeny"  # appends never delete
    queue = f"arn:aws:sqs:us-east-1:{ACCOUNT}:p-run-step-queue.fifo"
    assert decide(docs, Need("sqs:SendMessage", queue)) == "Allow"
    reader = plans["GetTimelineFunction"].documents()
    assert decide(reader, Need("dynamodb:PutItem", events)) == "ImplicitDeny"
    # an SQS event source's poller: AWSLambdaSQSQueueExecutionRole, added by the translator
    assert decide(plans["RunStepFunction"].documents(), Need("sqs:ReceiveMessage", queue)) == "Allow"
    # deleting a schedule drops its active marker (found by this enforcement: a 500 on AWS)
    state = f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/p-state-table"
    schedules = plans["SchedulesFunction"].documents()
    marker = Need("dynamodb:DeleteItem", state, {"dynamodb:LeadingKeys": ("SCHEDULE#s1",)})
    assert decide(schedules, marker) == "Allow"
    other = Need("dynamodb:DeleteItem", state, {"dynamodb:LeadingKeys": ("THREAD#t1",)})
    assert decide(schedules, other) == "ImplicitDeny"


# ---------------------------------------------------------------- dev, enforced


def denials(dev: Dev) -> list[str]:
    return [line for line in dev.log.read_text().splitlines() if "IAM: AccessDenied" in line]


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dev]:
    with e2e.dev(tmp_path_factory.mktemp("iam")) as d:
        yield d


def test_a_full_run_passes_under_each_functions_role(dev: Dev) -> None:
    """Start a run, grant its approval, answer a question: every function on the way (the
    authorizer, the API's functions, the worker through the run-step queue) runs under its own
    role, and no request is denied."""
    run = dev.start("note: buy milk")
    events, last, result = dev.stream(run["thread_id"], run["run_id"])
    assert result["status"] == "parked", result
    (challenge,) = dev.call("GET", f"/v1/threads/{run['thread_id']}/approvals")[1]
    status, body, _ = dev.call(
        "POST", f"/v1/threads/{run['thread_id']}/approvals/{challenge['challenge_id']}", {"decision": "grant"}
    )
    assert status == 200, body
    _, _, result = dev.stream(run["thread_id"], run["run_id"], last_id=last)
    assert result["status"] == "completed", result
    asked = dev.start("ask: which colour?")
    events, _, result = dev.stream(asked["thread_id"], asked["run_id"])
    call = next(e for e in events if e["type"] == "tool_call")
    status, body, _ = dev.call(
        "POST",
        f"/v1/threads/{asked['thread_id']}/questions/{call['data']['call_id']}/answer",
        {"answer": "blue"},
    )
    assert status == 200, body
    _, _, result = dev.stream(asked["thread_id"], asked["run_id"])
    assert result["status"] == "completed" and "blue" in json.dumps(result["output"]), result
    assert "effect_commit" in types(dev.timeline(run["thread_id"]))
    assert denials(dev) == []


def _without_statement(tmp: Path, function: str, policy: str, sid: str) -> Path:
    """A copy of template.yaml (as JSON, code paths absolute) where `function` gets `policy`'s
    statements inline except the one with `sid`, instead of the managed policy."""
    doc = load_template(TEMPLATE)
    for res in doc["Resources"].values():
        props = res.get("Properties") or {}
        for key in ("CodeUri", "ContentUri"):
            if isinstance(props.get(key), str):
                props[key] = str((REPO / props[key]).resolve())
    statements = doc["Resources"][policy]["Properties"]["PolicyDocument"]["Statement"]
    kept = [s for s in statements if not (isinstance(s, dict) and s.get("Sid") == sid)]
    assert len(kept) == len(statements) - 1
    props = doc["Resources"][function]["Properties"]
    assert props["Policies"] == [{"Ref": policy}]
    props["Policies"] = [{"Version": "2012-10-17", "Statement": kept}]
    out = tmp / "template.json"
    out.write_text(json.dumps(doc))
    return out


def test_a_removed_statement_fails_its_route(tmp_path: Path) -> None:
    """StartRunFunction without HostControlPolicy's LogTablesAppend statement: POST /v1/runs
    answers the host's error and the log names the denied DynamoDB action; functions that keep
    the statement (listing threads, by HostReadPolicy) still answer."""
    template = _without_statement(tmp_path, "StartRunFunction", "HostControlPolicy", "LogTablesAppend")
    with dev_process(
        tmp_path, dict(e2e.SHORT_WINDOWS), ["--template", str(template)], cls=Dev, allow_denials=True
    ) as d:
        status, body, _ = d.call(
            "POST",
            "/v1/runs",
            {"agent": "demo", "input": "hi"},
            headers={"Idempotency-Key": str(uuid.uuid4())},
        )
        # the host's error body (an AWS error it cannot attribute to the client), not a 502
        assert (status, body["error"]["code"]) == (500, "internal"), (status, body)
        denied = denials(d)
        assert denied and all("StartRunFunction" in line for line in denied), denied
        assert any("dynamodb:" in line and "-table" in line for line in denied), denied
        status, body, _ = d.call("GET", "/v1/threads")
        assert status == 200, body


def test_an_undecidable_condition_never_allows() -> None:
    cond = {"NumericLessThan": {"aws:MultiFactorAuthAge": "3600"}}
    allow = {"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*", "Condition": cond}]}
    deny = {"Statement": [{"Effect": "Deny", "Action": "*", "Resource": "*", "Condition": cond}]}
    plain = {"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
    assert decide([allow], Need("s3:GetObject", "*")) == "ImplicitDeny"
    assert decide([plain, deny], Need("s3:GetObject", "*")) == "Deny"
