"""Host service on moto: every route's success and the x-error-codes a test can trigger."""

from __future__ import annotations

import json
import threading

import pytest
from helpers.host import (
    ALICE,
    BOB,
    MALLORY,
    append,
    make_host,
    park_on_approval,
    park_on_effect,
    park_on_question,
    start,
    types,
)
from threads_aws.core.canonical import new_uuid7
from threads_aws.core.errors import LogError
from threads_aws.host.errors import ApiError
from threads_aws.host.principal import Principal


@pytest.fixture
def host(aws):
    return make_host(aws)


def code_of(fn, *a, **kw) -> str:
    with pytest.raises((ApiError, LogError)) as exc:
        fn(*a, **kw)
    return exc.value.code


def queued(aws) -> list[dict]:
    """Receive and delete (a FIFO group stays blocked while a message is in flight)."""
    url = aws.resources.run_step_queue_url
    msgs = aws.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    for m in msgs:
        aws.sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    return [json.loads(m["Body"]) for m in msgs]


# ------------------------------------------------------------------ runs + idempotency
def test_start_run_new_thread_commits_receipt_with_input_and_wakes(host, aws):
    run = start(host, key="k-1")
    assert set(run) == {"thread_id", "branch_id", "run_id"}
    evs = host.writer.load(run["branch_id"]).fold.events
    assert [e["type"] for e in evs] == ["thread_started", "user_input"]
    assert evs[1]["event_id"] == run["run_id"]
    assert evs[1]["actor"] == {"kind": "user", "principal": ALICE.as_dict()}
    assert evs[1]["data"] == {"source": "api", "text": "hello"}
    assert queued(aws)[0]["branch_id"] == run["branch_id"]


def test_replay_other_body_other_principal(host):
    run = start(host, key="k-1")
    assert start(host, key="k-1") == run  # replay: same receipt
    assert code_of(start, host, key="k-1", text="other") == "idempotency_key_reused"
    # the other principal is checked first, even with a different body
    assert code_of(start, host, BOB, key="k-1", text="other") == "idempotency_key_principal_mismatch"
    assert code_of(start, host, BOB, key="k-1") == "idempotency_key_principal_mismatch"
    bob = start(host, BOB, key="k-2")
    assert bob["thread_id"] != run["thread_id"]
    # another tenant's key space is its own
    assert start(host, MALLORY, key="k-1")["thread_id"] != run["thread_id"]
    assert types(host, run["branch_id"]).count("user_input") == 1


def test_idempotency_key_bounds(host):
    assert code_of(host.start_run, ALICE, {"agent": "scripted", "input": "x"}, None) == "invalid_request"
    assert code_of(host.start_run, ALICE, {"agent": "scripted", "input": "x"}, "") == "invalid_request"
    assert code_of(host.start_run, ALICE, {"agent": "scripted", "input": "x"}, "k" * 256) == "invalid_request"
    assert start(host, key="k" * 255)


def test_twenty_parallel_identical_posts_make_one_user_input(host, aws):
    results: list = []
    errors: list = []

    def post() -> None:
        try:
            results.append(start(host, key="same", text="parallel"))
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=post) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 20 and all(r == results[0] for r in results)
    threads_of_tenant = host.index.list_threads("acme")[0]
    assert len(threads_of_tenant) == 1
    assert types(host, results[0]["branch_id"]).count("user_input") == 1


def test_continue_thread_and_not_runnable(host):
    run = start(host)
    tid, bid = run["thread_id"], run["branch_id"]
    # a turn is open (no turn_completed yet)
    assert code_of(start, host, thread_id=tid) == "branch_not_runnable"
    append(host, bid, ("turn_completed", {"reason": "end_turn"}))
    again = start(host, thread_id=tid, branch_id=bid)
    assert again["thread_id"] == tid and again["branch_id"] == bid and again["run_id"] != run["run_id"]
    append(host, bid, ("turn_completed", {"reason": "end_turn"}))
    # pinned to another agent
    with pytest.raises(ApiError) as exc:
        host.start_run(ALICE, {"agent": "demo", "input": "x", "thread_id": tid}, "k-demo")
    assert exc.value.code == "branch_not_runnable"


