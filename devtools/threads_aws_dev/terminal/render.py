"""Events and outcomes as lines a person reads (rich Text): the timeline of `show` and the rows
of the live run view. Pure formatting; nothing here talks to the host."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

MAX_VALUE = 160  # characters of an input/preview shown on one row

TODO_MARK = {"pending": "☐", "in_progress": "◐", "completed": "☑"}
WHO = {
    "user": "you",
    "model": "model",
    "host": "host",
    "tool": "tool",
    "channel": "channel",
    "scheduler": "scheduler",
    "approver": "approver",
    "recovery": "recovery",
}


def short(value: Any, limit: int = MAX_VALUE) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def call_text(name: str, args: Mapping[str, Any] | None, limit: int = 72) -> str:
    """`note(text="buy milk")`: a tool call as a person reads it."""
    if not args:
        return f"{name}()"
    parts = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items())
    return f"{name}({short(parts, limit)})"


def clock(ms: int | None) -> str:
    if not isinstance(ms, int):
        return ""
    return time.strftime("%H:%M:%S", time.localtime(ms / 1000))


def response_text(data: Mapping[str, Any]) -> str:
    """The text parts of a model_response's content, joined."""
    parts = data.get("content") or []
    return "".join(p.get("text", "") for p in parts if isinstance(p, dict) and p.get("type") == "text")


def input_text(data: Mapping[str, Any]) -> str:
    if isinstance(data.get("text"), str):
        return str(data["text"])
    parts = data.get("content") or data.get("input") or []
    if isinstance(parts, list):
        return " ".join(p.get("text", f"[{p.get('type', '?')}]") for p in parts if isinstance(p, dict))
    return short(data)


def todos_text(todos: Iterable[Mapping[str, Any]]) -> Text:
    out = Text()
    for i, t in enumerate(todos):
        if i:
            out.append("\n")
        status = str(t.get("status", "pending"))
        style = {"completed": "green", "in_progress": "yellow"}.get(status, "")
        out.append(f"  {TODO_MARK.get(status, '·')} {t.get('content', '')}", style=style)
    return out


def summary(ev: Mapping[str, Any]) -> Text:
    """One event in a line (the `what` column of `show`)."""
    t = ev.get("type", "?")
    d: Mapping[str, Any] = ev.get("data") or {}
    fn = _SUMMARIES.get(t)
    if fn is not None:
        return fn(d)
    return Text(t, style="dim")


def _s_user_input(d: Mapping[str, Any]) -> Text:
    return Text(input_text(d), style="bold")


def _s_model_response(d: Mapping[str, Any]) -> Text:
    text = response_text(d)
    calls = [p for p in d.get("content") or [] if isinstance(p, dict) and p.get("type") == "tool_use"]
    out = Text(short(text) if text else "")
    for c in calls:
        if out:
            out.append("  ")
        out.append(f"→ {call_text(str(c.get('name')), c.get('input'))}", style="cyan")
    if not out:
        out.append(f"(no text; stop {d.get('stop_reason')})", style="dim")
    return out


def _s_tool_result(d: Mapping[str, Any]) -> Text:
    mark, style = ("✗", "red") if d.get("is_error") else ("✓", "green")
    origin = d.get("origin")
    tail = f" ({origin})" if origin not in (None, "executed") else ""
    return Text(f"{mark} {short(d.get('preview', ''))}{tail}", style=style)


def _s_permission(d: Mapping[str, Any]) -> Text:
    decision = d.get("decision")
    style = {"allow": "green", "deny": "red", "ask": "yellow"}.get(str(decision), "")
    rule = f" by {d.get('source')}" + (f" rule {d['rule_id']}" if d.get("rule_id") else "")
    return Text(f"permission {decision}{rule}", style=style)


def _s_parked(d: Mapping[str, Any]) -> Text:
    addr = d.get("address") or {}
    return Text(f"parked: {d.get('reason')} ({addr.get('kind')} {addr.get('id')})", style="yellow")


