"""The scheduled sweeper (template.yaml SweeperFunction, functions/sweeper/app.py) and retention
per agent (the agents file's `retention_days` over THREAD_RETENTION_DAYS).

The function case runs `threads-aws dev`'s server in process with each function under its own
role (`local.iam`): the sweeper's handler, invoked as SweeperFunction, deletes the thread whose
TTL passed and its spilled line in S3, keeps the live thread's, and no request is denied."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.engine import USER, new_thread, say
from threads_aws.agents import parse_agents, validate
from threads_aws.core.canonical import new_uuid7
from threads_aws.store.retention import DAY_MS

REPO = Path(__file__).resolve().parents[1]
SCHEDULED = {"version": "0", "source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}


# ---------------------------------------------------------------- the template


def test_the_sweeper_is_scheduled_with_its_own_dead_letter_queue() -> None:
    from threads_aws_dev.local.infra import load_template

    res = load_template(REPO / "template.yaml")["Resources"]
    props = res["SweeperFunction"]["Properties"]
    (event,) = props["Events"].values()
    assert event == {
        "Type": "Schedule",
        "Properties": {
            "Schedule": {"Ref": "SweepSchedule"},
            "Description": event["Properties"]["Description"],
        },
    }
    assert props["DeadLetterQueue"]["TargetArn"] == {"Fn::GetAtt": ["SweeperDLQ", "Arn"]}
    assert res["SweeperLogs"]["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}
    # no shared managed policy (`!Ref ...Policy`): a role of its own, statements inline
    assert all(not (isinstance(p, dict) and "Ref" in p) for p in props["Policies"])


def test_the_sweepers_role_allows_what_a_pass_needs_and_no_more() -> None:
    from threads_aws_dev.local.iam import plan
    from threads_aws_dev.local.iam_authz import Need, decide
    from threads_aws_dev.local.infra import load_template, physical_name

    doc = load_template(REPO / "template.yaml")
    physical = {
        lid: physical_name("p", lid)
        for lid, r in doc["Resources"].items()
        if r["Type"] in ("AWS::DynamoDB::Table", "AWS::S3::Bucket")
    }
    names = {lid: lid for lid, r in doc["Resources"].items() if r["Type"] == "AWS::Serverless::Function"}
    plans, warnings = plan(REPO / "template.yaml", physical, names, region="us-east-1", prefix="p")
    assert warnings == []
    docs = plans["SweeperFunction"].documents()
    arn = "arn:aws:dynamodb:us-east-1:123456789012:table/p-"
    bucket = "arn:aws:s3:::" + physical["ArtifactsBucket"]
    for need in (
        Need("dynamodb:Scan", arn + "state-table"),
        Need("dynamodb:DeleteItem", arn + "state-table", {"dynamodb:LeadingKeys": ("RECEIPT#x",)}),
        Need("dynamodb:BatchWriteItem", arn + "events-table"),
        Need("s3:ListBucket", bucket),
        Need("s3:DeleteObject", bucket + "/sha256/ab"),
    ):
        assert decide(docs, need) == "Allow", need
    for need in (
        Need("s3:PutObject", bucket + "/sha256/ab"),  # it never writes an object
        Need("s3:DeleteObject", bucket + "/other"),
        Need("dynamodb:Scan", arn + "events-table"),
        Need("sqs:SendMessage", "arn:aws:sqs:us-east-1:123456789012:p-run-step-queue.fifo"),
        Need("lambda:InvokeFunction", "*"),
    ):
        assert decide(docs, need) == "ImplicitDeny", need


# ---------------------------------------------------------------- under its role


@pytest.fixture
def dev(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from threads_aws_dev.local.dev import DevServer

    monkeypatch.chdir(tmp_path)
    server = DevServer(port=0, state_dir=None, serve_api=False, extra_env={"SWEEP_GRACE_MS": "0"})
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _keys(s3: Any, bucket: str) -> set[str]:
    return {o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])}


def test_the_sweeper_function_under_its_role_removes_an_expired_threads_objects(dev: Any) -> None:
    from threads_aws.engine.models import adapter_for
    from threads_aws.services import Services
    from threads_aws.store.names import ResourceNames

    s = Services(ResourceNames.from_env(), event_store={"spill_threshold": 2048})  # dev's own keys
    ctx, bucket = s.engine(models=adapter_for), s.names.bucket
    old = new_thread(ctx)
    say(ctx, old, "old " * 2000)  # over the spill threshold: the line's bytes are an S3 object
    old_keys = _keys(s.s3, bucket)
    live = new_thread(ctx)
    say(ctx, live, "live " * 2000)
    live_keys = _keys(s.s3, bucket) - old_keys
    assert old_keys and live_keys
    old_tid = ctx.writer.load(old).fold.thread_id
    live_tid = ctx.writer.load(live).fold.thread_id
    # the old thread's retention has passed (its row's retain_until), the live one's has not
    s.ddb.update_item(
        TableName=s.names.state_table,
        Key={"pk": {"S": f"THREAD#{old_tid}"}, "sk": {"S": "META"}},
        UpdateExpression="SET #t = :t",
        ExpressionAttributeNames={"#t": "retain_until"},
        ExpressionAttributeValues={":t": {"N": str(s.clock() // 1000 - 60)}},
    )
    out = dev.handlers.invoke("SweeperFunction", SCHEDULED)
    assert out["expired"] == 1 and out["tombstones_finished"] == 1
    assert out["objects_deleted"] == len(old_keys)
    assert dev.local_iam.denied == [] and dev.local_iam.checked["SweeperFunction"] > 0
    left = _keys(s.s3, bucket)
    assert live_keys <= left and not (old_keys & left)
    assert s.stores.threads.get_thread("acme", old_tid) is None
    assert s.stores.threads.get_thread("acme", live_tid) is not None
    again = dev.handlers.invoke("SweeperFunction", SCHEDULED)  # idempotent: nothing left to do
    assert (again["expired"], again["objects_deleted"]) == (0, 0)


# ---------------------------------------------------------------- per-agent retention


def _file(**brief: Any) -> dict[str, Any]:
    """The default agents file with `brief`: the demo agent plus these keys."""
    from threads_aws.agents import DEFAULT_FILE

    raw = json.loads(Path(DEFAULT_FILE).read_text())
    raw["brief"] = {**raw["demo"], **brief}
    return raw


def test_retention_days_is_checked_and_leaves_config_hash_alone() -> None:
    plain = parse_agents(json.dumps(_file()))["brief"]
    assert plain.retention_days is None
    kept = parse_agents(json.dumps(_file(retention_days=3)))["brief"]
    assert kept.retention_days == 3 and kept.config_hash == plain.config_hash
    for bad in (0, -1, 1.5, "3", True):
        errs = validate(_file(retention_days=bad))
        assert any("retention_days must be an integer of days >= 1" in e for e in errs), bad


def test_an_agents_retention_days_sets_its_threads_ttl(aws: Any, monkeypatch: Any) -> None:
    from helpers.engine import run
    from threads_aws.engine.models import adapter_for
    from threads_aws.new_thread import start_thread
    from threads_aws.services import Services
    from threads_aws.writer import Draft

    monkeypatch.setenv("THREAD_RETENTION_DAYS", "30")
    agents = parse_agents(json.dumps(_file(retention_days=2)))  # the deployment's agents file
    clients = {"dynamodb": aws.ddb, "s3": aws.s3, "sqs": aws.sqs}
    s = Services(aws.resources, clients=clients, clock=aws.clock, agents=agents)
    ctx = s.engine(models=adapter_for)

    def ttl(branch: str) -> int:
        tid = ctx.writer.load(branch).fold.thread_id
        item = aws.ddb.get_item(
            TableName=aws.resources.state_table, Key={"pk": {"S": f"THREAD#{tid}"}, "sk": {"S": "META"}}
        )["Item"]
        assert "ttl" not in item  # not the table's TTL: DynamoDB would skip the busy check
        return int(item["retain_until"]["N"])

    def start(agent: str) -> str:  # as POST /v1/runs does: thread_started and the input at once
        branch = new_uuid7()
        hello = Draft("user_input", {"source": "api", "text": "hello"}, USER)
        start_thread(
            s.stores,
            ctx.writer,
            agents[agent],
            tenant="acme",
            thread_id=new_uuid7(),
            branch_id=branch,
            now_ms=aws.clock(),
            drafts=[hello],
        )
        return branch

    short, default = start("brief"), start("demo")
    created = aws.clock()
    assert ttl(short) == (created + 2 * DAY_MS) // 1000  # from the creation on
    assert ttl(default) == (created + 30 * DAY_MS) // 1000
    aws.clock.advance(DAY_MS)
    for b in (short, default):
        run(ctx, b)  # the turn ends: a status change moves the TTL
    assert ttl(short) == (aws.clock() + 2 * DAY_MS) // 1000
    assert ttl(default) == (aws.clock() + 30 * DAY_MS) // 1000


def test_dev_runs_the_templates_schedule_rates() -> None:
    """`threads-aws dev` reads the sweeper's Schedule event (no "not emulated" warning) and runs
    rate expressions on a timer; a cron expression is named as not run."""
    from threads_aws_dev.local.sam import ScheduleSource, parse_template
    from threads_aws_dev.local.timers import period_s, start

    t = parse_template(REPO / "template.yaml")
    assert t.skipped == []
    assert t.schedules == [ScheduleSource("SweeperFunction", "Sweep", "rate(1 hour)")]
    assert [period_s(e) for e in ("rate(1 hour)", "rate(5 minutes)", "rate(2 days)")] == [3600, 300, 172_800]
    assert period_s("cron(0 * * * ? *)") is None and period_s("rate(0 hours)") is None
    stop, warnings = start([ScheduleSource("F", "E", "cron(0 3 * * ? *)")], handlers=None)  # type: ignore[arg-type]
    stop.set()
    assert warnings == ["F.E: 'cron(0 3 * * ? *)' not run by dev (rates only)"]
