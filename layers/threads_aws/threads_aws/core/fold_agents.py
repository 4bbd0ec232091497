"""The fold's rules for other agents: subagents (rule 22), handoff (rule 26), todos (rule 24) and
team tasks and messages (rule 23)."""

from __future__ import annotations

from typing import Any

from .fold_state import FoldState


class AgentRules(FoldState):
    """Subagents, handoff, todos and teams."""

    __slots__ = ()

    def _on_agent_spawned(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self.children.setdefault(d["child_thread_id"], None)
        self.spawned[d["call_id"]] = ev

    def _on_agent_finished(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        child = d["child_thread_id"]
        if child not in self.children or self.children[child] is not None:
            raise self._bad(seq, "agent_finished without exactly one agent_spawned child")  # rule 22
        self.children[child] = d["status"]

    def _on_handoff(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self.handed_off = True
        self.handoff = ev

    def _on_todos_updated(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        ids = [t["id"] for t in d["todos"]]
        if len(set(ids)) != len(ids):
            raise self._bad(seq, "todo ids repeat")  # rule 24

    def _on_team_task_created(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self.tasks[d["task_id"]] = {
            "status": "open",
            "owner": None,
            "blocked_by": d["blocked_by"],
            "subject": d["subject"],
        }

    def _on_team_task_claimed(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        task = self.tasks.get(d["task_id"])
        if task is None or task["status"] != "open":
            raise self._bad(seq, "team_task_claimed needs an open, unclaimed task")  # rule 23
        if any(self.tasks.get(b, {}).get("status") != "completed" for b in task["blocked_by"]):
            raise self._bad(seq, "team_task_claimed while a blocker is not completed")  # rule 23
        task["status"], task["owner"] = "claimed", d["member"]

    def _on_team_task_updated(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        task = self.tasks.get(d["task_id"])
        if task is None or task["status"] != "claimed":
            raise self._bad(seq, "team_task_updated needs a claimed task")  # rule 23
        if d["status"] == "released":  # released_by: a re-run release by the same member is a no-op
            task["status"], task["owner"], task["released_by"] = "open", None, task["owner"]
        else:
            task["status"] = d["status"]

    def _on_team_message(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        if d["message_id"] in self.message_ids:
            raise self._bad(seq, "team_message.message_id repeats")  # rule 23
        self.message_ids.add(d["message_id"])
        self.team_messages.append(d)