def test_start_run_not_found(host):
    assert code_of(host.start_run, ALICE, {"agent": "nope", "input": "x"}, "k") == "not_found"
    run = start(host)
    append(host, run["branch_id"], ("turn_completed", {"reason": "end_turn"}))
    assert code_of(start, host, MALLORY, thread_id=run["thread_id"]) == "not_found"
    other = start(host)
    assert code_of(start, host, thread_id=run["thread_id"], branch_id=other["branch_id"]) == "not_found"
    # branch_id alone is schema-valid: it continues that branch of the caller's tenant
    # (test_host_runs.py), another tenant's branch reads as absent
    assert code_of(start, host, MALLORY, branch_id=run["branch_id"]) == "not_found"
    again = host.start_run(ALICE, {"agent": "scripted", "input": "x", "branch_id": run["branch_id"]}, "k2")
    assert (again["thread_id"], again["branch_id"]) == (run["thread_id"], run["branch_id"])


# ------------------------------------------------------------------ approvals
def test_grant_with_remember_rule_resumes_and_wakes(host, aws):
    run = start(host)
    cid = park_on_approval(host, run, rules=["note", "note(x)"])
    pending = host.pending_approvals(ALICE, run["thread_id"], None)
    assert [p["challenge_id"] for p in pending] == [cid]
    assert pending[0]["tool"] == "note" and pending[0]["input"] == {"text": "remember me"}
    assert pending[0]["suggested_rules"] == ["note", "note(x)"]
    queued(aws)
    out = host.decide_approval(ALICE, run["thread_id"], cid, {"decision": "grant", "remember_rule": "note"})
    evs = host.writer.load(run["branch_id"]).fold.events
    assert [e["type"] for e in evs[-3:]] == ["approval_granted", "permission_rule_added", "resumed"]
    assert evs[-3]["event_id"] == out["event_id"]
    assert evs[-3]["actor"] == {"kind": "approver", "principal": ALICE.as_dict()}
    assert evs[-1]["data"] == {"address": {"kind": "approval", "id": cid}, "cause_event_id": out["event_id"]}
    assert queued(aws)
    assert host.pending_approvals(ALICE, run["thread_id"], None) == []
    # second answer
    assert (
        code_of(host.decide_approval, ALICE, run["thread_id"], cid, {"decision": "deny"})
        == "approval_duplicate"
    )


def test_deny_and_bad_remember_rule(host):
    run = start(host)
    cid = park_on_approval(host, run)
    tid = run["thread_id"]
    assert (
        code_of(host.decide_approval, ALICE, tid, cid, {"decision": "grant", "remember_rule": "bash(rm)"})
        == "invalid_request"
    )
    assert (
        code_of(host.decide_approval, ALICE, tid, cid, {"decision": "deny", "remember_rule": "note"})
        == "invalid_request"
    )
    host.decide_approval(ALICE, tid, cid, {"decision": "deny", "reason": "no"})
    ev = [e for e in host.writer.load(run["branch_id"]).fold.events if e["type"] == "approval_denied"][0]
    assert ev["data"]["reason"] == "no"


def test_expired_answer_is_recorded_as_denial(host, aws):
    run = start(host)
    cid = park_on_approval(host, run, expires_in=1_000)
    aws.clock.advance(1_000)  # at expires_at
    assert (
        code_of(host.decide_approval, ALICE, run["thread_id"], cid, {"decision": "grant"})
        == "approval_expired"
    )
    t = types(host, run["branch_id"])
    assert t[-2:] == ["approval_denied", "resumed"] and "approval_granted" not in t
    assert code_of(host.decide_approval, ALICE, run["thread_id"], cid, {"decision": "grant"}) in (
        "approval_duplicate",
        "approval_expired",
    )


def test_approval_authority(host):
    run = start(host)
    cid = park_on_approval(host, run)
    before = types(host, run["branch_id"])
    assert code_of(host.decide_approval, BOB, run["thread_id"], cid, {"decision": "grant"}) == "forbidden"
    assert types(host, run["branch_id"]) == before
    assert code_of(host.decide_approval, MALLORY, run["thread_id"], cid, {"decision": "grant"}) == "not_found"


def test_configured_approvers(host):
    from dataclasses import replace

    agent = host.agents["scripted"]
    host.agents = {**host.agents, "scripted": replace(agent, approvers=[BOB.as_dict()])}
    run = start(host)
    cid = park_on_approval(host, run)
    assert code_of(host.decide_approval, ALICE, run["thread_id"], cid, {"decision": "grant"}) == "forbidden"
    host.decide_approval(BOB, run["thread_id"], cid, {"decision": "grant"})


