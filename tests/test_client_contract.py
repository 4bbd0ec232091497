"""threads_aws_client against the served contract, without a host: an error class per code a
route or the gateway can answer, TypedDicts with the schemas' keys, a method per operation
(sync and async alike), nothing of the server side imported; and the client's own logic (what
is retried, Link paging, stream state) on canned answers, for the answers the local host cannot
be made to give on demand (a throttle, a 502, a paged timeline before paging is served)."""

from __future__ import annotations

import asyncio
import inspect
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from threads_aws_client import (
    AsyncClient,
    Client,
    ConnectionFailed,
    Retries,
    _calls,
    _streams,
    errors,
    types,
)

REPO = Path(__file__).resolve().parents[1]
SERVED = json.loads((REPO / "layers/threads_aws/threads_aws/host/openapi.json").read_text())
SCHEMAS = SERVED["components"]["schemas"]
FAST = Retries(attempts=3, backoff_s=0.001, max_backoff_s=0.002)


def v1_operations() -> dict[str, dict[str, Any]]:
    return {
        op["operationId"]: op
        for path, item in SERVED["paths"].items()
        if path.startswith("/v1/")
        for op in item.values()
        if isinstance(op, dict)
    }


def gateway_codes() -> set[str]:
    from threads_aws_dev.local.infra import load_template

    tpl = load_template(REPO / "template.yaml")
    out = set()
    for gr in tpl["Resources"]["HostApi"]["Properties"]["GatewayResponses"].values():
        body = json.loads(
            gr["ResponseTemplates"]["application/json"].replace("$context.error.messageString", '""')
        )
        out.add(body["error"]["code"])
    return out


# ------------------------------------------------------------------ errors
def test_every_code_a_route_or_the_gateway_answers_has_its_class():
    codes = {c for op in v1_operations().values() for c in op["x-error-codes"]} | gateway_codes()
    assert codes >= {"unavailable", "timeout", "too_large", "branch_busy"}
    for code in codes:
        cls = errors.error_for(code)
        assert cls is not errors.ThreadsError and cls.code == code, code
        err = errors.make_error(code, "m", 409)
        assert isinstance(err, errors.ThreadsError) and (err.code, err.message, err.status) == (
            code,
            "m",
            409,
        )


def test_error_classes_are_contract_codes():
    enum = (
        set(SCHEMAS["events_ErrorCode"]["enum"])
        | set(SCHEMAS["api_ApiErrorCode"]["enum"])
        | set(SCHEMAS["OursErrorCode"]["enum"])  # ours: `busy` (semantics.md §2 names it)
    )
    assert set(errors.ERRORS) <= enum
    assert errors.error_for("a_code_from_the_future") is errors.ThreadsError
    assert isinstance(ConnectionFailed("x"), errors.UnavailableError)


# ------------------------------------------------------------------ shapes
def test_typed_dicts_have_the_schemas_keys():
    for name, td in types.SCHEMAS.items():
        schema = SCHEMAS[name]
        required = set(schema.get("required", []))
        assert td.__required_keys__ == required, name
        assert td.__required_keys__ | td.__optional_keys__ == set(schema["properties"]), name


def test_inline_response_shapes_have_the_schemas_keys():
    ops = v1_operations()
    for op_id, td in types.RESPONSES.items():
        ok = next(c for c in ops[op_id]["responses"] if c.startswith("2"))
        schema = ops[op_id]["responses"][ok]["content"]["application/json"]["schema"]
        schema = schema.get("items", schema)  # a list answers items of the shape
        assert td.__required_keys__ == set(schema["required"]), op_id
        assert td.__required_keys__ | td.__optional_keys__ == set(schema["properties"]), op_id


def test_outcomes_and_messages_have_the_schemas_keys():
    for variant in SCHEMAS["RunOutcome"]["oneOf"]:
        td = types.OUTCOMES[variant["properties"]["status"]["const"]]
        assert td.__required_keys__ == set(variant["required"]) == set(variant["properties"])
    variants = [*SCHEMAS["StreamEvent"]["oneOf"], SCHEMAS["SseMessage"]["oneOf"][1]]
    for variant in variants:
        td = types.MESSAGES[variant["properties"]["kind"]["const"]]
        assert td.__required_keys__ == set(variant["required"])
        assert td.__required_keys__ | td.__optional_keys__ == set(variant["properties"])