def _s_turn_completed(d: Mapping[str, Any]) -> Text:
    reason = d.get("reason")
    return Text(f"turn completed: {reason}", style="green" if reason == "end_turn" else "yellow")


def _s_abandoned(d: Mapping[str, Any]) -> Text:
    status = f" HTTP {d['http_status']}" if d.get("http_status") else ""
    return Text(f"model attempt abandoned: {d.get('reason')}{status}", style="red")


_SUMMARIES: dict[str, Any] = {
    "user_input": _s_user_input,
    "steer": lambda d: Text(f"steer: {input_text(d)}", style="bold"),
    "thread_started": lambda d: Text(
        f"thread started: agent {d.get('agent_name')}, model "
        f"{(d.get('model') or {}).get('provider')}/{(d.get('model') or {}).get('name')}",
        style="dim",
    ),
    "model_request": lambda d: Text(f"model request (attempt {d.get('attempt', 1)})", style="dim"),
    "model_response": _s_model_response,
    "model_attempt_abandoned": _s_abandoned,
    "tool_call": lambda d: Text(f"call {call_text(str(d.get('name')), d.get('input'))}", style="cyan"),
    "permission_decision": _s_permission,
    "approval_requested": lambda d: Text(
        f"approval requested (challenge {d.get('challenge_id')})", style="yellow"
    ),
    "approval_granted": lambda d: Text("approval granted", style="green"),
    "approval_denied": lambda d: Text("approval denied", style="red"),
    "permission_rule_added": lambda d: Text(f"rule kept: {d.get('decision')} {d.get('rule')}", style="green"),
    "effect_begin": lambda d: Text(f"effect begins (attempt {d.get('attempt', 1)})", style="dim"),
    "effect_commit": lambda d: Text("effect committed", style="dim"),
    "effect_unknown": lambda d: Text(f"effect outcome unknown: {d.get('reason')}", style="red"),
    "effect_resolved": lambda d: Text(f"effect resolved: {d.get('resolution') or short(d)}", style="yellow"),
    "tool_result": _s_tool_result,
    "todos_updated": lambda d: Text(f"todos: {len(d.get('todos') or [])} item(s)", style="cyan"),
    "team_task_created": lambda d: Text(
        f"team task {d.get('task_id')}: {d.get('subject')}"
        + (f" (blocked by {', '.join(d.get('blocked_by') or [])})" if d.get("blocked_by") else ""),
        style="cyan",
    ),
    "team_task_claimed": lambda d: Text(
        f"team task {d.get('task_id')} claimed by {d.get('member')}", style="cyan"
    ),
    "team_task_updated": lambda d: Text(f"team task {d.get('task_id')} {d.get('status')}", style="cyan"),
    "team_message": lambda d: Text(f"team message {d.get('from')} → {d.get('to')}", style="cyan"),
    "parked": _s_parked,
    "resumed": lambda d: Text(f"resumed ({(d.get('address') or {}).get('kind')})", style="dim"),
    "turn_completed": _s_turn_completed,
    "cancel_requested": lambda d: Text(f"cancel requested ({d.get('scope')})", style="yellow"),
    "cancelled": lambda d: Text("cancelled", style="yellow"),
    "mode_changed": lambda d: Text(f"mode {d.get('from')} → {d.get('to')}", style="magenta"),
    "settings_changed": lambda d: Text(
        f"model → {((d.get('settings') or {}).get('model') or {}).get('name')} ({d.get('reason')})",
        style="magenta",
    ),
    "snapshot": lambda d: Text("snapshot (a fork point)", style="magenta"),
    "fork": lambda d: Text(f"forked from seq {d.get('at_seq')}", style="magenta"),
    "budget_exceeded": lambda d: Text(f"budget exceeded: {d.get('limit')}", style="red"),
    "park_escalated": lambda d: Text(
        f"park escalated: its TTL passed ({(d.get('address') or {}).get('kind')})", style="red"
    ),
    "log_repaired": lambda d: Text(
        f"log repaired: a torn tail of {d.get('truncated_bytes')} bytes dropped at {d.get('at_offset')}",
        style="yellow",
    ),
}