def test_decision_lands_while_a_worker_holds_the_lease(host, aws):
    run = start(host)
    cid = park_on_approval(host, run)
    lease = host.store.acquire_lease(run["branch_id"], "worker-1", ttl_ms=60_000)
    host.decide_approval(ALICE, run["thread_id"], cid, {"decision": "grant"})
    # the worker appends under its own lease epoch after the control
    append(host, run["branch_id"], ("heartbeat", {"running_call_ids": []}))
    assert host.writer.load(run["branch_id"]).fold.epoch == lease.epoch


def test_control_retries_a_lost_race(host, monkeypatch):
    run = start(host)
    real = host.store.append
    calls = {"n": 0}

    def racing(*a, **kw):
        calls["n"] += 1
        if calls["n"] == 1:  # another writer moves the head first
            raise LogError("seq_conflict", 3, "head moved")
        return real(*a, **kw)

    monkeypatch.setattr(host.store, "append", racing)
    host.cancel(ALICE, run["thread_id"], None)
    assert calls["n"] == 2
    other = start(host)  # `run`'s barrier now stands: a second cancel there appends nothing
    monkeypatch.setattr(
        host.store, "append", lambda *a, **kw: (_ for _ in ()).throw(LogError("seq_conflict", 3))
    )
    assert code_of(host.cancel, ALICE, other["thread_id"], None) == "branch_busy"


# ------------------------------------------------------------------ questions
def test_answer_question_with_options(host):
    run = start(host)
    park_on_question(host, run, options=["Red", "Blue"], multi=True)
    tid = run["thread_id"]
    assert code_of(host.answer_question, BOB, tid, "q_1", None, {"answer": "Red"}) == "forbidden"
    assert code_of(host.answer_question, ALICE, tid, "q_1", None, {"answer": "green"}) == "invalid_request"
    assert types(host, run["branch_id"])[-1] == "parked"  # the question stays open
    out = host.answer_question(ALICE, tid, "q_1", None, {"answer": [" blue", "RED"]})
    evs = host.writer.load(run["branch_id"]).fold.events
    assert evs[-2]["event_id"] == out["event_id"]
    assert evs[-2]["data"]["preview"] == "Blue\nRed" and evs[-2]["data"]["origin"] == "answered"
    assert evs[-2]["actor"] == {"kind": "user", "principal": ALICE.as_dict()}
    assert evs[-1]["type"] == "resumed"
    assert code_of(host.answer_question, ALICE, tid, "q_1", None, {"answer": "Red"}) == "no_open_question"


def test_answer_free_text_joined_and_question_row(host, aws):
    from threads_aws.store.questions import QuestionRow

    run = start(host)
    park_on_question(host, run)
    row = QuestionRow(
        tenant="acme",
        thread_id=run["thread_id"],
        branch_id=run["branch_id"],
        call_id="q_1",
        input={"question": "Which color?"},
        expires_at=host.clock() + 1000,
        asked_by=ALICE.as_dict(),
        created_at=host.clock(),
    )
    aws.ddb.put_item(TableName=aws.resources.state_table, Item=row.item())
    host.answer_question(ALICE, run["thread_id"], "q_1", run["branch_id"], {"answer": ["a", "b"]})
    ev = host.writer.load(run["branch_id"]).fold.events[-2]
    assert ev["data"]["preview"] == "a\nb"
    stored = aws.ddb.get_item(
        TableName=aws.resources.state_table, Key={"pk": {"S": f"Q#{run['branch_id']}"}, "sk": {"S": "q_1"}}
    )["Item"]
    assert stored["state"]["S"] == "answered"


def test_no_open_question(host):
    run = start(host)
    assert (
        code_of(host.answer_question, ALICE, run["thread_id"], "q_9", None, {"answer": "x"})
        == "no_open_question"
    )


# ------------------------------------------------------------------ parked effects
def test_resolve_parked(host):
    run = start(host)
    key = park_on_effect(host, run)
    tid = run["thread_id"]
    assert code_of(host.resolve_parked, BOB, tid, key, None, {"resolution": "assume_done"}) == "forbidden"
    out = host.resolve_parked(ALICE, tid, key, None, {"resolution": "assume_not_done"})
    evs = host.writer.load(run["branch_id"]).fold.events
    assert evs[-2]["event_id"] == out["event_id"]
    assert evs[-2]["data"] == {"call_id": "e_1", "outcome": "assume_not_done", "by": "human"}
    assert evs[-2]["actor"]["principal"] == ALICE.as_dict()
    assert evs[-1]["data"]["address"] == {"kind": "effect", "id": key}
    assert code_of(host.resolve_parked, ALICE, tid, key, None, {"resolution": "assume_done"}) == "not_parked"