# ------------------------------------------------------------------ surface
def test_a_method_per_served_operation_on_both_clients():
    assert set(_calls.OPERATIONS) == set(v1_operations())
    for method in _calls.OPERATIONS.values():
        assert callable(getattr(Client, method)) and callable(getattr(AsyncClient, method))


def test_sync_and_async_clients_have_the_same_signatures():
    def public(cls: type) -> dict[str, inspect.Signature]:
        return {
            n: inspect.signature(f)
            for n, f in inspect.getmembers(cls, inspect.isfunction)
            if not n.startswith("_") and n not in ("close", "aclose")
        }

    sync, aio = public(Client), public(AsyncClient)
    assert sync.keys() == aio.keys()
    for name in sync:
        s, a = sync[name], aio[name]
        assert list(s.parameters) == list(a.parameters), name
        assert [p.default for p in s.parameters.values()] == [p.default for p in a.parameters.values()], name


SERVER_SIDE = (
    "boto3",
    "botocore",
    "moto",
    "orjson",
    "threads_aws",
    "threads_aws_dev",
)
CLIENT_DEPS = {
    "threads_aws_client",
    "httpx",
    "httpx_sse",
    "httpcore",
    "h11",
    "anyio",
    "sniffio",
    "idna",
    "certifi",
    "typing_extensions",
    "exceptiongroup",
}
# httpx imports its optional command line (rich, click, pygments) when they are installed.
HTTPX_OPTIONAL = {"rich", "click", "pygments", "markdown_it", "mdurl", "zstandard", "brotli", "_cffi_backend"}


