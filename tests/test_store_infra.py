"""The template loader: what it creates on moto matches template.yaml."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from threads_aws.store.names import ResourceNames
from threads_aws_dev.local.infra import load_template, physical_name

TEMPLATE = Path(__file__).resolve().parents[1] / "template.yaml"


def test_template_parses_with_intrinsic_tags():
    doc = load_template(TEMPLATE)
    res = doc["Resources"]
    assert res["RunStepQueue"]["Properties"]["RedrivePolicy"]["deadLetterTargetArn"] == {
        "Fn::GetAtt": ["RunStepDLQ", "Arn"]
    }
    assert doc["Globals"]["Function"]["Runtime"] == "python3.13"
    assert res["ThreadsLayer"]["Metadata"]["BuildMethod"] == "makefile"


def test_a_loaded_template_is_a_copy_and_an_edit_is_seen(tmp_path):
    # parsed once per file version: a caller's change never reaches the next caller, and a
    # changed file is parsed again
    doc = load_template(TEMPLATE)
    doc["Resources"].clear()
    assert load_template(TEMPLATE)["Resources"]
    path = tmp_path / "template.yaml"
    path.write_text("Resources:\n  Q:\n    Type: AWS::SQS::Queue\n")
    assert list(load_template(path)["Resources"]) == ["Q"]
    path.write_text("Resources:\n  Bucket:\n    Type: AWS::S3::Bucket\n    Properties:\n      X: !Ref Q\n")
    assert load_template(path)["Resources"]["Bucket"]["Properties"]["X"] == {"Ref": "Q"}


def test_physical_names():
    assert physical_name("threads", "EventsTable") == "threads-events-table"
    assert physical_name("threads", "RunStepDLQ") == "threads-run-step-dlq"


def test_tables_match_template(aws):
    doc = load_template(TEMPLATE)["Resources"]
    for lid, name in (("EventsTable", aws.resources.events_table), ("StateTable", aws.resources.state_table)):
        props = doc[lid]["Properties"]
        t = aws.ddb.describe_table(TableName=name)["Table"]
        assert t["KeySchema"] == props["KeySchema"]
        assert sorted(t["AttributeDefinitions"], key=lambda a: a["AttributeName"]) == sorted(
            props["AttributeDefinitions"], key=lambda a: a["AttributeName"]
        )
        assert t["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
        assert t.get("SSEDescription", {}).get("Status") in ("ENABLED", "ENABLING")
        pitr = aws.ddb.describe_continuous_backups(TableName=name)["ContinuousBackupsDescription"]
        assert pitr["PointInTimeRecoveryDescription"]["PointInTimeRecoveryStatus"] == "ENABLED"
    state = aws.ddb.describe_table(TableName=aws.resources.state_table)["Table"]
    declared = doc["StateTable"]["Properties"]["GlobalSecondaryIndexes"]
    assert [g["IndexName"] for g in state["GlobalSecondaryIndexes"]] == [g["IndexName"] for g in declared]
    names = ["gsi1", "threads_activity", "threads_status", "threads_agent"]
    assert [g["IndexName"] for g in declared] == names
    ttl = aws.ddb.describe_time_to_live(TableName=aws.resources.state_table)["TimeToLiveDescription"]
    assert ttl["AttributeName"] == "ttl" and ttl["TimeToLiveStatus"] in ("ENABLED", "ENABLING")


def test_bucket_matches_template(aws):
    b = aws.resources.bucket
    enc = aws.s3.get_bucket_encryption(Bucket=b)["ServerSideEncryptionConfiguration"]["Rules"][0]
    assert enc["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    pab = aws.s3.get_public_access_block(Bucket=b)["PublicAccessBlockConfiguration"]
    assert all(pab.values()) and len(pab) == 4


def test_queues_match_template(aws):
    r = aws.resources
    assert r.run_step_queue_url.endswith(".fifo") and r.run_step_dlq_url.endswith(".fifo")
    attrs = aws.sqs.get_queue_attributes(QueueUrl=r.run_step_queue_url, AttributeNames=["All"])["Attributes"]
    declared = load_template(TEMPLATE)["Resources"]["RunStepQueue"]["Properties"]["VisibilityTimeout"]
    assert attrs["FifoQueue"] == "true" and attrs["VisibilityTimeout"] == str(declared)
    assert (
        attrs["DeduplicationScope"] == "messageGroup" and attrs["FifoThroughputLimit"] == "perMessageGroupId"
    )
    dlq_arn = aws.sqs.get_queue_attributes(QueueUrl=r.run_step_dlq_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    redrive = json.loads(attrs["RedrivePolicy"])
    assert redrive["deadLetterTargetArn"] == dlq_arn and int(redrive["maxReceiveCount"]) == 5
    inbox = aws.sqs.get_queue_attributes(QueueUrl=r.inbox_queue_url, AttributeNames=["All"])["Attributes"]
    # the channel inbox: FIFO too (one wake-up group per thread), its DLQ FIFO
    assert inbox["FifoQueue"] == "true" and r.inbox_queue_url.endswith(".fifo")
    assert json.loads(inbox["RedrivePolicy"])["deadLetterTargetArn"].endswith(
        ":" + physical_name(aws.prefix, "ChannelInboxDLQ") + ".fifo"
    )
    # a FIFO round trip
    aws.sqs.send_message(
        QueueUrl=r.run_step_queue_url, MessageBody="{}", MessageGroupId="b1", MessageDeduplicationId="d1"
    )
    got = aws.sqs.receive_message(QueueUrl=r.run_step_queue_url)["Messages"]
    assert got[0]["Body"] == "{}"


def test_resources_env_round_trip(aws):
    env = aws.resources.env()
    assert env["EVENTS_TABLE"] == aws.resources.events_table
    back = ResourceNames.from_env(env)
    assert (
        back.events_table,
        back.state_table,
        back.bucket,
        back.run_step_queue_url,
        back.inbox_queue_url,
    ) == (
        aws.resources.events_table,
        aws.resources.state_table,
        aws.resources.bucket,
        aws.resources.run_step_queue_url,
        aws.resources.inbox_queue_url,
    )
    with pytest.raises(KeyError):
        ResourceNames.from_env({"EVENTS_TABLE": "x"})


def test_every_template_resource_of_a_known_kind_is_created(aws):
    doc = load_template(TEMPLATE)["Resources"]
    kinds = {"AWS::DynamoDB::Table", "AWS::S3::Bucket", "AWS::SQS::Queue"}
    assert set(aws.resources.physical) == {lid for lid, r in doc.items() if r["Type"] in kinds}