def timeline_table(entries: Iterable[Mapping[str, Any]]) -> Table:
    table = Table(box=None, show_header=True, header_style="bold", pad_edge=False, expand=False)
    table.add_column("seq", justify="right", style="dim", no_wrap=True)
    table.add_column("time", style="dim", no_wrap=True)
    table.add_column("who", no_wrap=True)
    table.add_column("what", overflow="fold")
    last_clock = ""
    for entry in entries:
        ev = entry["event"]
        at = clock(ev.get("time"))
        who = WHO.get((ev.get("actor") or {}).get("kind", ""), "?")
        what = summary(ev)
        if entry.get("fork_point"):
            what.append("  ⑂ fork point", style="magenta")
        table.add_row(str(ev.get("seq")), at if at != last_clock else "", who, what)
        last_clock = at
    return table


STATUS_STYLE = {"in_turn": "cyan", "parked": "yellow", "cancelled": "red", "unreadable": "red"}


def when(ms: int | None) -> str:
    """A list's time: the clock today, else the date."""
    if not isinstance(ms, int):
        return ""
    t = time.localtime(ms / 1000)
    today = time.localtime()
    fmt = "%H:%M:%S" if t[:3] == today[:3] else "%Y-%m-%d %H:%M"
    return time.strftime(fmt, t)


def threads_table(rows: Iterable[Mapping[str, Any]]) -> Table:
    """`threads-aws threads`: newest first, one line each (the title takes what is left)."""
    table = Table(box=None, show_header=True, header_style="bold", pad_edge=False, expand=True)
    # The id whole (it is what the other commands take); the title gives way first.
    table.add_column("thread", no_wrap=True, min_width=36)
    table.add_column("agent", no_wrap=True, min_width=5)
    table.add_column("status", no_wrap=True, min_width=9)
    table.add_column("last activity", style="dim", no_wrap=True, min_width=8)
    table.add_column("title", overflow="ellipsis", no_wrap=True, min_width=8, ratio=1)
    for t in rows:
        status = str(t.get("status", ""))
        table.add_row(
            str(t.get("thread_id", "")),
            str(t.get("agent", "")),
            Text(status.replace("_", " "), style=STATUS_STYLE.get(status, "green")),
            when(t.get("last_activity_at")),
            Text(str(t.get("title", "")), style="" if t.get("title") else "dim"),
        )
    return table


def outcome_text(outcome: Mapping[str, Any]) -> Text:
    status = outcome.get("status")
    if status == "completed":
        return Text("✓ completed", style="bold green")
    if status == "parked":
        waits = ", ".join(f"{p.get('kind')} {p.get('id')}" for p in outcome.get("pending") or [])
        return Text(f"⏸ parked: {outcome.get('reason')} ({waits})", style="bold yellow")
    if status == "failed":
        err = outcome.get("error") or {}
        return Text(f"✗ failed: {err.get('code')}: {err.get('message')}", style="bold red")
    if status == "cancelled":
        return Text("■ cancelled", style="bold yellow")
    if status == "budget_exhausted":
        budget = outcome.get("budget") or {}
        return Text(f"✗ budget exhausted: {budget.get('limit')} ({budget.get('observed')})", style="bold red")
    if status == "handed_off":
        return Text(f"→ handed off to thread {outcome.get('to_thread_id')}", style="bold")
    return Text(f"? {status}")


def print_json(console: Console, value: Any) -> None:
    """One JSON document on stdout, unstyled (for scripts)."""
    console.file.write(json.dumps(value, ensure_ascii=False) + "\n")
    console.file.flush()
