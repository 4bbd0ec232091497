"""Schedules: cron in an IANA zone (pure), the add-only routes (tenant-scoped, typed errors,
EventBridge Scheduler on moto), and occurrences fired by the local ticker with an injected
clock: reserved once, fired (schedule_fired + user_input{source: schedule}) or skipped as
missed / overlap, a removed agent retired with nothing appended."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from threads_aws.core.importer import import_log
from threads_aws.engine.step import advance
from threads_aws.host.errors import ApiError
from threads_aws.host.principal import Principal
from threads_aws.schedules.cron import CronError, parse
from threads_aws.schedules.fire import handle as fire_handler
from threads_aws.schedules.fire import occurrence_ms
from threads_aws.schedules.service import ScheduleService
from threads_aws.schedules.ticker import ScheduleTicker
from threads_aws.store.scheduler import EventBridgeSchedules

ALICE = Principal("api", "acme", "alice")
MALLORY = Principal("api", "other", "mallory")


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp() * 1000)


# ------------------------------------------------------------------ cron (pure)
def test_cron_in_a_zone_across_dst():
    c = parse("30 9 * * MON-FRI")
    got = list(
        c.occurrences(ms("2026-03-27T00:00:00+00:00"), ms("2026-04-01T00:00:00+00:00"), "Europe/Paris")
    )
    # Fri 27 Mar 09:30 CET (08:30Z); Mon 30, Tue 31 09:30 CEST (07:30Z): the zone moved on the 29th
    assert [datetime.fromtimestamp(t / 1000, UTC).isoformat() for t in got] == [
        "2026-03-27T08:30:00+00:00",
        "2026-03-30T07:30:00+00:00",
        "2026-03-31T07:30:00+00:00",
    ]
    assert parse("*/15 * * * *").eventbridge() == "cron(0/15 * * * ? *)"
    assert parse("30 9 * * MON-FRI").eventbridge() == "cron(30 9 ? * MON,TUE,WED,THU,FRI *)"
    assert parse("0 0 1 * *").eventbridge() == "cron(0 0 1 * ? *)"


@pytest.mark.parametrize(
    "bad", ["* * * *", "61 * * * *", "0 0 1 * MON", "5-1 * * * *", "x * * * *", "*/0 * * * *"]
)
def test_bad_cron_is_refused(bad):
    with pytest.raises(CronError):
        parse(bad)


def test_fire_payload_time():
    assert occurrence_ms("2026-12-01T09:00:00Z") == ms("2026-12-01T09:00:00+00:00")


# ------------------------------------------------------------------ service on moto
@pytest.fixture
def env(aws):
    aws.clock.now = ms("2026-12-01T08:58:00+00:00")
    svc = aws.services()
    return aws, svc


def finished_thread(aws, svc, text: str = "hello") -> dict[str, str]:
    run = svc.host().start_run(ALICE, {"agent": "demo", "input": text}, f"k-{text}-{aws.clock()}")
    assert (
        advance(svc.engine(), run["branch_id"], holder_id="w", deadline_ms=aws.clock() + 300_000).state
        == "idle"
    )
    return run


def service(svc, scheduler: Any = None) -> ScheduleService:
    return ScheduleService(
        svc.stores, svc.writer, svc.agents, svc.clock, scheduler=scheduler, steps=svc.steps
    )


def events(svc, branch_id: str) -> list[dict[str, Any]]:
    return import_log(svc.stores.events.export(branch_id)).fold.events


def test_create_list_delete_are_tenant_scoped_and_typed(env):
    aws, svc = env
    run = finished_thread(aws, svc)
    s = service(svc)
    host = svc.host()
    made = s.create(
        host, ALICE, run["thread_id"], {"cron": "0 9 * * *", "timezone": "Europe/Paris", "input": "daily"}
    )
    assert made["cron"] == "0 9 * * *" and made["branch_id"] == run["branch_id"]
    assert [x["schedule_id"] for x in s.list_for(host, ALICE, run["thread_id"])] == [made["schedule_id"]]
    for body, field in [
        ({"cron": "0 9 * *", "input": "x"}, "body.cron"),
        ({"cron": "0 9 * * *", "input": "x", "timezone": "Mars/Olympus"}, "body.timezone"),
        ({"cron": "0 9 * * *", "input": ""}, "body.input"),
        ({"cron": "0 9 * * *", "input": "x", "colour": 1}, "colour"),
    ]:
        with pytest.raises(ApiError) as exc:
            s.create(host, ALICE, run["thread_id"], body)
        assert exc.value.code == "invalid_request" and field in exc.value.message
    with pytest.raises(ApiError) as exc:
        s.create(host, MALLORY, run["thread_id"], {"cron": "0 9 * * *", "input": "x"})
    assert exc.value.code == "not_found"
    with pytest.raises(ApiError) as exc:
        s.delete(host, MALLORY, run["thread_id"], made["schedule_id"])
    assert exc.value.code == "not_found"
    assert s.delete(host, ALICE, run["thread_id"], made["schedule_id"]) == {
        "schedule_id": made["schedule_id"],
        "deleted": True,
    }
    assert s.list_for(host, ALICE, run["thread_id"]) == []
    assert svc.stores.schedules.active_ids() == []


def test_one_eventbridge_schedule_per_thread_schedule(env):
    aws, svc = env
    run = finished_thread(aws, svc)
    client = aws.session.client("scheduler")
    eb = EventBridgeSchedules(
        client,
        target_arn="arn:aws:lambda:us-east-1:123456789012:function:fire",
        role_arn="arn:aws:iam::123456789012:role/scheduler",
    )
    s = service(svc, eb)
    made = s.create(
        svc.host(),
        ALICE,
        run["thread_id"],
        {"cron": "30 9 * * MON-FRI", "timezone": "Asia/Tokyo", "input": "x"},
    )
    got = client.get_schedule(Name=f"threads-{made['schedule_id']}", GroupName="default")
    assert got["ScheduleExpression"] == "cron(30 9 ? * MON,TUE,WED,THU,FRI *)"
    assert got["ScheduleExpressionTimezone"] == "Asia/Tokyo"
    assert json.loads(got["Target"]["Input"]) == {
        "schedule_id": made["schedule_id"],
        "tenant": "acme",
        "scheduled_for": "<aws.scheduler.scheduled-time>",
    }
    s.delete(svc.host(), ALICE, run["thread_id"], made["schedule_id"])
    assert client.list_schedules()["Schedules"] == []


def test_ticker_fires_at_the_occurrence_once(env):
    aws, svc = env
    run = finished_thread(aws, svc)
    s = service(svc)
    s.create(
        svc.host(), ALICE, run["thread_id"], {"cron": "0 9 * * *", "timezone": "UTC", "input": "good morning"}
    )
    ticker = ScheduleTicker(s, clock=aws.clock)
    assert ticker.tick() == {}  # 08:58: nothing due
    aws.clock.now = ms("2026-12-01T09:00:30+00:00")
    (outcomes,) = ticker.tick().values()
    assert outcomes == ["fired"]
    assert ticker.tick() == {}  # the watermark moved: not fired twice
    evs = events(svc, run["branch_id"])
    fired, ui = evs[-2], evs[-1]
    assert fired["type"] == "schedule_fired" and ui["type"] == "user_input"
    assert fired["data"]["scheduled_for"] == ms("2026-12-01T09:00:00+00:00")
    assert fired["data"]["timezone"] == "UTC"
    assert ui["data"] == {
        "source": "schedule",
        "text": "good morning",
        "delivery_event_id": fired["event_id"],
    }
    assert ui["actor"] == {"kind": "scheduler", "principal": ALICE.as_dict()}
    # a second scheduler (an EventBridge retry) of the same occurrence changes nothing
    again = s.fire(fired["data"]["schedule_id"], "acme", fired["data"]["scheduled_for"])
    assert again == [] and len(events(svc, run["branch_id"])) == len(evs)
    # the branch was woken and runs the scheduled input
    assert (
        advance(svc.engine(), run["branch_id"], holder_id="w", deadline_ms=aws.clock() + 300_000).state
        == "idle"
    )
    assert events(svc, run["branch_id"])[-1]["type"] == "turn_completed"


def test_missed_and_overlap_are_skipped_with_their_reason(env):
    aws, svc = env
    run = finished_thread(aws, svc)
    s = service(svc)
    made = s.create(
        svc.host(), ALICE, run["thread_id"], {"cron": "*/10 * * * *", "timezone": "UTC", "input": "tick"}
    )
    ticker = ScheduleTicker(s, clock=aws.clock)
    # no host ran from 08:58 to 09:35: 09:00, 09:10, 09:20 fell due long ago (missed); 09:30 is recent
    aws.clock.now = ms("2026-12-01T09:35:00+00:00")
    (outcomes,) = ticker.tick().values()
    assert outcomes == ["missed", "missed", "missed", "fired"]
    # the fired run's turn is still open (no worker ran): the next occurrence overlaps it
    aws.clock.now = ms("2026-12-01T09:40:05+00:00")
    (outcomes,) = ticker.tick().values()
    assert outcomes == ["overlap"]
    evs = events(svc, run["branch_id"])
    skipped = [e for e in evs if e["type"] == "schedule_skipped"]
    assert [(e["data"]["reason"], e["data"]["scheduled_for"]) for e in skipped] == [
        ("missed", ms("2026-12-01T09:00:00+00:00")),
        ("missed", ms("2026-12-01T09:10:00+00:00")),
        ("missed", ms("2026-12-01T09:20:00+00:00")),
        ("overlap", ms("2026-12-01T09:40:00+00:00")),
    ]
    assert all(e["critical"] is False for e in skipped)
    row = svc.stores.occurrences.get("acme", made["schedule_id"], ms("2026-12-01T09:40:00+00:00"))
    assert row.state == "skipped" and row.reason == "overlap" and row.logged_seq == skipped[-1]["seq"]
    assert svc.stores.occurrences.pending(run["thread_id"]) == []


def test_a_gone_agent_retires_the_occurrence_with_nothing_appended(env):
    aws, svc = env
    run = finished_thread(aws, svc)
    s = service(svc)
    made = s.create(svc.host(), ALICE, run["thread_id"], {"cron": "0 9 * * *", "input": "x"})
    gone = ScheduleService(svc.stores, svc.writer, {}, svc.clock, steps=svc.steps)
    before = len(events(svc, run["branch_id"]))
    aws.clock.now = ms("2026-12-01T09:00:10+00:00")
    assert gone.fire(made["schedule_id"], "acme", ms("2026-12-01T09:00:00+00:00")) == ["removed"]
    assert len(events(svc, run["branch_id"])) == before
    row = svc.stores.occurrences.get("acme", made["schedule_id"], ms("2026-12-01T09:00:00+00:00"))
    assert (row.state, row.reason) == ("retired", "removed")


def test_the_fire_function_payload(env):
    aws, svc = env
    run = finished_thread(aws, svc)
    made = service(svc).create(svc.host(), ALICE, run["thread_id"], {"cron": "0 9 * * *", "input": "x"})
    aws.clock.now = ms("2026-12-01T09:00:02+00:00")
    out = fire_handler(
        {"schedule_id": made["schedule_id"], "tenant": "acme", "scheduled_for": "2026-12-01T09:00:00Z"}, svc
    )
    assert out == {"outcomes": ["fired"]}
    # another tenant naming the schedule fires nothing
    assert fire_handler(
        {"schedule_id": made["schedule_id"], "tenant": "other", "scheduled_for": "2026-12-02T09:00:00Z"}, svc
    ) == {"outcomes": []}


# ------------------------------------------------------------------ the routes, through the handler
def _route_event(method: str, path: str, resource: str, params: dict[str, str], body: Any, p: Principal):
    return {
        "resource": resource,
        "path": path,
        "httpMethod": method,
        "headers": {"Content-Type": "application/json"},
        "multiValueHeaders": {},
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "pathParameters": params,
        "requestContext": {
            "resourcePath": resource,
            "httpMethod": method,
            "stage": "test",
            "requestId": "t",
            "authorizer": {**p.as_dict(), "principalId": p.key},
        },
        "body": None if body is None else (body if isinstance(body, str) else json.dumps(body)),
        "isBase64Encoded": False,
    }


def test_routes_through_the_handler(env, monkeypatch):
    import importlib.util
    from pathlib import Path

    aws, svc = env
    for k, v in aws.resources.env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "1")
    from threads_aws import services

    services.reset()
    run = finished_thread(aws, svc)  # the handler's services (wall clock) see the same tables
    fn = Path(__file__).resolve().parents[1] / "functions" / "schedules" / "app.py"
    spec = importlib.util.spec_from_file_location("_t_schedules_fn", fn)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    tid = run["thread_id"]
    coll, item = "/v1/threads/{thread_id}/schedules", "/v1/threads/{thread_id}/schedules/{schedule_id}"
    out = mod.handler(
        _route_event(
            "POST",
            f"/v1/threads/{tid}/schedules",
            coll,
            {"thread_id": tid},
            {"cron": "0 9 * * *", "input": "hi"},
            ALICE,
        ),
        None,
    )
    assert out["statusCode"] == 201, out
    sid = json.loads(out["body"])["schedule_id"]
    out = mod.handler(
        _route_event("POST", f"/v1/threads/{tid}/schedules", coll, {"thread_id": tid}, "{nope", ALICE), None
    )
    assert out["statusCode"] == 400 and json.loads(out["body"])["error"]["code"] == "invalid_request"
    out = mod.handler(
        _route_event("GET", f"/v1/threads/{tid}/schedules", coll, {"thread_id": tid}, None, MALLORY), None
    )
    assert out["statusCode"] == 404
    out = mod.handler(
        _route_event("GET", f"/v1/threads/{tid}/schedules", coll, {"thread_id": tid}, None, ALICE), None
    )
    assert out["statusCode"] == 200 and [x["schedule_id"] for x in json.loads(out["body"])] == [sid]
    out = mod.handler(
        _route_event(
            "DELETE",
            f"/v1/threads/{tid}/schedules/{sid}",
            item,
            {"thread_id": tid, "schedule_id": sid},
            None,
            ALICE,
        ),
        None,
    )
    assert out["statusCode"] == 200
    out = mod.handler(
        _route_event(
            "DELETE",
            f"/v1/threads/{tid}/schedules/{sid}",
            item,
            {"thread_id": tid, "schedule_id": sid},
            None,
            ALICE,
        ),
        None,
    )
    assert out["statusCode"] == 404
    services.reset()


# ------------------------------------------------------------------ agent-declared schedules
def _agents_with(schedules: list[dict[str, str]]) -> Any:
    from threads_aws.agents import DEFAULT_FILE, parse_agents

    raw = json.loads(DEFAULT_FILE.read_text())
    raw["demo"]["schedules"] = schedules
    return parse_agents(json.dumps(raw))


def test_agents_file_schedules_are_validated():
    from threads_aws.config.agents_file import AgentsFileError

    with pytest.raises(AgentsFileError, match="schedules"):
        _agents_with([{"name": "x", "cron": "0 9 * *", "input": "i", "tenant": "t"}])
    with pytest.raises(AgentsFileError, match="time zone"):
        _agents_with(
            [{"name": "x", "cron": "0 9 * * *", "input": "i", "tenant": "t", "timezone": "No/Where"}]
        )


def test_agent_declared_schedule_gets_a_thread_and_fires(aws):
    from threads_aws.schedules.agent_schedules import sync
    from threads_aws.services import Services

    aws.clock.now = ms("2026-12-01T08:58:00+00:00")
    decl = {
        "name": "daily",
        "cron": "0 9 * * *",
        "timezone": "UTC",
        "input": "daily digest",
        "tenant": "acme",
    }
    clients = {"dynamodb": aws.ddb, "s3": aws.s3, "sqs": aws.sqs}
    svc = Services(aws.resources, clients=clients, clock=aws.clock, agents=_agents_with([decl]))
    out = sync(svc)
    (sid,) = out["created"]
    assert sync(svc) == {"created": [], "deleted": []}  # unchanged: left alone
    row = svc.stores.schedules.get(sid)
    assert svc.stores.threads.get_thread("acme", row.thread_id) is not None
    assert [e["type"] for e in events(svc, row.branch_id)] == ["thread_started"]
    aws.clock.now = ms("2026-12-01T09:00:20+00:00")
    (outcomes,) = ScheduleTicker(ScheduleService.of(svc), clock=aws.clock).tick().values()
    assert outcomes == ["fired"]
    ui = events(svc, row.branch_id)[-1]
    assert ui["data"]["text"] == "daily digest"
    assert ui["actor"]["principal"] == {"issuer": "schedule", "subject": sid, "tenant": "acme"}
    # a changed declaration is another schedule: the old one (and its EventBridge schedule) goes
    changed = Services(
        aws.resources, clients=clients, clock=aws.clock, agents=_agents_with([{**decl, "cron": "0 10 * * *"}])
    )
    out = sync(changed)
    assert out["deleted"] == [sid] and len(out["created"]) == 1
    assert svc.stores.schedules.get(out["created"][0]).cron == "0 10 * * *"
