"""Bodies that break the log's line limits (semantics.md §1) are 400 invalid_request naming the
field, checked before anything is written — through the local gateway (`threads-aws dev`) —
plus the strict body parse and the principal key limits on their own."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from helpers.dev_process import DevProcess, dev_process
from threads_aws.core.errors import LogError
from threads_aws.host import limits
from threads_aws.host.errors import ApiError
from threads_aws.host.principal import MAX_PART_BYTES, Principal

MIB = 1 << 20


def nested(depth: int, leaf: Any = 1) -> Any:
    """`depth` levels of objects: nested(1) == {"a": 1}."""
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevProcess]:
    with dev_process(tmp_path_factory.mktemp("limits")) as d:
        yield d


def refused(status: int, body: Any, *words: str) -> None:
    assert status == 400, (status, body)
    assert body["error"]["code"] == "invalid_request", body
    for w in words:
        assert w in body["error"]["message"], body


def settled(dev: DevProcess, text: str = "hello") -> dict[str, str]:
    run = dev.start_run(text)
    dev.wait_for(run["thread_id"], "turn_completed")
    return run


# ---------------------------------------------------------------- through the local gateway


def test_input_of_one_mib_is_refused_and_the_key_stays_unused(dev: DevProcess) -> None:
    key = {"Idempotency-Key": str(uuid.uuid4())}
    status, body, _ = dev.call("POST", "/v1/runs", {"agent": "demo", "input": "x" * MIB}, headers=key)
    refused(status, body, "body.input", "1 MiB")
    # Nothing was written: the same key with a recordable body starts a run.
    status, body, _ = dev.call("POST", "/v1/runs", {"agent": "demo", "input": "x"}, headers=key)
    assert status == 202, body


def test_continuing_with_a_too_large_input_appends_nothing(dev: DevProcess) -> None:
    run = settled(dev)
    before = dev.timeline(run["thread_id"])
    status, body, _ = dev.call(
        "POST",
        "/v1/runs",
        {"agent": "demo", "input": [{"type": "text", "text": "y" * MIB}], "thread_id": run["thread_id"]},
        headers={"Idempotency-Key": str(uuid.uuid4())},
    )
    refused(status, body, "body.input")
    assert dev.timeline(run["thread_id"]) == before


def test_model_params_too_deep_for_the_body(dev: DevProcess) -> None:
    run = settled(dev)
    model = {"provider": "demo", "name": "demo-2"}
    status, body, _ = dev.call(
        "POST", f"/v1/threads/{run['thread_id']}/settings", {"model": model, "model_params": nested(100)}
    )
    refused(status, body, "body.model_params.a", "deeper than 64")


def test_model_params_too_deep_for_the_line(dev: DevProcess) -> None:
    # 62 levels pass the body's own limit but not the line's: the event puts model_params at level 4
    # (line → data → settings → model_params). The writer refuses it before anything is written.
    run = settled(dev)
    before = dev.timeline(run["thread_id"])
    model = {"provider": "demo", "name": "demo-2"}
    status, body, _ = dev.call(
        "POST", f"/v1/threads/{run['thread_id']}/settings", {"model": model, "model_params": nested(62)}
    )
    refused(status, body, "body.model_params.a", "nests too deep to record")
    assert dev.timeline(run["thread_id"]) == before


@pytest.mark.parametrize(
    "number", ["9007199254740993", "18446744073709551616", "-9007199254740992", "2.302063691455508e+16"]
)
def test_integers_beyond_2_53(dev: DevProcess, number: str) -> None:
    run = settled(dev)
    raw = (
        b'{"model":{"provider":"demo","name":"demo-2"},"model_params":{"max_tokens":'
        + number.encode()
        + b"}}"
    )
    status, body, _ = dev.call("POST", f"/v1/threads/{run['thread_id']}/settings", raw)
    refused(status, body, number[:16], "2^53")


def test_six_hundred_levels_are_a_400_not_a_500(dev: DevProcess) -> None:
    raw = b'{"agent":"demo","input":"x","budget":' + b'{"a":' * 600 + b"1" + b"}" * 600 + b"}"
    status, body, _ = dev.call("POST", "/v1/runs", raw, headers={"Idempotency-Key": str(uuid.uuid4())})
    refused(status, body, "deeper than 64")
    raw = b'{"agent":"demo","input":"x","budget":' + b"[" * 2000 + b"]" * 2000 + b"}"
    status, body, _ = dev.call("POST", "/v1/runs", raw, headers={"Idempotency-Key": str(uuid.uuid4())})
    refused(status, body, "deeper than 64")


def test_duplicate_keys(dev: DevProcess) -> None:
    raw = b'{"agent":"demo","input":"x","input":"y"}'
    status, body, _ = dev.call("POST", "/v1/runs", raw, headers={"Idempotency-Key": str(uuid.uuid4())})
    refused(status, body, "'input' twice")
    run = settled(dev)
    raw = b'{"mode":"plan","mode":"default"}'
    status, body, _ = dev.call("POST", f"/v1/threads/{run['thread_id']}/mode", raw)
    refused(status, body, "'mode' twice")


def test_approval_reason_over_a_mib(dev: DevProcess) -> None:
    run = dev.start_run("note: buy milk")
    dev.wait_for(run["thread_id"], "parked")
    status, pending, _ = dev.call("GET", f"/v1/threads/{run['thread_id']}/approvals")
    assert status == 200 and len(pending) == 1, pending
    path = f"/v1/threads/{run['thread_id']}/approvals/{pending[0]['challenge_id']}"
    before = dev.timeline(run["thread_id"])
    status, body, _ = dev.call("POST", path, {"decision": "deny", "reason": "r" * 1_100_000})
    refused(status, body, "body.reason", "1 MiB")
    assert dev.timeline(run["thread_id"]) == before
    # The challenge is still open: the approval row was not consumed either.
    status, body, _ = dev.call("POST", path, {"decision": "deny", "reason": "no"})
    assert status == 200, body


def test_answer_over_a_mib(dev: DevProcess) -> None:
    run = dev.start_run("ask: which colour?")
    events = dev.wait_for(run["thread_id"], "parked")
    call_id = next(e for e in events if e["type"] == "tool_call")["data"]["call_id"]
    path = f"/v1/threads/{run['thread_id']}/questions/{call_id}/answer"
    status, body, _ = dev.call("POST", path, {"answer": "b" * 1_100_000})
    refused(status, body, "body.answer", "1 MiB")
    status, body, _ = dev.call("POST", path, {"answer": ["c" * 400_000, "d" * 400_000, "e" * 400_000]})
    refused(status, body, "body.answer")
    status, body, _ = dev.call("POST", path, {"answer": "blue"})
    assert status == 200, body


def test_a_tenant_too_long_for_a_key_is_refused(dev: DevProcess) -> None:
    token = f"dev:api:{'t' * (MAX_PART_BYTES + 1)}:alice"
    status, body, _ = dev.call(
        "POST",
        "/v1/runs",
        {"agent": "demo", "input": "x"},
        token=token,
        headers={"Idempotency-Key": "k"},
    )
    assert status == 401 and body["error"]["code"] == "unauthenticated", body
    token = f"dev:api:{'t' * MAX_PART_BYTES}:{'s' * MAX_PART_BYTES}"
    status, body, _ = dev.call(
        "POST",
        "/v1/runs",
        {"agent": "demo", "input": "x"},
        token=token,
        headers={"Idempotency-Key": "é" * 255},
    )
    assert status == 202, body


# ---------------------------------------------------------------- the parts on their own


def test_parse_body_limits() -> None:
    assert limits.parse_body(json.dumps(nested(64)).encode()) == nested(64)  # the body is level 1
    with pytest.raises(ApiError, match="deeper than 64"):
        limits.parse_body(json.dumps(nested(65)).encode())
    with pytest.raises(ApiError, match="infinity"):
        limits.parse_body(b'{"a":1e999}')
    with pytest.raises(ApiError, match="not valid JSON"):
        limits.parse_body(b'{"a":"\\ud800"}')
    with pytest.raises(ApiError, match="not valid JSON"):
        limits.parse_body(b'{"a":NaN}')
    assert limits.parse_body(b'{"a":[1.5,-9007199254740991,"[[[["]}') == {"a": [1.5, -(2**53 - 1), "[[[["]}


def test_the_line_limits_the_writer_relies_on() -> None:
    # The exact admission path must refuse what the fast path declines (a line over 1 MiB).
    from threads_aws.core.canonical import MAX_LINE_BYTES, NotCanonical, admit

    pad = MAX_LINE_BYTES - len(b'{"a":""}')
    assert admit(b'{"a":"' + b"x" * pad + b'"}')
    with pytest.raises(NotCanonical, match="1 MiB"):
        admit(b'{"a":"' + b"x" * (pad + 1) + b'"}')
    with pytest.raises(NotCanonical, match="deeper than 64"):
        admit(json.dumps(nested(65), separators=(",", ":")).encode())


def test_blame_names_only_what_the_body_explains() -> None:
    big = {"a": "x", "reason": "r" * 700_000}
    named = limits.blame(big, LogError("invalid_line", 5, "line longer than 1 MiB"))
    assert named is not None and named.message.startswith("body.reason is too large")
    assert limits.blame({"a": "x"}, LogError("invalid_line", 5, "line longer than 1 MiB")) is None
    assert limits.blame(big, LogError("seq_conflict", 5, "x")) is None
    deep = {"p": [nested(40)]}
    named = limits.blame(deep, LogError("invalid_line", None, "nesting deeper than 64"))
    assert named is not None and named.message.startswith("body.p[0].a.a.a.a…")


def test_principal_parts_are_bounded(aws: Any) -> None:
    from threads_aws.host.auth import dev_principal
    from threads_aws.host.http import Request
    from threads_aws.host.keys import ApiKeys

    long = "t" * (MAX_PART_BYTES + 1)
    assert Principal("api", "t" * MAX_PART_BYTES, "s").too_long() is None
    assert "tenant" in (Principal("api", long, "s").too_long() or "")
    assert "subject" in (Principal("api", "t", "é" * 129).too_long() or "")  # bytes, not characters
    assert dev_principal(f"dev:api:{long}:s") is None
    with pytest.raises(ValueError, match="tenant"):
        ApiKeys(aws.stores().api_keys).create(long, "s")
    req = Request(Principal("api", long, "s"), {}, {}, {}, None)
    with pytest.raises(ApiError) as exc:
        req.who()
    assert exc.value.code == "forbidden"
