"""What CloudFormation receives: template.yaml through the SAM translator (the transform `sam
deploy` runs), checked for the stack's runtime and its operations resources."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.template import of_type, translate


@pytest.fixture(scope="module")
def resources() -> dict[str, Any]:
    return translate()


def test_one_runtime_one_architecture(resources):
    fns = of_type(resources, "AWS::Lambda::Function")
    assert len(fns) >= 16
    assert {f["Properties"]["Runtime"] for f in fns.values()} == {"python3.13"}
    assert {tuple(f["Properties"]["Architectures"]) for f in fns.values()} == {("arm64",)}
    (layer,) = of_type(resources, "AWS::Lambda::LayerVersion").values()
    assert layer["Properties"]["CompatibleRuntimes"] == ["python3.13"]
    assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]


def test_the_api_has_one_stage_with_access_logs_and_throttling(resources):
    (stage,) = of_type(resources, "AWS::ApiGateway::Stage").values()
    # The deployment names no stage: SAM's implicit extra stage "Stage" is gone.
    for dep in of_type(resources, "AWS::ApiGateway::Deployment").values():
        assert "StageName" not in dep["Properties"]
    p = stage["Properties"]
    assert p["StageName"] == {"Ref": "Stage"}
    dest = p["AccessLogSetting"]["DestinationArn"]["Fn::GetAtt"][0]
    assert resources[dest]["Type"] == "AWS::Logs::LogGroup"
    assert resources[dest]["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}
    assert "$context.requestId" in p["AccessLogSetting"]["Format"]
    (throttle,) = p["MethodSettings"]
    assert (throttle["ResourcePath"], throttle["HttpMethod"]) == ("/*", "*")
    assert throttle["ThrottlingRateLimit"] == {"Ref": "ApiThrottleRateLimit"}
    assert throttle["ThrottlingBurstLimit"] == {"Ref": "ApiThrottleBurstLimit"}
    # Access logs need the account's API Gateway role first (when this stack sets it).
    (api,) = of_type(resources, "AWS::ApiGateway::RestApi").values()
    assert api["DependsOn"] == "ApiGatewayAccountReady"
    ready = resources["ApiGatewayAccountReady"]["Metadata"]["Account"]
    assert ready == {"Fn::If": ["CreateApiGatewayAccount", {"Ref": "ApiGatewayAccount"}, ""]}


def test_every_function_logs_to_its_own_group_with_retention(resources):
    groups = set()
    for lid, fn in of_type(resources, "AWS::Lambda::Function").items():
        group = fn["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
        assert resources[group]["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}, lid
        groups.add(group)
    assert len(groups) == len(of_type(resources, "AWS::Lambda::Function"))


def _watched(alarm: dict[str, Any]) -> set[tuple[str, str, str]]:
    """(namespace, metric, dimension value as a Ref/GetAtt target) of every metric an alarm reads."""
    p = alarm["Properties"]
    stats = [m["MetricStat"]["Metric"] for m in p.get("Metrics", []) if "MetricStat" in m]
    if "MetricName" in p:
        stats.append(p)
    out = set()
    for m in stats:
        for d in m.get("Dimensions", []):
            v = d["Value"]
            target = v.get("Ref") or (v.get("Fn::GetAtt") or [""])[0] if isinstance(v, dict) else str(v)
            out.add((m["Namespace"], m["MetricName"], str(target)))
    return out


def test_alarms_on_every_function_the_dlqs_and_the_api(resources):
    alarms = of_type(resources, "AWS::CloudWatch::Alarm")
    watched = set().union(*(_watched(a) for a in alarms.values()))
    for lid in of_type(resources, "AWS::Lambda::Function"):
        assert ("AWS/Lambda", "Errors", lid) in watched, lid
        assert ("AWS/Lambda", "Throttles", lid) in watched, lid
    for dlq in ("RunStepDLQ", "ChannelInboxDLQ", "DeferredCallDLQ"):
        assert ("AWS/SQS", "ApproximateNumberOfMessagesVisible", dlq) in watched
    assert any(m == "5XXError" for ns, m, _ in watched if ns == "AWS/ApiGateway")
    for a in alarms.values():
        assert a["Properties"]["AlarmActions"] == [{"Ref": "AlarmTopic"}]
        assert a["Properties"]["TreatMissingData"] == "notBreaching"


def test_tables_are_deletion_protected(resources):
    tables = of_type(resources, "AWS::DynamoDB::Table")
    assert set(tables) == {"EventsTable", "StateTable", "ToolExampleTable"}
    for t in tables.values():
        assert t["Properties"]["DeletionProtectionEnabled"] is True
        assert t["DeletionPolicy"] == "Retain"
