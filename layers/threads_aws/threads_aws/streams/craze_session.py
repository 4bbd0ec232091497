"""Craze sub-agents and compaction, a mixin of `CrazeMapper` (`craze`): `agent_spawned` /
`agent_finished` → `subagent{spawned|finished}` rows (the child's task prompt as its `user`
line, `agent` = the child id, right after `spawned`, as craze's native has it) and the spawn
call's row as a task (`task.agentId`, status, duration, receipt); `compacted` /
`compaction_failed` → `compaction{ended}` (reason from the trigger, or `err`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import craze_wire as w
from .event_data import obj
from .frames import JsonObj


class Session:
    # The mapper's state these methods share (set in CrazeMapper.__init__).
    inputs: dict[str, tuple[str, dict[str, Any]]]
    rows: dict[str, JsonObj]
    children: dict[str, JsonObj]
    _at: str | None
    compacting: bool

    def _out(self, type: str, **fields: Any) -> None:
        raise NotImplementedError  # CrazeMapper's

    def _publish(self, call_id: str, **changes: Any) -> None:
        raise NotImplementedError  # CrazeMapper's

    # ------------------------------------------------------------------ subagents, compaction
    def _ev_agent_spawned(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        child, call_id = str(d.get("child_thread_id")), str(d.get("call_id"))
        background = d.get("mode") == "background"
        row = {
            "id": child,
            "toolCallId": call_id,
            "subagentType": str(d.get("agent_name")),
            "status": "running",
        }
        row.update(w.clean({"startedAt": self._at, "background": background, "time": ev.get("time")}))
        self.children[child] = row
        self._out("subagent", subagent=w.subagent(row), subagentChange="spawned")
        prompt = self.inputs.get(call_id, ("", {}))[1].get("prompt")
        if isinstance(prompt, str) and prompt:
            self._out("user", text=prompt, agent=child)  # the child's task, as craze's native does
        task = w.clean({"agentId": child, "subagentType": row["subagentType"], "background": background})
        self._publish(call_id, task=task, kind="task")

    def _ev_agent_finished(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        child = str(d.get("child_thread_id"))
        row = self.children.pop(child, {"id": child})
        status = {"budget_exhausted": "failed"}.get(str(d.get("status")), str(d.get("status")))
        row["status"] = status
        if d.get("status") == "budget_exhausted":
            row["error"] = "budget exhausted"
        usage = obj(d.get("usage"))
        row["tokensUsed"] = sum(
            v for v in (usage.get("input_tokens"), usage.get("output_tokens")) if isinstance(v, int)
        )
        started, now = row.get("time"), ev.get("time")
        duration = now - started if isinstance(started, int) and isinstance(now, int) else 0
        row.update(w.clean({"endedAt": self._at, "durationMs": max(duration, 0)}))
        self._out("subagent", subagent=w.subagent(row), subagentChange="finished")
        call_id = row.get("toolCallId")
        if isinstance(call_id, str) and call_id in self.rows:
            task = dict(self.rows[call_id].get("task", {}))
            task.update(w.clean({"status": status, "durationMs": row.get("durationMs"), "receipt": True}))
            self._publish(call_id, task=task)

    def _ev_compacted(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        reason = {"threshold": "auto", "reactive": "overflow", "manual": "manual"}.get(
            str(d.get("trigger")), "auto"
        )
        self.compacting = False
        self._out("compaction", compaction={"phase": "ended", "reason": reason})

    def _ev_compaction_failed(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        self.compacting = False
        self._out("compaction", compaction={"phase": "ended", "err": f"{d.get('stage')}: {d.get('reason')}"})