# ------------------------------------------------------------------ cancel, settings, mode
def test_cancel_with_no_open_run_is_a_no_op_and_the_thread_stays_usable(host, aws):
    from helpers.engine import make_ctx
    from helpers.engine import run as advance

    run = host.start_run(ALICE, {"agent": "demo", "input": "hello"}, new_uuid7())
    assert advance(make_ctx(aws), run["branch_id"]).state == "idle"
    queued(aws)
    before = host.writer.load(run["branch_id"]).fold.events
    for _ in range(3):  # the run finished: nothing to cancel, nothing appended, no wake
        out = host.cancel(ALICE, run["thread_id"], None)
        assert out == {"event_id": before[-1]["event_id"]}
    assert host.writer.load(run["branch_id"]).fold.events == before and queued(aws) == []
    # the thread is not final: the next run is accepted and completes
    again = host.start_run(
        ALICE, {"agent": "demo", "input": "again", "thread_id": run["thread_id"]}, new_uuid7()
    )
    assert advance(make_ctx(aws), again["branch_id"]).state == "idle"
    assert host.writer.load(again["branch_id"]).fold.status() == "idle"
    # a run that IS cancelled: one barrier however many cancels, then the thread is cancelled
    third = host.start_run(
        ALICE, {"agent": "demo", "input": "third", "thread_id": run["thread_id"]}, new_uuid7()
    )
    first = host.cancel(ALICE, run["thread_id"], None, {"reason": "enough"})
    assert host.cancel(ALICE, run["thread_id"], None) == first  # the barrier already stands
    assert advance(make_ctx(aws), third["branch_id"]).state == "idle"
    f = host.writer.load(third["branch_id"]).fold
    assert [e["type"] for e in f.events].count("cancel_requested") == 1
    assert f.events[f.last_cancel_seq - 1]["data"] == {"scope": "thread", "reason": "enough"}
    assert f.status() == "cancelled"
    n = len(f.events)
    assert host.cancel(ALICE, run["thread_id"], None) == first  # after: still a no-op
    assert len(host.writer.load(third["branch_id"]).fold.events) == n


def test_cancel(host, aws):
    run = start(host)
    queued(aws)
    out = host.cancel(ALICE, run["thread_id"], None)
    ev = host.writer.load(run["branch_id"]).fold.events[-1]
    assert ev["event_id"] == out["event_id"] and ev["type"] == "cancel_requested"
    assert ev["data"] == {"scope": "thread"} and ev["actor"]["principal"] == ALICE.as_dict()
    assert queued(aws)


def test_settings(host):
    run = start(host, text="x")
    tid = run["thread_id"]
    assert (
        code_of(host.set_model, ALICE, tid, None, {"model": {"provider": "x", "name": "y"}})
        == "invalid_transition"  # rule 18: the model must be one of the agent's
    )
    out = host.set_model(ALICE, tid, None, {"model": {"provider": "scripted", "name": "scripted-1"}})
    ev = host.writer.load(run["branch_id"]).fold.events[-1]
    assert ev["event_id"] == out["event_id"]
    assert ev["data"]["reason"] == "user" and ev["data"]["settings"]["model"]["name"] == "scripted-1"
    # rule 18: no settings_changed while an attempt awaits its response
    append(
        host,
        run["branch_id"],
        (
            "model_request",
            {
                "attempt": 1,
                "request_ref": {"bytes": 10, "media_type": "application/x-ndjson", "sha256": "0" * 64},
                "declared_prefix": {"bytes": 5, "sha256": "0" * 64},
            },
        ),
    )
    assert (
        code_of(host.set_model, ALICE, tid, None, {"model": {"provider": "scripted", "name": "scripted-1"}})
        == "invalid_transition"
    )


def test_mode(host):
    run = start(host)
    tid = run["thread_id"]
    host.set_mode(ALICE, tid, None, {"mode": "plan"})
    ev = host.writer.load(run["branch_id"]).fold.events[-1]
    assert ev["data"] == {"from": "default", "to": "plan"}
    assert code_of(host.set_mode, ALICE, tid, None, {"mode": "bypass"}) == "invalid_transition"


