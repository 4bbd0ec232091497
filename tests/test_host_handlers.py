"""Every function's handler invoked with its events/ sample on moto; the route table against
openapi.json; the served contract; request parsing and error bodies at the HTTP layer."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
FUNCTIONS = sorted(p.name for p in (REPO / "functions").iterdir() if (p / "app.py").exists())
CONTEXT = SimpleNamespace(
    function_name="threads-test",
    function_version="$LATEST",
    memory_limit_in_mb=512,
    invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:threads-test",
    aws_request_id="00000000-0000-4000-8000-000000000000",
    get_remaining_time_in_millis=lambda: 25_000,
)


def load_handler(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"fn_{name}", REPO / "functions" / name / "app.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.handler


@pytest.fixture
def env(aws, monkeypatch):
    from threads_aws.host import runtime

    for k, v in aws.resources.env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "1")
    monkeypatch.setenv("SSE_WAIT_MS", "0")
    monkeypatch.delenv("THREADS_DEV_TOKENS", raising=False)
    runtime.reset()
    yield aws
    runtime.reset()


def sample(name: str) -> dict[str, Any]:
    return json.loads((REPO / "events" / f"{name}.json").read_text())


def test_every_function_has_a_sample_event():
    assert FUNCTIONS and all((REPO / "events" / f"{n}.json").exists() for n in FUNCTIONS)


NOT_ROUTES = (
    "authorizer",
    "run_step",
    "channel_inbox",
    "schedule_fire",
    "tool_example",
    "sandbox_exec",
    "deferred_call",
    "sweeper",
)


@pytest.mark.parametrize("name", [n for n in FUNCTIONS if n not in NOT_ROUTES])
def test_route_handler_with_its_sample(env, name):
    out = load_handler(name)(sample(name), CONTEXT)
    assert out["statusCode"] < 500, out
    if out["statusCode"] >= 400:
        body = json.loads(out["body"])
        assert set(body["error"]) == {"code", "message"}


def test_start_run_sample_is_accepted(env):
    out = load_handler("start_run")(sample("start_run"), CONTEXT)
    assert out["statusCode"] == 202
    assert set(json.loads(out["body"])) == {"thread_id", "branch_id", "run_id"}


def test_authorizer_sample(env):
    from threads_aws.host.keys import ApiKeys

    minted = ApiKeys(env.stores().api_keys).create("acme", "alice")
    ev = sample("authorizer")
    ev["headers"]["Authorization"] = f"Bearer {minted.token}"
    out = load_handler("authorizer")(ev, CONTEXT)
    assert out["context"] == {"issuer": "api", "tenant": "acme", "subject": "alice"}
    assert out["policyDocument"]["Statement"][0]["Effect"] == "Allow"
    with pytest.raises(Exception, match="Unauthorized"):
        load_handler("authorizer")(sample("authorizer"), CONTEXT)


def test_channel_inbox_sample(env):
    # the sample names an inbox row that does not exist: nothing to apply, nothing fails
    out = load_handler("channel_inbox")(sample("channel_inbox"), CONTEXT)
    assert out == {"batchItemFailures": []}


def test_schedule_fire_sample(env):
    # the sample names a schedule that does not exist: nothing fires
    assert load_handler("schedule_fire")(sample("schedule_fire"), CONTEXT) == {"outcomes": []}


def test_tool_example_sample(env, monkeypatch):
    """The example Lambda tool with its sample payload: an answer, and the same answer again for
    the same effect key (Powertools Idempotency), with one ledger item."""
    table = env.resources.physical["ToolExampleTable"]
    monkeypatch.setenv("TOOL_EXAMPLE_TABLE", table)
    handler = load_handler("tool_example")
    first = handler(sample("tool_example"), CONTEXT)
    assert first["text"].startswith("Recorded lunch: 12.50")
    assert handler(sample("tool_example"), CONTEXT) == first
    items = env.ddb.scan(TableName=table)["Items"]
    assert sum(i["id"]["S"].startswith("expense#") for i in items) == 1


def test_sandbox_exec_sample():
    """The exec sandbox with its sample payload: the command reads the given file, and the file
    it writes comes back as changed (nothing of it stays in /tmp)."""
    import base64

    out = load_handler("sandbox_exec")(sample("sandbox_exec"), CONTEXT)
    assert (out["exit_code"], out["timed_out"], out["stdout"]) == (0, False, "buy milk\n")
    assert [(c["path"], base64.b64decode(c["data_b64"])) for c in out["changed"]] == [("out.txt", b"done\n")]
    assert out["deleted"] == []


def test_run_step_sample(env):
    out = load_handler("run_step")(sample("run_step"), CONTEXT)
    assert "batchItemFailures" in out


def test_sweeper_sample(env):
    """The scheduled pass over an empty deployment: nothing to delete, its counts all zero."""
    out = load_handler("sweeper")(sample("sweeper"), CONTEXT)
    assert out == dict.fromkeys(out, 0) and "expired" in out and "objects_deleted" in out


def test_deferred_call_sample(env):
    """The sample's token is not this deployment's: dropped, nothing left to redeliver."""
    assert load_handler("deferred_call")(sample("deferred_call"), CONTEXT) == {"batchItemFailures": []}


# ------------------------------------------------------------------ contract
def test_route_codes_match_openapi():
    from threads_aws.host.routes import ROUTES
    from threads_aws.host.runtime import openapi

    doc = json.loads(openapi()["body"])  # the served contract: the user's plus what is ours
    ops = {
        op["operationId"]: frozenset(op["x-error-codes"])
        for path, item in doc["paths"].items()
        if path.startswith("/v1/")
        for op in item.values()
        if isinstance(op, dict)  # not a path item's own `x-threads-aws: ours` marker
    }
    assert {k: v for k, v in ROUTES.items()}.keys() == ops.keys()
    for op, codes in ops.items():
        assert ROUTES[op][0] == codes, op


def _ours(node: Any) -> bool:
    """An addition marked as ours, or a container holding only such additions."""
    if not isinstance(node, dict) or not node:
        return False
    return node.get("x-threads-aws") == "ours" or all(_ours(v) for v in node.values())


def without_ours(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: without_ours(v) for k, v in node.items() if not _ours(v)}
    if isinstance(node, list):
        return [without_ours(v) for v in node if not _ours(v)]
    return node


def test_served_contract_is_schemas_openapi_plus_what_is_ours():
    from threads_aws.host.runtime import openapi

    served = json.loads(openapi()["body"])
    assert without_ours(served) == json.loads((REPO / "schemas" / "openapi.json").read_text())
    assert "/v1/threads/{thread_id}/questions/{call_id}/answer" in served["paths"]
    for path in ("/v1/threads/{thread_id}/timeline", "/v1/threads/{thread_id}/fork-points"):
        op = served["paths"][path]["get"]
        assert {p.get("name") for p in op["parameters"] if _ours(p)} == {"after_seq", "limit"}, path
        assert _ours(op["responses"]["200"]["headers"]["Link"]), path


@pytest.mark.parametrize("mode", ["stream", "window"])
def test_template_declares_every_route(mode):
    from threads_aws.host.runtime import openapi
    from threads_aws_dev.local.sam import parse_template

    doc = json.loads(openapi()["body"])
    # Function events and the Api's DefinitionBody (the run stream's switchable integration).
    routes = parse_template(REPO / "template.yaml", {"RunStreamMode": mode}).routes
    declared = {(r.path, r.method.lower()) for r in routes if r.method != "ANY"}
    assert len(declared) == len(routes) - sum(r.method == "ANY" for r in routes)
    wanted = {
        (p, m)
        for p, item in doc["paths"].items()
        if p.startswith("/v1/")
        for m in item
        if not m.startswith("x-")
    }
    public = {  # not /v1 routes
        ("/openapi.json", "get"),
        ("/docs", "get"),
        ("/docs/{asset}", "get"),
        ("/console", "get"),
        ("/console/{asset}", "get"),
    }
    assert wanted | public == declared
    # Every /v1 path answers its undeclared methods 405 (one ANY route each, to one function).
    other = {r.path: r.function for r in routes if r.method == "ANY"}
    assert set(other) == {p for p in doc["paths"] if p.startswith("/v1/")}
    assert set(other.values()) == {"MethodNotAllowedFunction"}


def test_an_undeclared_method_is_405_with_the_paths_methods_in_allow(env):
    ev = sample("cancel")
    ev.update(httpMethod="DELETE", resource="/v1/threads/{thread_id}/cancel")
    out = load_handler("method_not_allowed")(ev, CONTEXT)
    assert out["statusCode"] == 405 and out["headers"]["Allow"] == "POST"
    assert json.loads(out["body"])["error"]["code"] == "not_found"


def test_body_validators_are_fresh():
    from threads_aws_dev import bodies_gen

    assert bodies_gen.OUT.read_text() == bodies_gen.generate()


# ------------------------------------------------------------------ http layer
def call(env, name: str, **changes: Any) -> tuple[int, dict[str, Any]]:
    ev = sample(name)
    for k, v in changes.items():
        ev[k] = v
    out = load_handler(name)(ev, CONTEXT)
    return out["statusCode"], json.loads(out["body"]) if out["body"] else {}


@pytest.mark.parametrize(
    "body, field",
    [
        ("{not json", "not valid JSON"),
        ('{"agent": "demo", "input": "x", "extra": 1}', "body"),
        ('{"agent": 3, "input": "x"}', "body.agent"),
        ('{"agent": "demo", "input": ""}', "body.input"),
        ('{"agent": "demo", "input": "x", "budget": {"max_turns": "many"}}', "body.budget.max_turns"),
        ('{"agent": "demo", "input": "x", "thread_id": "NOT-A-UUID"}', "body.thread_id"),
        ("[]", "body"),
        ("", "JSON body is required"),
    ],
)
def test_bad_bodies_are_invalid_request_naming_the_field(env, body, field):
    status, out = call(env, "start_run", body=body)
    assert status == 400 and out["error"]["code"] == "invalid_request"
    assert field in out["error"]["message"]


def test_unknown_field_is_named(env):
    status, out = call(env, "set_mode", body='{"mode": "plan", "colour": 1}')
    assert status == 400
    assert out["error"]["code"] == "invalid_request"


def test_missing_idempotency_key(env):
    ev = sample("start_run")
    del ev["headers"]["Idempotency-Key"]
    out = load_handler("start_run")(ev, CONTEXT)
    assert out["statusCode"] == 400 and "Idempotency-Key" in json.loads(out["body"])["error"]["message"]


def test_malformed_ids_on_routes_without_invalid_request_are_not_found(env):
    status, out = call(env, "get_timeline", pathParameters={"thread_id": "zzz"})
    assert (status, out["error"]["code"]) == (404, "not_found")
    status, out = call(env, "cancel", queryStringParameters={"branch_id": "1"})
    assert (status, out["error"]["code"]) == (404, "not_found")


@pytest.mark.parametrize(
    "name, query, headers, param",
    [
        ("get_timeline", {"limit": "0"}, {}, "limit"),
        ("get_timeline", {"limit": "abc"}, {}, "limit"),
        ("get_timeline", {"after_seq": "-1"}, {}, "after_seq"),
        ("list_fork_points", {"limit": "10001"}, {}, "limit"),
        ("subscribe_run", {"after_seq": "-1"}, {}, "after_seq"),
        ("subscribe_run", {"format": "xxx"}, {}, "format"),
        ("subscribe_run", {"thinking": "maybe"}, {}, "thinking"),
        ("subscribe_run", {"through_parks": "2"}, {}, "through_parks"),
        ("subscribe_run", {}, {"Last-Event-ID": "junk"}, "Last-Event-ID"),
        ("subscribe_run", {"format": "craze"}, {"Last-Event-ID": "3.x"}, "Last-Event-ID"),
        ("list_threads", {"limit": "0"}, {}, "limit"),
        ("list_threads", {"before": "nope"}, {}, "before"),
    ],
)
def test_a_refused_query_parameter_is_never_not_found_and_names_the_parameter(
    env, name, query, headers, param
):
    # A route that declares invalid_request answers it; one that does not (the subscription, the
    # timeline, fork points) answers 403 forbidden, never 404 (read as "no such thread").
    _, run = call(env, "start_run")
    ev = sample(name)
    if "thread_id" in (ev.get("pathParameters") or {}):
        ev["pathParameters"] = {**ev["pathParameters"], "thread_id": run["thread_id"]}
        if "run_id" in ev["pathParameters"]:
            ev["pathParameters"]["run_id"] = run["run_id"]
    ev["queryStringParameters"] = query
    ev["headers"] = {**(ev.get("headers") or {}), **headers}
    out = load_handler(name)(ev, CONTEXT)
    err = json.loads(out["body"])["error"]
    from threads_aws.host.routes import ROUTES

    op = {"list_threads": "listThreads", "get_timeline": "getTimeline"}.get(name)
    op = op or {"list_fork_points": "listForkPoints", "subscribe_run": "subscribeRun"}[name]
    want = (400, "invalid_request") if "invalid_request" in ROUTES[op][0] else (403, "forbidden")
    assert (out["statusCode"], err["code"]) == want and param in err["message"]
    # the same request with valid parameters reads the thread
    ev["queryStringParameters"], ev["headers"] = (
        {},
        {k: v for k, v in ev["headers"].items() if k not in headers},
    )
    assert load_handler(name)(ev, CONTEXT)["statusCode"] == 200


@pytest.mark.parametrize(
    "body, says",
    [
        ("{not json", "not valid JSON"),
        ('{"reason": 5}', "body.reason"),
        ('{"colour": 1}', "body"),
        ("[]", "body"),
        ('{"reason": "a", "reason": "b"}', "duplicate"),
    ],
)
def test_a_cancel_body_is_validated_like_every_other(env, body, says):
    _, run = call(env, "start_run")
    path = {"thread_id": run["thread_id"]}
    status, out = call(env, "cancel", pathParameters=path, body=body)
    assert (status, out["error"]["code"]) == (403, "forbidden") and says in out["error"]["message"]
    status, out = call(env, "cancel", pathParameters=path, body='{"reason": "enough"}')
    assert status == 200 and set(out) == {"event_id"}


def test_no_principal_is_unauthenticated(env):
    ev = sample("cancel")
    ev["requestContext"].pop("authorizer")
    out = load_handler("cancel")(ev, CONTEXT)
    assert out["statusCode"] == 401
    assert json.loads(out["body"])["error"]["code"] == "unauthenticated"


def test_unexpected_exception_is_a_generic_500(env, monkeypatch):
    from threads_aws.host import service

    monkeypatch.setattr(service.Host, "cancel", lambda *a, **k: 1 / 0)
    status, out = call(env, "cancel")
    assert status == 500 and out == {"error": {"code": "internal", "message": "internal error"}}


def test_start_then_timeline_over_http(env):
    status, run = call(env, "start_run")
    assert status == 202
    status, tl = call(env, "get_timeline", pathParameters={"thread_id": run["thread_id"]})
    assert status == 200 and [e["event"]["type"] for e in tl["entries"]][:2] == [
        "thread_started",
        "user_input",
    ]
    # another tenant
    ev = sample("get_timeline")
    ev["pathParameters"] = {"thread_id": run["thread_id"]}
    ev["requestContext"]["authorizer"] = {"issuer": "api", "tenant": "evil", "subject": "m"}
    out = load_handler("get_timeline")(ev, CONTEXT)
    assert out["statusCode"] == 404


@pytest.mark.parametrize(
    "name, body, says",
    [
        ("start_run", '{"agent": "demo", "input": ""}', "body.input must be a non-empty string or"),
        ("start_run", '{"agent": "demo", "input": 7}', "body.input must be a non-empty string or"),
        ("answer_question", '{"answer": []}', "body.answer must be a non-empty string or"),
    ],
)
def test_one_of_failures_say_what_is_expected(env, name, body, says):
    # "must be valid exactly by one definition" told a caller nothing.
    status, out = call(env, name, body=body)
    assert status == 400 and out["error"]["message"].startswith(says)
