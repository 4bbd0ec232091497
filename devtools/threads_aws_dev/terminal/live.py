"""Following a run live: `RunView` turns stream messages into rows (streamed text, tool rows with
a spinner while a tool or the model works, todos); `Follower` drives the stream, asks a person
what the run waits on (approval, question, unknown effect) and follows on after each answer.

The stream is `threads_aws_client.RunStream`: it resumes by itself, and after every answer the
follower subscribes again after the last event it showed, so nothing is shown twice. Ctrl-C
offers to cancel the run; declining leaves it running (exit 130).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text
from threads_aws_client import Client, RunStream

from . import EXIT_INTERRUPTED, exit_code, prompts
from .line_input import read_line
from .render import call_text, outcome_text, print_json, response_text, short, todos_text

ACTIVE = {"calling", "running", "allowed", "approved"}
CANCEL_WAIT_S = 60  # how long a parked run may take to become cancelled before we show it parked


@dataclass
class ToolRow:
    name: str
    args: dict[str, Any]
    status: str = "calling"

    def line(self) -> Text:
        style = {"waiting for approval": "yellow", "waiting for your answer": "yellow", "denied": "red"}
        return Text.assemble(
            ("⚙ ", "cyan"),
            (call_text(self.name, self.args), "cyan"),
            ("  " + self.status, style.get(self.status, "dim")),
        )


@dataclass
class RunView:
    """What the person sees of one run: `apply` a message, print what it returns (finished
    rows), and show the view itself (`__rich__`) as the live part below them."""

    branch_id: str | None = None
    buffer: str = ""  # streamed model text not yet committed
    phase: str | None = None  # the spinner line: who works now
    rows: dict[str, ToolRow] = field(default_factory=dict)
    calls: dict[str, dict[str, Any]] = field(default_factory=dict)  # call_id -> tool_call data

    def apply(self, msg: dict[str, Any]) -> list[RenderableType]:
        kind = msg.get("kind")
        if kind == "delta":
            self.buffer += str(msg.get("text", ""))
            return []
        if kind == "status":
            self.phase = f"waiting to retry the model call ({short(msg.get('status'))})"
            return []
        if kind != "event":
            return []
        ev = msg["event"]
        self.branch_id = ev.get("branch_id", self.branch_id)
        handler = getattr(self, "_on_" + str(ev.get("type")), None)
        return list(handler(ev["data"])) if handler is not None else []

    def __rich__(self) -> RenderableType:
        parts: list[RenderableType] = []
        if self.buffer:
            parts.append(Text(self.buffer))
        for row in self.rows.values():
            if row.status in ACTIVE:
                parts.append(Spinner("dots", text=row.line(), style="cyan"))
            else:
                parts.append(row.line())
        if self.phase:
            parts.append(Spinner("dots", text=Text(self.phase, style="dim")))
        return Group(*parts)

    # -------------------------------------------------------------- per event type
    def _on_user_input(self, d: dict[str, Any]) -> list[RenderableType]:
        self.phase = None
        text = d.get("text") if isinstance(d.get("text"), str) else short(d.get("content"))
        return [Text.assemble(("› ", "bold"), (str(text), "bold"))]

    def _on_model_request(self, d: dict[str, Any]) -> list[RenderableType]:
        attempt = d.get("attempt", 1)
        self.phase = "model is working" + (f" (attempt {attempt})" if attempt != 1 else "")
        return []

    def _on_model_attempt_abandoned(self, d: dict[str, Any]) -> list[RenderableType]:
        self.phase = None
        return [Text(f"  model attempt abandoned: {d.get('reason')}", style="red")]

    def _on_model_response(self, d: dict[str, Any]) -> list[RenderableType]:
        self.phase = None
        self.buffer = ""
        text = response_text(d)
        return [Text(text)] if text else []

    def _on_tool_call(self, d: dict[str, Any]) -> list[RenderableType]:
        self.calls[d["call_id"]] = d
        self.rows[d["call_id"]] = ToolRow(str(d.get("name")), dict(d.get("input") or {}))
        return []

    def _status(self, call_id: Any, status: str) -> list[RenderableType]:
        row = self.rows.get(str(call_id))
        if row is not None:
            row.status = status
        return []

    def _on_permission_decision(self, d: dict[str, Any]) -> list[RenderableType]:
        decision = d.get("decision")
        return self._status(
            d.get("call_id"), {"ask": "needs approval", "deny": "denied"}.get(str(decision), "allowed")
        )

    def _on_approval_requested(self, d: dict[str, Any]) -> list[RenderableType]:
        return self._status(d.get("call_id"), "waiting for approval")

    def _on_approval_granted(self, d: dict[str, Any]) -> list[RenderableType]:
        return self._status(d.get("call_id"), "approved")

    def _on_approval_denied(self, d: dict[str, Any]) -> list[RenderableType]:
        return self._status(d.get("call_id"), "denied")

    def _on_effect_begin(self, d: dict[str, Any]) -> list[RenderableType]:
        return self._status(d.get("call_id"), "running")

    def _on_effect_unknown(self, d: dict[str, Any]) -> list[RenderableType]:
        return self._status(d.get("call_id"), f"outcome unknown ({d.get('reason')})")

    def _on_parked(self, d: dict[str, Any]) -> list[RenderableType]:
        addr = d.get("address") or {}
        if addr.get("kind") == "input":
            self._status(addr.get("id"), "waiting for your answer")
        self.phase = None
        return []

    def _on_permission_rule_added(self, d: dict[str, Any]) -> list[RenderableType]:
        return [Text(f"  rule kept for this thread: {d.get('decision')} {d.get('rule')}", style="green")]

    def _on_tool_result(self, d: dict[str, Any]) -> list[RenderableType]:
        row = self.rows.pop(str(d.get("call_id")), None)
        name = call_text(row.name, row.args) if row else str(d.get("call_id"))
        mark, style = ("✗", "red") if d.get("is_error") else ("✓", "green")
        return [
            Text.assemble((f"{mark} ", style), (name, "cyan"), ("  " + short(d.get("preview", "")), "dim"))
        ]

    def _on_todos_updated(self, d: dict[str, Any]) -> list[RenderableType]:
        return [Text("todos:", style="bold"), todos_text(d.get("todos") or [])]

    def _on_cancel_requested(self, d: dict[str, Any]) -> list[RenderableType]:
        self.phase = "cancelling"
        return [Text("  cancel requested", style="yellow")]

    def _on_turn_completed(self, d: dict[str, Any]) -> list[RenderableType]:
        self.phase = None
        reason = d.get("reason")
        return [] if reason == "end_turn" else [Text(f"  turn ended: {reason}", style="yellow")]


class Follower:
    """Follows one run to its outcome, settling what it waits on when a person is there."""

    def __init__(self, client: Client, console: Console, *, interactive: bool, json_mode: bool) -> None:
        self.client = client
        self.console = console
        self.interactive = interactive
        self.json_mode = json_mode
        self.cursor = 0
        self.cancel_deadline: float | None = None  # set once this follower asked for a cancel

    def follow(self, thread_id: str, run_id: str, after_seq: int = 0) -> int:
        view = RunView()
        self.cursor = after_seq
        while True:
            try:
                outcome = self._stream(view, thread_id, run_id)
                if outcome["status"] == "parked" and self._cancel_pending():
                    # A parked run stays parked until the worker takes the cancel: wait for it
                    # rather than ask again about what is being cancelled.
                    time.sleep(0.25)
                    continue
                if outcome["status"] == "parked" and self._child_goes_on(outcome):
                    # Parked on a child that is no longer parked (its approval was granted, by
                    # this prompt or another command): the parent resumes once the child ends,
                    # so the park the stream answered is stale. Follow on, don't report it.
                    time.sleep(0.25)
                    continue
                if outcome["status"] == "parked" and self.interactive:
                    if prompts.settle(self.client, self.console, view, outcome):
                        continue
            except KeyboardInterrupt:
                if self._offer_cancel(thread_id, view.branch_id):
                    continue
                self.console.print(
                    f"\nleft running: threads-aws follow {thread_id} {run_id}", style="dim", highlight=False
                )
                return EXIT_INTERRUPTED
            if self.json_mode:
                print_json(self.console, {"kind": "result", "run_id": run_id, "result": outcome})
            else:
                self._print_outcome(outcome)
            return exit_code(outcome)

    def _stream(self, view: RunView, thread_id: str, run_id: str) -> dict[str, Any]:
        stream: RunStream = self.client.stream(thread_id, run_id, after_seq=self.cursor)
        try:
            if self.json_mode:
                for msg in stream:
                    self.cursor = stream.cursor
                    print_json(self.console, msg)
            else:
                with Live(view, console=self.console, refresh_per_second=10, transient=False) as live:
                    for msg in stream:
                        self.cursor = stream.cursor
                        for line in view.apply(dict(msg)):
                            live.console.print(line)
                        live.refresh()
        finally:
            stream.close()
        self.cursor = stream.cursor
        assert stream.result is not None
        return dict(stream.result)

    def _child_goes_on(self, outcome: dict[str, Any]) -> bool:
        children = [p["id"] for p in outcome.get("pending") or [] if p.get("kind") == "child"]
        return any(prompts.working(self.client, child) for child in children)

    def _cancel_pending(self) -> bool:
        return self.cancel_deadline is not None and time.monotonic() < self.cancel_deadline

    def _offer_cancel(self, thread_id: str, branch_id: str | None) -> bool:
        if not self.interactive:
            return False
        try:
            answer = read_line(self.console, "\n[bold]Cancel the run?[/] [y/N] ").strip().lower()
        except (KeyboardInterrupt, EOFError):
            return False
        if answer not in ("y", "yes"):
            return False
        appended = prompts.with_busy_retry(lambda: self.client.cancel(thread_id, branch_id))
        self.cancel_deadline = time.monotonic() + CANCEL_WAIT_S
        self.console.print(
            f"cancel requested (event {appended['event_id']})", style="yellow", highlight=False
        )
        return True

    def _print_outcome(self, outcome: dict[str, Any]) -> None:
        self.console.print(outcome_text(outcome), highlight=False)
        if outcome["status"] == "parked":
            hint = {
                "awaiting_approval": f"threads-aws approve {outcome['thread_id']}   (or deny)",
                "awaiting_input": f"threads-aws answer {outcome['thread_id']} ANSWER",
                "effect_unknown": f"threads-aws resolve {outcome['thread_id']} done|not-done",
            }.get(str(outcome.get("reason")))
            child = next((p["id"] for p in outcome.get("pending") or [] if p.get("kind") == "child"), None)
            if child is not None:  # a subagent waits: its approvals are the child thread's
                hint = f"threads-aws approve {child}   (the child thread's; or deny)"
            if hint:
                self.console.print(f"  next: {hint}", style="dim", highlight=False)
