"""Teams (semantics §1 "agents and teams", rule 23): a task list and messages shared by a lead and
its members, through the team tools (`config.builtin_tools.TEAM_TOOLS`).

The team is a subagent tree: its root thread is the lead, and the lead's log is the one writer of
team state (`team_task_created`, `team_task_claimed`, `team_task_updated`, `team_message`; openapi
"in the team lead's log"). A member is a subagent under it (any depth); a member's id is its
thread id, the lead's is the root's thread id.

Ordering and fencing:
- The lead's own team call appends its team event and the call's `tool_result` in one
  transaction, like todo_write's `todos_updated`.
- A member's call appends its team event to the lead's log first (a control without a lease: the
  writer epoch, fenced by the lead's head; a lost race re-reads the board and decides again),
  then its own `tool_result`. A crash between the two re-runs the call, which finds its own event
  on the board and records the same result without writing again: a claim this member owns, a
  close to the same status, a release this member made, a task created with the same subject
  and blockers, a message whose id (derived from the call id) is on the board.
- Rule 23 is checked twice: here, so a refused claim or update is the call's error result (the
  model's to handle, never an invalid append), and by the fold (`validate_next`) when the line
  is built.
- A message reaches its recipient as `injected{source: agent, origin.id: message_id}` in the
  recipient's log right before its next model request (a step boundary, never between a
  tool_use and its result), once per id (the fold's `agent_injected`).

Not in v1 (semantics §1): mail, wakes, team_member threads and `user_input{source: team_task}`
(a value the v1 schema refuses). A member's task reaches it as its spawn prompt, a
`user_input{source: parent_agent}`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..config.builtin_tools import TEAM_TOOLS as TEAM_TOOL_SPECS
from ..core.errors import LogError
from ..core.fold import Call, Fold
from ..writer import Draft, View
from .loop import HOST, STICKY_RETRIES, TOOL, StepBase, Stop, result

TEAM_TOOLS = frozenset(TEAM_TOOL_SPECS)
LEAD = "lead"  # how a model addresses the lead in team_message.to
MESSAGE_MAX = 16_000  # characters of one message's text (a line of the lead's log)
MAX_DEPTH = 32  # subagent levels followed up to the lead


@dataclass(frozen=True)
class Outcome:
    """A team call's result text, and the team event it writes (None: nothing to write, a
    refusal or a re-run that finds its event on the board)."""

    text: str
    draft: Draft | None = None
    is_error: bool = False


def refused(text: str) -> Outcome:
    return Outcome(text, None, True)


def decide(board: Fold, lead_id: str, me: str, call: Call) -> Outcome:
    """What `call` (by member `me`) does to the team whose lead's fold is `board`."""
    args = call.input
    if call.name == "team_tasks":
        return Outcome(board_text(board, lead_id, me))
    if call.name == "team_message":
        return _message(board, lead_id, me, call)
    tid = str(args.get("task_id", ""))
    task = board.tasks.get(tid)
    if call.name == "team_task_create":
        return _create(board, tid, task, args)
    if task is None:
        return refused(f"There is no team task {tid!r}.")
    if call.name == "team_task_claim":
        return _claim(board, tid, task, me)
    return _update(tid, task, str(args.get("status")), me, lead_id)


def _create(board: Fold, tid: str, task: dict[str, Any] | None, args: dict[str, Any]) -> Outcome:
    subject = str(args.get("subject", "")).strip()
    blockers = list(dict.fromkeys(str(b) for b in args.get("blocked_by") or []))
    done = f"Created team task {tid}: {subject}" + (
        f" (blocked by {', '.join(blockers)})" if blockers else ""
    )
    if task is not None:
        if task["subject"] == subject and task["blocked_by"] == blockers:
            return Outcome(done)
        return refused(f"A team task {tid!r} exists already.")
    if not tid.strip() or not subject:
        return refused("A team task needs a non-empty task_id and subject.")
    unknown = [b for b in blockers if b not in board.tasks]
    if unknown:
        return refused(f"Unknown blocker task(s): {', '.join(unknown)}.")
    data: dict[str, Any] = {"blocked_by": blockers, "subject": subject, "task_id": tid}
    if args.get("description"):
        data["description"] = str(args["description"])
    return Outcome(done, Draft("team_task_created", data, TOOL))


def _claim(board: Fold, tid: str, task: dict[str, Any], me: str) -> Outcome:
    done = f"Claimed team task {tid}: {task['subject']}"
    if task["status"] == "claimed" and task["owner"] == me:
        return Outcome(done)
    if task["status"] != "open":
        by = f" by {task['owner']}" if task["owner"] else ""
        return refused(f"Team task {tid} is {task['status']}{by}: only an open task can be claimed.")
    waiting = [b for b in task["blocked_by"] if board.tasks.get(b, {}).get("status") != "completed"]
    if waiting:
        return refused(f"Team task {tid} is blocked by {', '.join(waiting)} (not completed yet).")
    return Outcome(done, Draft("team_task_claimed", {"member": me, "task_id": tid}, TOOL))


