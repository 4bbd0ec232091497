"""Named projections (threads_aws.core.projections): conformance cases plus synthetic logs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import shared
from threads_aws.core import projections as P

CASES = shared.CASES
OPENAPI = shared.SPEC / "openapi.json"

THREAD = "0192a000-0000-7000-8000-000000000001"
BRANCH = "0192b000-0000-7000-8000-000000000001"
PRINCIPAL = {"issuer": "api", "subject": "alice", "tenant": "acme"}
MAX = 2**53 - 1


# ----------------------------------------------------------------------------------------------
# conformance cases
# ----------------------------------------------------------------------------------------------


def _events_of(path: Path) -> list[dict[str, Any]]:
    out = []
    for raw in path.read_bytes().split(b"\n"):
        if not raw:
            continue
        line = json.loads(raw)
        if "format" in line:  # header or head checkpoint
            continue
        out.append(line)
    return out


def _has_projections(d: Path) -> bool:
    exp_path = d / "expected.json"
    if not (exp_path.is_file() and (d / "log.jsonl").is_file()):
        return False
    exp = json.loads(exp_path.read_text())
    return bool(exp.get("outcome") == "ok" and exp.get("projections"))


PROJECTION_CASES = shared.cases(_has_projections)


@shared.needs
def test_projection_cases_found() -> None:
    assert PROJECTION_CASES, f"no conformance cases with projections under {CASES}"


@pytest.mark.parametrize("case_dir", PROJECTION_CASES)
def test_conformance_projections(case_dir: Path) -> None:
    expected = json.loads((case_dir / "expected.json").read_text())["projections"]
    now = json.loads((case_dir / "case.json").read_text())["clock"]["now"]
    events = _events_of(case_dir / "log.jsonl")
    got = P.all_projections(events, now)
    assert set(P.PROJECTION_KEYS) == set(got)
    for key, want in expected.items():
        assert got[key] == want, key


# ----------------------------------------------------------------------------------------------
# synthetic log builder
# ----------------------------------------------------------------------------------------------

MODEL_A = {
    "provider": "scripted",
    "name": "big",
    "context_window": 1000,
    "max_output_tokens": 500,
    "input_billing_bound": "context_window",
    "price": {"input": 3, "output": 15, "cache_read": 1, "cache_write": 4},
}
MODEL_B = {
    "provider": "scripted",
    "name": "small",
    "context_window": 800,
    "max_output_tokens": 300,
    "input_billing_bound": "none",
    "price": {"input": 1, "output": 5},
}
CONTEXT = {
    "reserve_tokens": 0,
    "cache_ttl_ms": 300_000,
    "clear_results": {"trigger": {"tokens": 1000}, "keep_recent": 1, "exclude_tools": []},
    "spill": {"threshold_bytes": 1, "head_bytes": 0, "tail_bytes": 0, "request_budget_bytes": 1},
    "compact": {"trigger": {"permille": 800}, "keep_tail": {"tokens": 10}, "max_failures": 2},
    "restore": {"max_files": 0, "file_tokens": 0, "skill_tokens": 0, "skills_total_tokens": 0},
    "max_output_continuations": 1,
    "defer_tools": "never",
    "defer_threshold": {"tokens": 1},
    "server_edits": "disabled",
}


def _settings(name: str, max_tokens: int | None = 100) -> dict[str, Any]:
    return {
        "model": {"provider": "scripted", "name": name},
        "model_params": {} if max_tokens is None else {"max_tokens": max_tokens},
        "adapter": {"name": "scripted", "version": "1", "settings": {}},
        "reasoning_carryover": "keep",
    }


class Log:
    def __init__(
        self,
        policy: dict[str, Any] | None = None,
        *,
        model: str = "big",
        max_tokens: int | None = 100,
        start: bool = True,
    ) -> None:
        self.events: list[dict[str, Any]] = []
        self.time = 1_790_000_000_000
        if start:
            data: dict[str, Any] = {
                "agent_name": "demo",
                "config_hash": "0" * 64,
                "instructions": "x",
                "model": {"provider": "scripted", "name": model},
                "model_params": {} if max_tokens is None else {"max_tokens": max_tokens},
                "adapter": {"name": "scripted", "version": "1", "settings": {}},
                "tools": [],
            }
            if policy is not None:
                data["policy"] = policy
            self.add("thread_started", data)

    def add(
        self,
        type_: str,
        data: dict[str, Any] | None = None,
        *,
        dt: int = 1000,
        critical: bool = True,
        actor: dict[str, Any] | None = None,
    ) -> str:
        self.time += dt
        seq = len(self.events) + 1
        eid = f"0192e000-0000-7000-8000-{seq:012x}"
        self.events.append(
            {
                "seq": seq,
                "event_id": eid,
                "thread_id": THREAD,
                "branch_id": BRANCH,
                "epoch": 1,
                "type": type_,
                "type_version": 1,
                "time": self.time,
                "actor": actor or {"kind": "host"},
                "prev_hash": "0" * 64,
                "critical": critical,
                "data": data or {},
            }
        )
        return eid

    # conveniences
    def user(self, text: str = "hi") -> str:
        return self.add(
            "user_input", {"source": "api", "text": text}, actor={"kind": "user", "principal": PRINCIPAL}
        )

    def request(self, **extra: Any) -> str:
        data = {
            "attempt": 1,
            "declared_prefix": {"bytes": 1, "sha256": "0" * 64},
            "request_ref": {"bytes": 1, "media_type": "application/x-ndjson", "sha256": "0" * 64},
        }
        data.update(extra)
        return self.add("model_request", data)

    def response(
        self,
        req: str,
        usage: dict[str, Any] | None = None,
        *,
        text: str = "ok",
        stop: str = "end_turn",
        dt: int = 1000,
        type_: str = "model_response",
        content: list[dict[str, Any]] | None = None,
    ) -> str:
        data = {
            "request_event_id": req,
            "content": content if content is not None else [{"type": "text", "text": text}],
            "stop_reason": stop,
            "usage": usage if usage is not None else {"input_tokens": 10, "output_tokens": 2},
            "completeness": "complete",
        }
        if type_ == "model_response_recovered":
            data["provider_request_id"] = "prov-1"
        return self.add(type_, data, dt=dt)

    def turn_end(self, reason: str = "end_turn", **extra: Any) -> str:
        return self.add("turn_completed", {"reason": reason, **extra})

    def simple_turn(self, text: str = "ok") -> tuple[str, str]:
        run_id = self.user()
        req = self.request()
        resp = self.response(req, text=text)
        self.turn_end()
        return run_id, resp


POLICY = {"currency": "USD", "models": [MODEL_A, MODEL_B]}


# ----------------------------------------------------------------------------------------------
# cost
# ----------------------------------------------------------------------------------------------

# bound of one attempt under MODEL_A with max_tokens 100: 1000 × max(3, 1, 4) + 100 × 15
BOUND_A = 1000 * 4 + 100 * 15


def _cost(log: Log) -> dict[str, Any] | None:
    return P.cost(log.events)


def test_cost_known_usage_with_cache_fields() -> None:
    log = Log(POLICY)
    log.user()
    req = log.request()
    usage = {"input_tokens": 10, "output_tokens": 2, "cache_read_tokens": 100, "cache_write_tokens": 7}
    log.response(req, usage)
    log.turn_end()
    # input_tokens excludes cache reads/writes (Usage): each field at its own price
    known = 10 * 3 + 2 * 15 + 100 * 1 + 7 * 4
    assert _cost(log) == {
        "currency": "USD",
        "known_nanos": known,
        "upper_bound_nanos": known,
        "complete": True,
        "bounded": True,
    }


def test_cost_unknown_usage_adds_bound() -> None:
    log = Log(POLICY)
    log.user()
    req = log.request()
    log.response(req, {"input_tokens": 10, "output_tokens": None})
    assert _cost(log) == {
        "currency": "USD",
        "known_nanos": 30,
        "upper_bound_nanos": 30 + BOUND_A,
        "complete": False,
        "bounded": True,
    }


def test_cost_null_cache_field_is_unknown() -> None:
    log = Log(POLICY)
    log.user()
    req = log.request()
    log.response(req, {"input_tokens": 10, "output_tokens": 2, "cache_read_tokens": None})
    got = _cost(log)
    assert got is not None
    assert (got["known_nanos"], got["upper_bound_nanos"], got["complete"]) == (60, 60 + BOUND_A, False)


@pytest.mark.parametrize(
    "abandon",
    [
        {"provider_outcome": "not_sent", "reason": "crash"},
        {"provider_outcome": "failed", "reason": "rate_limited", "billing": "not_billed", "http_status": 429},
    ],
)
def test_cost_not_billed_abandon_costs_nothing(abandon: dict[str, Any]) -> None:
    log = Log(POLICY)
    log.user()
    req = log.request()
    log.add("model_attempt_abandoned", {"request_event_id": req, **abandon})
    assert _cost(log) == {
        "currency": "USD",
        "known_nanos": 0,
        "upper_bound_nanos": 0,
        "complete": True,
        "bounded": True,
    }


@pytest.mark.parametrize("billing", [None, "unknown"])
def test_cost_unknown_abandon_and_open_request_charge_bound(billing: str | None) -> None:
    log = Log(POLICY)
    log.user()
    req = log.request()
    data: dict[str, Any] = {"request_event_id": req, "provider_outcome": "unknown", "reason": "timeout"}
    if billing:
        data["billing"] = billing
    log.add("model_attempt_abandoned", data)
    log.request(attempt=2, input_bound_tokens=50)  # still open: its bound, with the declared input bound
    got = _cost(log)
    assert got == {
        "currency": "USD",
        "known_nanos": 0,
        "upper_bound_nanos": BOUND_A + (50 * 4 + 100 * 15),
        "complete": False,
        "bounded": True,
    }


def test_cost_unbounded_attempt_and_epoch_model() -> None:
    log = Log(POLICY)
    log.user()
    r1 = log.request()
    log.response(r1, stop="end_turn")
    log.turn_end()
    log.add("settings_changed", {"reason": "user", "settings": _settings("small", 40)})
    log.user()
    r2 = log.request()  # model small: input_billing_bound none, no input_bound_tokens
    log.response(r2, {"input_tokens": 100, "output_tokens": None})
    got = _cost(log)
    # r1 under big: 10×3 + 2×15; r2 under small: 100×1 known, bound unknown
    assert got == {
        "currency": "USD",
        "known_nanos": 60 + 100,
        "upper_bound_nanos": 60 + 100,
        "complete": False,
        "bounded": False,
    }
    # with a declared input bound the same attempt is bounded: 70 × 1 + 40 × 5
    log2 = Log(POLICY, model="small", max_tokens=40)
    log2.user()
    r = log2.request(input_bound_tokens=70)
    log2.add(
        "model_attempt_abandoned", {"request_event_id": r, "provider_outcome": "failed", "reason": "timeout"}
    )
    assert _cost(log2) == {
        "currency": "USD",
        "known_nanos": 0,
        "upper_bound_nanos": 70 + 200,
        "complete": False,
        "bounded": True,
    }


def test_cost_max_tokens_falls_back_to_model_output_cap() -> None:
    log = Log(POLICY, max_tokens=None)
    log.user()
    log.request()
    got = _cost(log)
    assert got is not None and got["upper_bound_nanos"] == 1000 * 4 + 500 * 15


@pytest.mark.parametrize("max_tokens", [0, -5])
def test_cost_nonpositive_max_tokens_is_no_output_bound(max_tokens: int) -> None:
    # A pinned max_tokens of 0 or less bounds nothing (never the model's output cap instead):
    # an attempt without a response then has no cost bound.
    log = Log(POLICY, max_tokens=max_tokens)
    log.user()
    log.request()
    got = _cost(log)
    assert got is not None and (got["complete"], got["bounded"]) == (False, False)
    assert got["upper_bound_nanos"] == 0
    # with a response of known usage there is nothing to bound
    req = log.events[-1]["event_id"]
    log.response(req, {"input_tokens": 10, "output_tokens": 2})
    got = _cost(log)
    assert got is not None and (got["complete"], got["bounded"], got["known_nanos"]) == (True, True, 60)


def test_cost_unlisted_model_is_unpriced() -> None:
    log = Log({"currency": "USD", "models": [MODEL_B]}, model="big")
    log.user()
    req = log.request()
    log.response(req)
    assert _cost(log) == {
        "currency": "USD",
        "known_nanos": 0,
        "upper_bound_nanos": 0,
        "complete": False,
        "bounded": False,
    }


def test_cost_none_without_currency_or_models() -> None:
    assert P.cost(Log(None).events) is None
    assert P.cost(Log({"models": [MODEL_A]}).events) is None
    assert P.cost(Log({"currency": "USD"}).events) is None
    assert P.cost([]) is None


def test_cost_overflow_known_and_upper() -> None:
    log = Log(POLICY)
    log.user()
    req = log.request()
    log.response(req, {"input_tokens": MAX // 3 + 1, "output_tokens": 0})
    assert _cost(log) == {"error": "cost_overflow"}

    # exactly at the limit is fine
    log = Log({"currency": "USD", "models": [{**MODEL_A, "price": {"input": 1, "output": 1}}]})
    log.user()
    req = log.request()
    log.response(req, {"input_tokens": MAX, "output_tokens": 0})
    got = _cost(log)
    assert got is not None and got["known_nanos"] == MAX

    # only the upper bound overflows
    huge = {**MODEL_A, "context_window": MAX, "price": {"input": 2, "output": 1}}
    log = Log({"currency": "USD", "models": [huge]})
    log.user()
    req = log.request()
    log.response(req, {"input_tokens": 1, "output_tokens": None})
    assert _cost(log) == {"error": "cost_overflow"}


def test_cost_recovered_response_and_skips_unknown_events() -> None:
    log = Log(POLICY)
    log.user()
    log.add("some_future_note", {"x": 1}, critical=False)
    req = log.request()
    log.response(req, type_="model_response_recovered")
    got = _cost(log)
    assert got is not None and got["known_nanos"] == 60 and got["complete"] is True


# ----------------------------------------------------------------------------------------------
# cache_breaks
# ----------------------------------------------------------------------------------------------


def _cached(reads: int) -> dict[str, Any]:
    return {"input_tokens": 10, "output_tokens": 2, "cache_read_tokens": reads}


def _break_log(
    between: str | None, *, gap: int = 1000, reads: int = 1000, prev: int = 10_000
) -> tuple[Log, str]:
    """Two turn responses; ``gap`` is the time between them (the second request sits 1 s in)."""
    log = Log({"context": CONTEXT, **POLICY})
    log.user()
    r1 = log.request()
    log.response(r1, _cached(prev), stop="tool_use")
    prev_time = log.time
    if between == "settings_changed":
        log.add("settings_changed", {"reason": "fallback", "settings": _settings("small")})
    elif between == "compacted":
        log.add(
            "compacted",
            {
                "from_seq": 2,
                "to_seq": 3,
                "from_event_id": log.events[1]["event_id"],
                "to_event_id": log.events[2]["event_id"],
                "summary_ref": {"bytes": 1, "media_type": "text/plain", "sha256": "0" * 64},
            },
        )
    elif between == "context_edited":
        log.add("context_edited", {"reason": "manual", "edits": [{"call_id": "c1", "action": "clear"}]})
    elif between == "tools_changed":
        log.add("tools_changed", {"tools": [], "tools_hash": "0" * 64})
    r2 = log.request()
    log.response(r2, _cached(reads), dt=gap - (log.time - prev_time))
    return log, r2


@pytest.mark.parametrize("cause", ["settings_changed", "compacted", "context_edited", "tools_changed"])
def test_cache_break_named_causes(cause: str) -> None:
    log, r2 = _break_log(cause, gap=10**9)  # the event wins over an expired TTL
    assert P.cache_breaks(log.events) == [{"request_event_id": r2, "likely_cause": cause}]


def test_cache_break_ttl_and_unknown() -> None:
    log, r2 = _break_log(None, gap=300_001)
    assert P.cache_breaks(log.events) == [{"request_event_id": r2, "likely_cause": "ttl_expired"}]
    log, r2 = _break_log(None, gap=300_000)
    assert P.cache_breaks(log.events) == [{"request_event_id": r2, "likely_cause": "unknown"}]


def test_cache_break_thresholds() -> None:
    # 47 500 is exactly 95 % of 50 000: not a break
    assert P.cache_breaks(_break_log(None, prev=50_000, reads=47_500)[0].events) == []
    # 47 499 < 95 % and a drop of 2 501 ≥ 2 000: a break
    assert len(P.cache_breaks(_break_log(None, prev=50_000, reads=47_499)[0].events) or []) == 1
    # below 95 % but a drop under 2 000 tokens: not a break
    log = Log({"context": CONTEXT, **POLICY})
    log.user()
    r1 = log.request()
    log.response(r1, _cached(3_000), stop="tool_use")
    r2 = log.request()
    log.response(r2, _cached(1_001))
    assert P.cache_breaks(log.events) == []
    log.events[-1]["data"]["usage"]["cache_read_tokens"] = 1_000
    assert len(P.cache_breaks(log.events) or []) == 1


def test_cache_break_skips_compaction_responses_and_unknown_reads() -> None:
    log = Log({"context": CONTEXT, **POLICY})
    log.user()
    r1 = log.request()
    log.response(r1, _cached(10_000), stop="tool_use")
    rc = log.request(purpose="compaction")
    log.response(rc, _cached(0))
    r2 = log.request()
    log.response(r2, _cached(9_800), stop="tool_use")
    assert P.cache_breaks(log.events) == []
    r3 = log.request()
    log.response(r3, {"input_tokens": 1, "output_tokens": 1, "cache_read_tokens": None}, stop="tool_use")
    r4 = log.request()
    log.response(r4, _cached(0))  # previous turn response's reads are unknown: no comparison
    assert P.cache_breaks(log.events) == []


def test_cache_breaks_none_without_context() -> None:
    log, _ = _break_log(None)
    log.events[0]["data"]["policy"] = dict(POLICY)
    assert P.cache_breaks(log.events) is None
    assert P.cache_breaks([]) is None


# ----------------------------------------------------------------------------------------------
# compaction, todos, children, pending_wakes, team_tasks, mode, model, output
# ----------------------------------------------------------------------------------------------


def test_compaction_breaker() -> None:
    log = Log({"context": CONTEXT})
    assert P.compaction(log.events) == {"consecutive_failures": 0, "breaker_open": False}
    log.add("compaction_failed", {"stage": "summary", "reason": "model_error"})
    assert P.compaction(log.events) == {"consecutive_failures": 1, "breaker_open": False}
    log.add("compaction_failed", {"stage": "summary", "reason": "empty_summary"})
    assert P.compaction(log.events) == {"consecutive_failures": 2, "breaker_open": True}
    log.add(
        "compacted",
        {
            "from_seq": 1,
            "to_seq": 1,
            "from_event_id": log.events[0]["event_id"],
            "to_event_id": log.events[0]["event_id"],
            "summary_ref": {"bytes": 1, "media_type": "text/plain", "sha256": "0" * 64},
        },
    )
    log.add("compaction_failed", {"stage": "hook", "reason": "hook_denied"})
    assert P.compaction(log.events) == {"consecutive_failures": 1, "breaker_open": False}
    # without a policy the breaker never opens
    nolimit = Log(None)
    for _ in range(5):
        nolimit.add("compaction_failed", {"stage": "summary", "reason": "model_error"})
    assert P.compaction(nolimit.events) == {"consecutive_failures": 5, "breaker_open": False}


def test_todos() -> None:
    log = Log()
    assert P.todos(log.events) == []
    log.add("todos_updated", {"call_id": "c1", "todos": [{"id": "a", "content": "A", "status": "pending"}]})
    second = [{"id": "b", "content": "B", "status": "in_progress", "active_form": "Doing B"}]
    log.add("todos_updated", {"call_id": "c2", "todos": second})
    got = P.todos(log.events)
    assert got == second
    got[0]["id"] = "mutated"
    assert log.events[-1]["data"]["todos"][0]["id"] == "b"


def _spawn(log: Log, child: str, mode: str, call: str) -> str:
    return log.add(
        "agent_spawned",
        {
            "call_id": call,
            "child_thread_id": child,
            "agent_name": "worker",
            "mode": mode,
            "isolation": "none",
        },
    )


def _finish(log: Log, child: str, status: str = "completed") -> str:
    return log.add(
        "agent_finished",
        {"child_thread_id": child, "status": status, "usage": {"input_tokens": 1, "output_tokens": 1}},
    )


C1 = "0192a000-0000-7000-8000-0000000000c1"
C2 = "0192a000-0000-7000-8000-0000000000c2"
C3 = "0192a000-0000-7000-8000-0000000000c3"


def test_children_and_pending_wakes() -> None:
    log = Log()
    log.user()
    _spawn(log, C3, "background", "k3")
    _spawn(log, C1, "foreground", "k1")
    _spawn(log, C2, "background", "k2")
    assert P.children(log.events) == [
        {"child_thread_id": C3, "status": "running"},
        {"child_thread_id": C1, "status": "running"},
        {"child_thread_id": C2, "status": "running"},
    ]
    assert P.pending_wakes(log.events) == [
        {"branch_id": BRANCH, "child_thread_id": C2},
        {"branch_id": BRANCH, "child_thread_id": C3},
    ]
    _finish(log, C1, "failed")
    _finish(log, C3, "budget_exhausted")
    assert P.children(log.events)[0] == {"child_thread_id": C3, "status": "budget_exhausted"}
    assert P.children(log.events)[1] == {"child_thread_id": C1, "status": "failed"}
    assert P.pending_wakes(log.events) == [{"branch_id": BRANCH, "child_thread_id": C2}]
    log.add("parked", {"address": {"kind": "child", "id": C2}, "reason": "awaiting_approval"})
    assert P.pending_wakes(log.events) == []


def test_team_tasks() -> None:
    log = Log()
    for tid in ("t1", "t2", "t3", "t4"):
        log.add("team_task_created", {"task_id": tid, "subject": tid.upper(), "blocked_by": []})
    log.add("team_task_claimed", {"task_id": "t1", "member": "ann"})
    log.add("team_task_claimed", {"task_id": "t2", "member": "bob"})
    log.add("team_task_updated", {"task_id": "t2", "status": "completed"})
    log.add("team_task_claimed", {"task_id": "t3", "member": "cy"})
    log.add("team_task_updated", {"task_id": "t3", "status": "released"})
    log.add("team_task_claimed", {"task_id": "t4", "member": "dee"})
    log.add("team_task_updated", {"task_id": "t4", "status": "failed"})
    assert P.team_tasks(log.events) == [
        {"task_id": "t1", "status": "claimed", "owner": "ann"},
        {"task_id": "t2", "status": "completed", "owner": "bob"},
        {"task_id": "t3", "status": "open"},
        {"task_id": "t4", "status": "failed", "owner": "dee"},
    ]


def test_mode() -> None:
    assert P.mode(Log().events) == "default"
    perms = {
        "mode": "plan",
        "allow": [],
        "ask": [],
        "deny": [],
        "protected_paths": [],
        "allow_bypass": False,
        "plan_exit_mode": "default",
    }
    log = Log({"permissions": perms})
    assert P.mode(log.events) == "plan"
    log.add("mode_changed", {"from": "plan", "to": "accept_edits"})
    assert P.mode(log.events) == "accept_edits"


def test_model() -> None:
    assert P.model([]) is None
    log = Log(POLICY)
    assert P.model(log.events) == {"provider": "scripted", "name": "big"}
    log.add("settings_changed", {"reason": "fallback", "settings": _settings("small")})
    assert P.model(log.events) == {"provider": "scripted", "name": "small"}


def test_output() -> None:
    log = Log()
    assert P.output(log.events) == {"outcome": "none"}
    log.add(
        "output_validated",
        {
            "source_event_id": log.events[0]["event_id"],
            "schema_sha256": "0" * 64,
            "outcome": "rejected",
            "errors": [{"path": "/", "message": "bad"}],
        },
    )
    assert P.output(log.events) == {"outcome": "rejected"}
    log.add(
        "output_validated",
        {
            "source_event_id": log.events[0]["event_id"],
            "schema_sha256": "0" * 64,
            "outcome": "accepted",
            "value": 0,
        },
    )
    assert P.output(log.events) == {"outcome": "accepted", "value": 0}


# ----------------------------------------------------------------------------------------------
# run and RunOutcome
# ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def run_outcome_validator(contract: Any) -> Any:
    import jsonschema

    doc = json.loads(OPENAPI.read_text())
    schema = {"$ref": "#/components/schemas/RunOutcome", "components": doc["components"]}
    return jsonschema.Draft202012Validator(schema)


def _outcome(log: Log, run_id: str, validator: Any) -> dict[str, Any] | None:
    got = P.run_outcome(log.events, run_id, thread_id=THREAD, branch_id=BRANCH)
    if got is not None:
        validator.validate(got)
        assert got["thread_id"] == THREAD and got["branch_id"] == BRANCH
    return got


def test_run_none_without_input() -> None:
    assert P.run(Log().events) is None
    with pytest.raises(KeyError):
        P.run_outcome(Log().events, "nope", thread_id=THREAD, branch_id=BRANCH)


def test_run_completed_text(run_outcome_validator: Any) -> None:
    log = Log()
    run_id = log.user()
    req = log.request()
    assert P.run(log.events) == {"status": "running", "output_event_id": None}
    assert _outcome(log, run_id, run_outcome_validator) is None
    resp = log.response(
        req,
        content=[
            {"type": "text", "text": "Hello, "},
            {"type": "text", "text": "world."},
        ],
    )
    log.turn_end()
    assert P.run(log.events) == {"status": "completed", "output_event_id": resp}
    assert _outcome(log, run_id, run_outcome_validator) == {
        "status": "completed",
        "thread_id": THREAD,
        "branch_id": BRANCH,
        "output": "Hello, world.",
    }


def test_run_completed_structured_output(run_outcome_validator: Any) -> None:
    log = Log()
    run_id = log.user()
    req = log.request()
    resp = log.response(req, text='{"a": 1}')
    log.add(
        "output_validated",
        {"source_event_id": resp, "schema_sha256": "0" * 64, "outcome": "accepted", "value": {"a": 1}},
    )
    log.turn_end()
    assert _outcome(log, run_id, run_outcome_validator) == {
        "status": "completed",
        "thread_id": THREAD,
        "branch_id": BRANCH,
        "output": {"a": 1},
    }


def test_run_parked_then_resumed(run_outcome_validator: Any) -> None:
    log = Log()
    run_id = log.user()
    req = log.request()
    log.response(
        req, stop="tool_use", content=[{"type": "tool_use", "call_id": "c1", "name": "bash", "input": {}}]
    )
    log.add("tool_call", {"call_id": "c1", "name": "bash", "input": {}, "request_event_id": req})
    log.add("permission_decision", {"call_id": "c1", "decision": "ask", "source": "policy"})
    log.add("parked", {"address": {"kind": "approval", "id": "ch1"}, "reason": "awaiting_approval"})
    log.add("parked", {"address": {"kind": "input", "id": "c9"}, "reason": "awaiting_input"})
    assert P.run(log.events) == {"status": "parked", "output_event_id": None}
    assert _outcome(log, run_id, run_outcome_validator) == {
        "status": "parked",
        "thread_id": THREAD,
        "branch_id": BRANCH,
        "reason": "awaiting_approval",
        "pending": [{"kind": "approval", "id": "ch1"}, {"kind": "input", "id": "c9"}],
    }
    granted = log.add("approval_granted", {"challenge_id": "ch1", "call_id": "c1", "args_hash": "0" * 64})
    log.add("resumed", {"address": {"kind": "approval", "id": "ch1"}, "cause_event_id": granted})
    log.add("resumed", {"address": {"kind": "input", "id": "c9"}, "cause_event_id": granted})
    assert P.run(log.events) == {"status": "running", "output_event_id": None}


@pytest.mark.parametrize(
    ("reason", "code", "want"),
    [
        ("error", None, "model_error"),
        ("error", "content_unsupported", "content_unsupported"),
        ("error", "transport_fence_unsupported", "transport_fence_unsupported"),
        ("max_turns", None, "max_turns"),
        ("max_output", None, "max_output"),
        ("context_exhausted", None, "context_exhausted"),
        ("output_invalid", None, "output_invalid"),
        ("input_denied", None, "input_denied"),
        ("stop_hook_limit", None, "stop_hook_limit"),
        ("model_unavailable", None, "model_unavailable"),
        ("interrupted", None, "model_error"),
    ],
)
def test_run_failed(run_outcome_validator: Any, reason: str, code: str | None, want: str) -> None:
    log = Log()
    run_id = log.user()
    log.turn_end(reason, **({"code": code} if code else {}))
    assert P.run(log.events) == {"status": "failed", "output_event_id": None}
    got = _outcome(log, run_id, run_outcome_validator)
    assert got is not None and got["status"] == "failed" and got["error"]["code"] == want


def test_run_cancelled(run_outcome_validator: Any) -> None:
    log = Log()
    run_id = log.user()
    req = log.request()
    cancel = log.add("cancel_requested", {"scope": "thread"}, actor={"kind": "user", "principal": PRINCIPAL})
    log.add(
        "model_attempt_abandoned",
        {"request_event_id": req, "provider_outcome": "unknown", "reason": "cancelled"},
    )
    log.add("cancelled", {"request_event_id": cancel})
    assert P.run(log.events) == {"status": "running", "output_event_id": None}
    log.turn_end("cancelled")
    assert P.run(log.events) == {"status": "cancelled", "output_event_id": None}
    assert _outcome(log, run_id, run_outcome_validator) == {
        "status": "cancelled",
        "thread_id": THREAD,
        "branch_id": BRANCH,
    }


def test_run_budget_exhausted(run_outcome_validator: Any) -> None:
    log = Log()
    run_id = log.user()
    budget = {
        "scope": "run",
        "limit": "max_cost_nanos",
        "limit_value": 10,
        "observed": 12,
        "observed_is_upper_bound": True,
    }
    log.add("budget_exceeded", budget)
    log.turn_end("budget_exhausted")
    assert P.run(log.events) == {"status": "budget_exhausted", "output_event_id": None}
    assert _outcome(log, run_id, run_outcome_validator) == {
        "status": "budget_exhausted",
        "thread_id": THREAD,
        "branch_id": BRANCH,
        "budget": budget,
    }


def test_run_handed_off(run_outcome_validator: Any) -> None:
    log = Log()
    run_id = log.user()
    req = log.request()
    log.response(req, stop="tool_use")
    target = "0192a000-0000-7000-8000-0000000000d1"
    log.add("handoff", {"call_id": "h1", "to_agent": "billing", "to_thread_id": target, "forwarded": "none"})
    log.turn_end("handoff")
    assert P.run(log.events) == {"status": "handed_off", "output_event_id": None}
    assert _outcome(log, run_id, run_outcome_validator) == {
        "status": "handed_off",
        "thread_id": THREAD,
        "branch_id": BRANCH,
        "to_thread_id": target,
    }


def test_run_waits_for_background_child_then_later_wake_unchanged(run_outcome_validator: Any) -> None:
    log = Log()
    run_id = log.user()
    r1 = log.request()
    log.response(r1, stop="tool_use")
    _spawn(log, C1, "background", "k1")
    r2 = log.request()
    out = log.response(r2, text="started it")
    log.turn_end()
    # output exists but a background child of the run is unfinished
    assert P.run(log.events) == {"status": "running", "output_event_id": None}
    _finish(log, C1)
    assert P.run(log.events) == {"status": "completed", "output_event_id": out}
    # a later wake turn (model_request with no open turn) that fails leaves the run completed
    r3 = log.request()
    log.response(r3, text="late")
    log.turn_end("error")
    assert P.run(log.events) == {"status": "completed", "output_event_id": out}
    assert _outcome(log, run_id, run_outcome_validator) == {
        "status": "completed",
        "thread_id": THREAD,
        "branch_id": BRANCH,
        "output": "started it",
    }


def test_run_is_the_last_run_and_outcome_of_an_earlier_run(run_outcome_validator: Any) -> None:
    log = Log()
    first, resp1 = log.simple_turn("one")
    second = log.user()
    log.turn_end("max_turns")
    assert P.run(log.events) == {"status": "failed", "output_event_id": None}
    assert _outcome(log, first, run_outcome_validator) == {
        "status": "completed",
        "thread_id": THREAD,
        "branch_id": BRANCH,
        "output": "one",
    }
    got = _outcome(log, second, run_outcome_validator)
    assert got is not None and got["error"]["code"] == "max_turns"
    assert resp1 != first


def test_run_output_skips_compaction_response() -> None:
    log = Log()
    log.user()
    r1 = log.request()
    out = log.response(r1, stop="end_turn")
    rc = log.request(purpose="compaction")
    log.response(rc, text="summary")
    log.turn_end()
    assert P.run(log.events) == {"status": "completed", "output_event_id": out}


def test_all_projections_keys() -> None:
    log = Log({"context": CONTEXT, **POLICY})
    _, resp = log.simple_turn()
    got = P.all_projections(log.events, 0)
    assert list(got) == list(P.PROJECTION_KEYS)
    assert got["run"] == {"status": "completed", "output_event_id": resp}
    assert got["cache_breaks"] == []
    assert got["cost"]["complete"] is True
