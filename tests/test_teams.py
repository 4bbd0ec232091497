"""Teams on moto with the demo model (issue 17 §6): `team: demo-team: a; b; c` makes the lead
list three tasks (each blocked by the one before) and spawn one member per task; each member
claims its task, messages the lead and completes it. Team state is written only to the lead's
log (rule 23 holds there, checked by the fold); a refused claim or update is the call's error
result and writes nothing; messages reach their recipient as `injected{source: agent}` once;
a crash between the lead-log write and the member's result repeats nothing. Every log exports,
re-imports, reduces and re-renders, and matches its projections."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.engine import (
    Crash,
    events,
    make_ctx,
    new_thread,
    of_type,
    run,
    say,
    scripted,
    verify_export,
)
from threads_aws.core import projections
from threads_aws.core.errors import LogError
from threads_aws.core.importer import import_log
from threads_aws.engine.models import ScriptedModel
from threads_aws.engine.step import EngineContext
from threads_aws.writer import Draft, Writer

TEAM = "demo-team"


def children_of(ctx: EngineContext, lead: str) -> list[tuple[str, str]]:
    """(thread id, main branch) of each member the lead spawned, in spawn order."""
    out = []
    for spawned in of_type(ctx, lead, "agent_spawned"):
        tid = spawned["data"]["child_thread_id"]
        thread = ctx.stores.threads.get_thread("acme", tid)
        assert thread is not None
        out.append((tid, thread.main_branch_id))
    return out


def settle(ctx: EngineContext, lead: str) -> None:
    """Drive the lead and every member until the lead is idle (the queue's work, by hand)."""
    for _ in range(40):
        state = run(ctx, lead).state
        if state == "idle":
            return
        for _tid, branch in children_of(ctx, lead):
            run(ctx, branch)
    raise AssertionError("the team never settled")


def checked(ctx: EngineContext, branch: str) -> dict[str, Any]:
    """The exported log re-imports, re-renders and reduces to the live log's projections."""
    imp = verify_export(ctx, branch)
    again = import_log(ctx.store.export(branch))
    assert [e["event_id"] for e in again.fold.events] == [e["event_id"] for e in imp.fold.events]
    live = projections.all_projections(events(ctx, branch))
    assert projections.all_projections(imp.fold.events) == live
    return dict(live)


def test_a_lead_and_three_members_work_a_task_list(aws: Any) -> None:
    ctx = make_ctx(aws)
    lead = new_thread(ctx, TEAM)
    say(ctx, lead, "team: demo-team: write the spec; build it; ship it")
    settle(ctx, lead)
    lead_tid = ctx.writer.load(lead).thread_id
    members = children_of(ctx, lead)
    assert len(members) == 3

    created = [e["data"] for e in of_type(ctx, lead, "team_task_created")]
    assert created == [
        {"blocked_by": [], "subject": "write the spec", "task_id": "t1"},
        {"blocked_by": ["t1"], "subject": "build it", "task_id": "t2"},
        {"blocked_by": ["t2"], "subject": "ship it", "task_id": "t3"},
    ]
    # every claim and close is in the lead's log, by the member that did the work, in order
    team = [
        (e["type"], e["data"])
        for e in events(ctx, lead)
        if e["type"] in ("team_task_claimed", "team_task_updated", "team_message")
    ]
    expected: list[tuple[str, dict[str, Any]]] = []
    for i, (tid, _branch) in enumerate(members, 1):
        expected.append(("team_task_claimed", {"member": tid, "task_id": f"t{i}"}))
        expected.append(("team_message", {"from": tid, "to": lead_tid}))
        expected.append(("team_task_updated", {"status": "completed", "task_id": f"t{i}"}))
    assert [(t, {k: d[k] for k in e}) for (t, d), (_, e) in zip(team, expected, strict=True)] == expected
    # members write no team events of their own: the lead's log is the one writer
    for _tid, branch in members:
        assert not [e for e in events(ctx, branch) if e["type"].startswith("team_")]
        first_input = of_type(ctx, branch, "user_input")[0]
        assert first_input["data"]["source"] == "parent_agent"  # v1: no source team_task

    # the members' messages reached the lead once each, before its final answer
    mail = [e for e in events(ctx, lead) if e["type"] == "injected" and e["data"]["source"] == "agent"]
    ids = [m["message_id"] for _, m in team if "message_id" in m]
    assert [m["data"]["origin"]["id"] for m in mail] == ids
    assert all(m["data"]["trust"] == "untrusted_reference" for m in mail)
    final = of_type(ctx, lead, "model_response")[-1]["data"]["content"][0]["text"]
    assert final.endswith("(3 team messages read)")

    got = checked(ctx, lead)
    assert got["team_tasks"] == [
        {"owner": tid, "status": "completed", "task_id": f"t{i}"} for i, (tid, _) in enumerate(members, 1)
    ]
    assert [c["status"] for c in got["children"]] == ["completed"] * 3
    for _tid, branch in members:
        assert checked(ctx, branch)["team_tasks"] == []


def use(name: str, args: dict[str, Any], i: int = 0) -> dict[str, Any]:
    return {"call_id": f"c{i}", "input": args, "name": name, "type": "tool_use"}


def answer(*uses: dict[str, Any]) -> dict[str, Any]:
    return {"content": list(uses), "stop_reason": "tool_use"}


DONE = {"content": [{"text": "ok", "type": "text"}], "stop_reason": "end_turn"}


def results(ctx: EngineContext, branch: str) -> list[tuple[str, bool]]:
    return [(e["data"]["preview"], e["data"]["is_error"]) for e in of_type(ctx, branch, "tool_result")]


def test_refused_claims_and_updates_are_error_results_and_write_nothing(aws: Any) -> None:
    model = ScriptedModel(
        [
            answer(
                use("team_task_create", {"subject": "a", "task_id": "t1"}, 0),
                use("team_task_create", {"blocked_by": ["t1"], "subject": "b", "task_id": "t2"}, 1),
                use("team_task_create", {"blocked_by": ["nope"], "subject": "c", "task_id": "t3"}, 2),
                use("team_task_create", {"subject": "other", "task_id": "t1"}, 3),
                use("team_task_claim", {"task_id": "t2"}, 4),  # blocked by t1
                use("team_task_update", {"status": "completed", "task_id": "t1"}, 5),  # not claimed
                use("team_task_claim", {"task_id": "t1"}, 6),
                use("team_task_claim", {"task_id": "t1"}, 7),  # already mine: no second event
                use("team_message", {"text": "hi", "to": "someone"}, 8),
                use("team_task_update", {"status": "released", "task_id": "t1"}, 9),
                use("team_task_claim", {"task_id": "t1"}, 10),
                use("team_task_update", {"status": "completed", "task_id": "t1"}, 11),
                use("team_task_claim", {"task_id": "t2"}, 12),  # its blocker is completed now
                use("team_task_claim", {"task_id": "t9"}, 13),
                use("team_tasks", {}, 14),
            ),
            DONE,
        ]
    )
    ctx = make_ctx(aws, models=scripted(model))
    lead = new_thread(ctx, TEAM)
    say(ctx, lead, "go")
    assert run(ctx, lead).state == "idle"
    me = ctx.writer.load(lead).thread_id
    got = results(ctx, lead)
    errors = [i for i, (_, err) in enumerate(got) if err]
    assert errors == [2, 3, 4, 5, 8, 13]
    assert "blocked by t1" in got[4][0] and "Unknown blocker" in got[2][0] and "exists already" in got[3][0]
    assert got[14][0].splitlines() == [
        f"You are the lead; the lead is {me}.",
        f"- t1 [completed] a (owner {me})",
        f"- t2 [claimed] b (owner {me}) blocked by t1",
    ]
    assert [e["type"] for e in events(ctx, lead) if e["type"].startswith("team_")] == [
        "team_task_created",
        "team_task_created",
        "team_task_claimed",
        "team_task_updated",
        "team_task_claimed",
        "team_task_updated",
        "team_task_claimed",
    ]
    assert checked(ctx, lead)["team_tasks"] == [
        {"owner": me, "status": "completed", "task_id": "t1"},
        {"owner": me, "status": "claimed", "task_id": "t2"},
    ]


def test_rule_23_still_refuses_a_bad_line_written_past_the_tools(aws: Any) -> None:
    """The tools refuse first; the fold refuses what slips past them (a hand-written line)."""
    ctx = make_ctx(aws)
    lead = new_thread(ctx, TEAM)
    tool = {"kind": "tool"}
    ctx.writer.append(
        lead, [Draft("team_task_created", {"blocked_by": [], "subject": "a", "task_id": "t1"}, tool)]
    )
    ctx.writer.append(
        lead, [Draft("team_task_created", {"blocked_by": ["t1"], "subject": "b", "task_id": "t2"}, tool)]
    )
    for bad in (
        Draft("team_task_claimed", {"member": "m", "task_id": "t2"}, tool),
        Draft("team_task_updated", {"status": "completed", "task_id": "t1"}, tool),
    ):
        with pytest.raises(LogError) as exc:
            ctx.writer.append(lead, [bad])
        assert exc.value.code == "invalid_transition"
    msg = {"from": "a", "message_id": "m1", "text": "x", "to": "*"}
    ctx.writer.append(lead, [Draft("team_message", msg, tool)])
    with pytest.raises(LogError):
        ctx.writer.append(lead, [Draft("team_message", msg, tool)])


def test_user_input_source_team_task_is_not_v1(aws: Any) -> None:
    """`teams add team_task` (semantics §4): the v1 schema refuses it, so v1 never writes it."""
    ctx = make_ctx(aws)
    lead = new_thread(ctx, TEAM)
    user = {"kind": "user", "principal": {"issuer": "api", "subject": "alice", "tenant": "acme"}}
    with pytest.raises(LogError) as exc:
        ctx.writer.append(lead, [Draft("user_input", {"source": "team_task", "text": "t1"}, user)])
    assert exc.value.code == "invalid_line"


def test_the_leads_message_reaches_a_member_and_broadcasts_reach_everyone_once(aws: Any) -> None:
    member_model = ScriptedModel([DONE, DONE])
    lead_model = ScriptedModel(
        [
            answer(use("spawn_agent", {"agent": TEAM, "prompt": "wait for word"}, 0)),
            DONE,
        ]
    )
    models = {"lead": lead_model, "member": member_model}

    def pick(_m: Any, _a: Any) -> Any:
        return models["current"]

    ctx = make_ctx(aws, models=pick)
    lead = new_thread(ctx, TEAM)
    say(ctx, lead, "go")
    models["current"] = lead_model
    assert run(ctx, lead).state == "parked"  # waiting on its member
    ((tid, member),) = children_of(ctx, lead)
    lead_tid = ctx.writer.load(lead).thread_id
    # the lead's board gets two messages while the member hasn't asked its model yet
    tool = {"kind": "tool"}
    ctx.writer.append(
        lead,
        [Draft("team_message", {"from": lead_tid, "message_id": "m1", "text": "for you", "to": tid}, tool)],
    )
    ctx.writer.append(
        lead,
        [Draft("team_message", {"from": lead_tid, "message_id": "m2", "text": "for all", "to": "*"}, tool)],
    )
    held = ctx.artifacts.put(b"held as an artifact", "text/plain")  # TextOrRef: a ref instead of text
    ctx.writer.append(
        lead,
        [Draft("team_message", {"from": lead_tid, "message_id": "m3", "ref": held, "to": tid}, tool)],
    )
    models["current"] = member_model
    assert run(ctx, member).state == "idle"
    mail = [e["data"] for e in of_type(ctx, member, "injected")]
    assert [(m["origin"], m.get("text", m.get("ref")), m["source"]) for m in mail] == [
        ({"id": "m1", "location": lead_tid}, "for you", "agent"),
        ({"id": "m2", "location": lead_tid}, "for all", "agent"),
        ({"id": "m3", "location": lead_tid}, held, "agent"),
    ]
    assert b"for you" in member_model.requests[0] and b"for all" in member_model.requests[0]
    models["current"] = lead_model
    assert run(ctx, lead).state == "idle"
    # the lead sent them: none come back to it
    assert not [e for e in of_type(ctx, lead, "injected") if e["data"]["source"] == "agent"]
    checked(ctx, lead)
    checked(ctx, member)


class DiesAfterBoard(Writer):
    """Dies right after the first append to the lead's log (`own=False`: the member's claim), or
    right after the member's next own append (`own=True`: the claim's result)."""

    def __init__(self, base: Writer, lead: str, own: bool) -> None:
        super().__init__(base.store, clock=base.clock)
        self.lead, self.own, self.armed = lead, own, False

    def append(self, branch_id: str, drafts: Any, **kw: Any) -> Any:
        out = super().append(branch_id, drafts, **kw)
        if branch_id == self.lead:
            if not self.own:
                raise Crash
            self.armed = True
        elif self.armed:
            raise Crash
        return out


@pytest.mark.parametrize("own", [False, True])
def test_a_member_dying_around_its_lead_log_write_repeats_nothing(aws: Any, own: bool) -> None:
    """A member's claim is written to the lead's log, then its result to its own log: a death
    after either write is re-run by the next step without a second claim, message or close."""
    ctx = make_ctx(aws)
    lead = new_thread(ctx, TEAM)
    say(ctx, lead, "team: demo-team: only task")
    run(ctx, lead)
    ((tid, member),) = children_of(ctx, lead)
    doomed = make_ctx(aws)
    doomed.writer = DiesAfterBoard(doomed.writer, lead, own)
    with pytest.raises(Crash):
        run(doomed, member, holder="doomed")
    assert len(of_type(ctx, lead, "team_task_claimed")) == 1
    assert len(of_type(ctx, member, "tool_result")) == (1 if own else 0)
    settle(ctx, lead)
    claims = of_type(ctx, lead, "team_task_claimed")
    assert [c["data"] for c in claims] == [{"member": tid, "task_id": "t1"}]
    assert len(of_type(ctx, lead, "team_task_updated")) == 1
    assert len(of_type(ctx, lead, "team_message")) == 1
    assert results(ctx, member)[0] == ("Claimed team task t1: only task", False)
    checked(ctx, lead)
    checked(ctx, member)


class RivalFirst(Writer):
    """Lands a rival's claim of `task` on the lead's log right before this worker's first
    append there, as a concurrent member would: this worker's board is then one line stale."""

    def __init__(self, base: Writer, lead: str, task: str) -> None:
        super().__init__(base.store, clock=base.clock)
        self.base, self.lead, self.task, self.raced = base, lead, task, False

    def append(self, branch_id: str, drafts: Any, **kw: Any) -> Any:
        if branch_id == self.lead and not self.raced:
            self.raced = True
            claim = {"member": "rival", "task_id": self.task}
            self.base.append(branch_id, [Draft("team_task_claimed", claim, {"kind": "tool"})])
        return super().append(branch_id, drafts, **kw)


def test_a_claim_that_loses_the_race_reads_the_board_again_and_is_refused(aws: Any) -> None:
    ctx = make_ctx(aws)
    lead = new_thread(ctx, TEAM)
    say(ctx, lead, "team: demo-team: only task")
    run(ctx, lead)
    ((_tid, member),) = children_of(ctx, lead)
    racing = make_ctx(aws)
    racing.writer = RivalFirst(racing.writer, lead, "t1")
    assert run(racing, member).state == "idle"
    assert [c["data"]["member"] for c in of_type(ctx, lead, "team_task_claimed")] == ["rival"]
    assert results(ctx, member)[0] == (
        "Team task t1 is claimed by rival: only an open task can be claimed.",
        True,
    )
    assert not of_type(ctx, lead, "team_task_updated")  # the member never worked it
    checked(ctx, lead)
    checked(ctx, member)