def _update(tid: str, task: dict[str, Any], status: str, me: str, lead_id: str) -> Outcome:
    done = f"Team task {tid} {status}."
    if (task["status"] == status and task["owner"] == me) or (
        status == "released" and task["status"] == "open" and task.get("released_by") in (me, lead_id)
    ):
        return Outcome(done)
    if task["status"] != "claimed":
        return refused(f"Team task {tid} is {task['status']}: only a claimed task can be updated.")
    if me not in (task["owner"], lead_id):
        return refused(
            f"Team task {tid} is claimed by {task['owner']}: only its owner or the lead updates it."
        )
    return Outcome(done, Draft("team_task_updated", {"status": status, "task_id": tid}, TOOL))


def _message(board: Fold, lead_id: str, me: str, call: Call) -> Outcome:
    mid = f"msg_{call.call_id}"
    if mid in board.message_ids:
        return Outcome(f"Sent message {mid}.")
    to = str(call.input.get("to", "")).strip()
    to = lead_id if to == LEAD else to
    text = str(call.input.get("text", ""))
    members = {lead_id, *board.children}
    if to != "*" and to not in members:
        return refused(f"No team member {to!r}: address a member id, {LEAD!r} or '*'.")
    if to == me:
        return refused("A message to yourself is not sent.")
    if not text.strip() or len(text) > MESSAGE_MAX:
        return refused(f"A team message has 1 to {MESSAGE_MAX} characters of text.")
    data = {"from": me, "message_id": mid, "text": text, "to": to}
    return Outcome(f"Sent message {mid}.", Draft("team_message", data, TOOL))


def board_text(board: Fold, lead_id: str, me: str) -> str:
    """The task list as a team_tasks call reads it."""
    rows = [f"You are {'the lead' if me == lead_id else 'member ' + me}; the lead is {lead_id}."]
    for tid, task in board.tasks.items():
        row = f"- {tid} [{task['status']}] {task['subject']}"
        if task["owner"]:
            row += f" (owner {task['owner']})"
        if task["blocked_by"]:
            row += f" blocked by {', '.join(task['blocked_by'])}"
        rows.append(row)
    if not board.tasks:
        rows.append("(no tasks)")
    return "\n".join(rows)


class Team(StepBase):
    def team_lead(self, view: View) -> View:
        """The lead's view: the root of the subagent tree `view` is in (itself at the root)."""
        cur = view
        for _ in range(MAX_DEPTH):
            parent = (cur.fold.started or {}).get("parent")
            if not isinstance(parent, dict) or parent.get("relation") != "subagent":
                break
            cur = self.ctx.writer.load(str(parent["branch_id"]))
        return cur

    def team_call(self, view: View, call: Call) -> str | None:
        """An allowed team tool call: its team event in the lead's log, then its result."""
        for _ in range(STICKY_RETRIES):
            lead = self.team_lead(view)
            out = decide(lead.fold, lead.thread_id, view.thread_id, call)
            res = result(call.call_id, out.text, "executed", out.is_error)
            if lead.branch_id == view.branch_id:  # the lead's own call: one transaction
                self.append(view, [*([out.draft] if out.draft else []), res])
                return None
            if out.draft is not None:
                try:
                    self.ctx.writer.append(lead.branch_id, [out.draft], view=lead)
                except LogError as exc:
                    if exc.code == "seq_conflict":  # the board moved: read it again
                        continue
                    raise
            self.append(view, [res])
            return None
        raise Stop("more")

    def deliver_team_mail(self, view: View) -> bool:
        """Before a model request of a thread with team tools: the messages addressed to it
        that it hasn't seen, as `injected{source: agent}` (one append)."""
        f = view.fold
        if TEAM_TOOLS.isdisjoint(f.tools):
            return False
        lead = self.team_lead(view)
        me = view.thread_id
        due = [
            m
            for m in lead.fold.team_messages
            if m["from"] != me and m["to"] in (me, "*") and m["message_id"] not in f.agent_injected
        ]
        if not due:
            return False
        drafts = [
            Draft(
                "injected",
                {
                    "origin": {"id": m["message_id"], "location": m["from"]},
                    "source": "agent",
                    "trust": "untrusted_reference",
                    # TextOrRef on both: a message held as an artifact is delivered by its ref
                    **({"ref": m["ref"]} if "ref" in m else {"text": m["text"]}),
                },
                HOST,
            )
            for m in due
        ]
        self.append(view, drafts)
        return True