# ------------------------------------------------------------------ reads
def test_timeline_branches_fork_points_fork(host):
    run = start(host)
    tid = run["thread_id"]
    tl = host.timeline(ALICE, tid, None)
    assert tl["branch_id"] == run["branch_id"]
    assert [e["event"]["type"] for e in tl["entries"]] == ["thread_started", "user_input"]
    assert not any(e["fork_point"] for e in tl["entries"])
    assert host.branches(ALICE, tid) == [{"branch_id": run["branch_id"], "mode": "live", "runnable": True}]
    assert host.fork_points(ALICE, tid, None) == []
    ev_id = tl["entries"][1]["event"]["event_id"]
    assert code_of(host.fork, ALICE, tid, None, {"event_id": ev_id}) == "no_snapshot_boundary"
    append(host, run["branch_id"], ("turn_completed", {"reason": "end_turn"}))
    (snap,) = append(
        host,
        run["branch_id"],
        (
            "snapshot",
            {
                "snapshot_id": "s1",
                "provider": "fake",
                "sandbox_id": "sb1",
                "capture_class": "filesystem",
                "expires_at": None,
                "manifest_hash": "0" * 64,
                "quiesced": {"frozen": [], "stopped": [], "excluded": []},
            },
        ),
    )
    points = host.fork_points(ALICE, tid, None)
    assert [p["event_id"] for p in points] == [snap.event_id]
    assert host.timeline(ALICE, tid, run["branch_id"])["entries"][-1]["fork_point"] is True
    # the S3 workspace provider finds no manifest stored under that hash
    assert code_of(host.fork, ALICE, tid, None, {"event_id": snap.event_id}) == "snapshot_missing"


ROUTE_CALLS = [
    lambda h, p, t, b: h.timeline(p, t, None),
    lambda h, p, t, b: h.branches(p, t),
    lambda h, p, t, b: h.fork_points(p, t, None),
    lambda h, p, t, b: h.fork(p, t, None, {"event_id": b}),
    lambda h, p, t, b: h.pending_approvals(p, t, None),
    lambda h, p, t, b: h.decide_approval(p, t, b, {"decision": "grant"}),
    lambda h, p, t, b: h.answer_question(p, t, "q_1", None, {"answer": "x"}),
    lambda h, p, t, b: h.resolve_parked(p, t, f"{b}:e_1", None, {"resolution": "assume_done"}),
    lambda h, p, t, b: h.cancel(p, t, None),
    lambda h, p, t, b: h.set_model(p, t, None, {"model": {"provider": "scripted", "name": "scripted-1"}}),
    lambda h, p, t, b: h.set_mode(p, t, None, {"mode": "plan"}),
    lambda h, p, t, b: h.run_start(p, t, b),
    lambda h, p, t, b: h.start_run(p, {"agent": "scripted", "input": "x", "thread_id": t}, "k-x"),
]


@pytest.mark.parametrize("call", ROUTE_CALLS)
def test_another_tenants_thread_is_not_found(host, call):
    run = start(host)
    before = types(host, run["branch_id"])
    assert code_of(call, host, MALLORY, run["thread_id"], run["branch_id"]) == "not_found"
    assert types(host, run["branch_id"]) == before


BRANCH_CALLS = [
    lambda h, p, t, b: h.timeline(p, t, b),
    lambda h, p, t, b: h.fork_points(p, t, b),
    lambda h, p, t, b: h.pending_approvals(p, t, b),
    lambda h, p, t, b: h.answer_question(p, t, "q_1", b, {"answer": "x"}),
    lambda h, p, t, b: h.resolve_parked(p, t, f"{b}:e_1", b, {"resolution": "assume_done"}),
    lambda h, p, t, b: h.cancel(p, t, b),
    lambda h, p, t, b: h.set_model(p, t, b, {"model": {"provider": "scripted", "name": "scripted-1"}}),
    lambda h, p, t, b: h.set_mode(p, t, b, {"mode": "plan"}),
]


@pytest.mark.parametrize("call", BRANCH_CALLS)
def test_a_branch_of_another_thread_is_not_found(host, call):
    run, other = start(host), start(host)
    assert code_of(call, host, ALICE, run["thread_id"], other["branch_id"]) == "not_found"


def test_principal_key_escapes():
    assert Principal("a/b", "t%", "s").key == "a%2Fb/t%25/s"


def test_receipt_keys_of_tenants_never_collide(host):
    # tenant "t" + key "x#runs#k" and tenant "t#runs#x" + key "k" once shared one receipt row:
    # the second tenant got idempotency_key_principal_mismatch (another tenant's key leaked).
    a = Principal("api", "t", "alice")
    b = Principal("api", "t#runs#x", "alice")
    run_a = start(host, a, key="x#runs#k")
    run_b = start(host, b, key="k")
    assert run_b["thread_id"] != run_a["thread_id"]