def test_the_client_imports_nothing_of_the_server_side():
    probe = (
        "import json, sys\n"
        "before = set(sys.modules)\n"
        "import threads_aws_client, threads_aws_client.types, threads_aws_client.errors\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    modules = json.loads(out)  # what importing the client added
    bad = [m for m in modules if any(m == s or m.startswith(s + ".") for s in SERVER_SIDE)]
    assert bad == []
    tops = {m.split(".")[0] for m in modules} - set(sys.stdlib_module_names)
    assert tops - CLIENT_DEPS <= HTTPX_OPTIONAL, tops - CLIENT_DEPS


# ------------------------------------------------------------------ retries (canned answers)
def canned(*answers: Any) -> tuple[httpx.MockTransport, list[httpx.Request]]:
    seen: list[httpx.Request] = []
    queue = list(answers)

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        a = queue.pop(0)
        if isinstance(a, Exception):
            raise a
        return a

    return httpx.MockTransport(handle), seen


def err(status: int, code: str, **headers: str) -> httpx.Response:
    return httpx.Response(status, json={"error": {"code": code, "message": code}}, headers=headers)


RECEIPT = {"thread_id": "t", "branch_id": "b", "run_id": "r"}


def test_start_run_retries_a_5xx_and_a_lost_answer_with_one_key():
    transport, seen = canned(
        err(502, "unavailable"), httpx.ReadError("reset"), httpx.Response(202, json=RECEIPT)
    )
    with Client("http://h", "k", transport=transport, retries=FAST) as c:
        assert c.start_run("demo", "hi") == RECEIPT
    keys = {r.headers["Idempotency-Key"] for r in seen}
    assert len(seen) == 3 and len(keys) == 1 and {r.content for r in seen} == {seen[0].content}


def test_a_control_is_not_resent_after_it_may_have_been_applied():
    transport, seen = canned(err(502, "unavailable"))
    with (
        Client("http://h", "k", transport=transport, retries=FAST) as c,
        pytest.raises(errors.UnavailableError),
    ):
        c.approve("t", "c")
    assert len(seen) == 1
    transport, seen = canned(httpx.ReadError("reset"))
    with Client("http://h", "k", transport=transport, retries=FAST) as c, pytest.raises(ConnectionFailed):
        c.cancel("t")
    assert len(seen) == 1


def test_a_throttle_or_a_refused_connect_is_retried_for_any_call():
    ok = httpx.Response(200, json={"event_id": "e"})
    transport, seen = canned(
        err(429, "unavailable", **{"Retry-After": "0"}), httpx.ConnectError("refused"), ok
    )
    with Client("http://h", "k", transport=transport, retries=FAST) as c:
        assert c.approve("t", "c") == {"event_id": "e"}
    assert len(seen) == 3


def test_retries_give_up_with_the_typed_error_and_the_key():
    transport, seen = canned(*[err(503, "unavailable")] * 4)
    with (
        Client("http://h", "k", transport=transport, retries=FAST) as c,
        pytest.raises(errors.UnavailableError) as e,
    ):
        c.start_run("demo", "hi", idempotency_key="mine")
    assert len(seen) == 4 and e.value.idempotency_key == "mine" and e.value.status == 503


def test_an_answer_that_is_not_the_contract_is_unexpected():
    transport, _ = canned(httpx.Response(418, text="<html>teapot</html>"), httpx.Response(200, text="nope"))
    with Client("http://h", "k", transport=transport, retries=FAST) as c:
        with pytest.raises(errors.UnexpectedResponse) as e:
            c.branches("t")
        assert e.value.status == 418 and "teapot" in e.value.message
        with pytest.raises(errors.UnexpectedResponse):
            c.branches("t")


# ------------------------------------------------------------------ paging (canned answers)
def page(seqs: list[int], link: str | None) -> httpx.Response:
    body = {
        "thread_id": "t",
        "branch_id": "b",
        "entries": [{"event": {"seq": s}, "fork_point": False} for s in seqs],
    }
    return httpx.Response(200, json=body, headers={"Link": f'<{link}>; rel="next"'} if link else {})


def test_timeline_follows_link_next_relative_to_the_request():
    transport, seen = canned(
        page([1, 2], "timeline?after_seq=2&limit=2"),
        page([3, 4], "timeline?after_seq=4&limit=2"),
        page([5], None),
    )
    with Client("http://h/stage", "k", transport=transport) as c:
        timeline = c.timeline("t", limit=2)
    assert [e["event"]["seq"] for e in timeline["entries"]] == [1, 2, 3, 4, 5]
    assert [str(r.url) for r in seen] == [
        "http://h/stage/v1/threads/t/timeline?limit=2",
        "http://h/stage/v1/threads/t/timeline?after_seq=2&limit=2",
        "http://h/stage/v1/threads/t/timeline?after_seq=4&limit=2",
    ]


def test_fork_points_follow_link_next():
    point = lambda seq: {"branch_id": "b", "seq": seq, "event_id": f"e{seq}", "snapshot": {}}  # noqa: E731
    link = {"Link": '<fork-points?after_seq=3&limit=1>; rel="next"'}
    transport, seen = canned(
        httpx.Response(200, json=[point(3)], headers=link),
        httpx.Response(200, json=[point(9)]),
    )
    with Client("http://h", "k", transport=transport) as c:
        assert [p["seq"] for p in c.fork_points("t", "b", limit=1)] == [3, 9]
    assert str(seen[1].url) == "http://h/v1/threads/t/fork-points?after_seq=3&limit=1"


def test_async_timeline_pages_and_a_link_to_itself_stops():
    async def main() -> list[int]:
        def handle(request: httpx.Request) -> httpx.Response:
            return page([1], str(request.url))  # a next link that names this very page

        async with AsyncClient("http://h", "k", transport=httpx.MockTransport(handle)) as c:
            return [e["event"]["seq"] for e in (await c.timeline("t"))["entries"]]

    assert asyncio.run(main()) == [1]


# ------------------------------------------------------------------ stream state
def test_stream_state_drops_resent_events_and_keeps_retry():
    st = _streams.StreamState("t", "r", after_seq=3)
    ev = lambda seq: json.dumps({"kind": "event", "event": {"seq": seq}})  # noqa: E731
    assert st.feed(ev(3), None) is None  # at the cursor: already delivered
    assert st.feed(ev(4), 2500)["event"]["seq"] == 4 and st.retry_ms == 2500
    assert st.request_headers()["Last-Event-ID"] == "4"
    assert st.feed("", 100) is None and st.retry_ms == 100
    assert st.feed(json.dumps({"kind": "delta", "request_event_id": "q", "text": "hi"}), None)["text"] == "hi"
    assert (
        st.feed(json.dumps({"kind": "result", "run_id": "r", "result": {"status": "cancelled"}}), None)
        is None
    )
    assert st.result == {"status": "cancelled"}
    with pytest.raises(errors.UnexpectedResponse):
        st.feed("not json", None)


def test_stream_gives_up_after_consecutive_failures():
    st = _streams.StreamState("t", "r", max_failures=2)
    st.broken(httpx.ReadError("x"))
    st.broken(httpx.ReadError("x"))
    with pytest.raises(ConnectionFailed):
        st.broken(httpx.ReadError("x"))
    with pytest.raises(errors.NotFoundError):
        st.connected(err(404, "not_found"))
