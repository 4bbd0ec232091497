"""The offline demo model (`adapter: demo`): each command of the latest user line becomes the
answer a real model would give (tool uses, text, limits), so every capability of the host can
be watched locally without a provider. The command list is `DemoModel`'s docstring (and the
README's tour). Loaded on first use (`engine.models._BUILTIN`)."""

from __future__ import annotations

import json
from typing import Any

from ..core.manifest import ISOLATIONS
from .models import (
    ArtifactAccess,
    DeltaCallback,
    ModelResult,
    _text_of,
    call_id_for,
    request_lines,
)

PREVIEW_CHARS = 200


class DemoModel:
    """The offline demo model. It reads the latest user line of the request:

    - `note: <text>` → tool_use `note {text}` (effectful: asks for approval by default);
    - `ask: <question>` → tool_use `ask_user {question}`;
    - `todo: a; b; c` → tool_use `todo_write` (ids t1.., status pending);
    - `time` → tool_use `time {}` (read-only);
    - `write <path>: <text>` → `write_file {path, content}` (a workspace write, an effect);
    - `read <path>` → `read_file {path}`; `ls` → `list_files {}` (read-only);
    - `read: a; b; c` → one `read_file` per path in one response (they run as a parallel
      read-only group, `engine.parallel`);
    - `exec: <command>` → `exec {command}` (the sandbox over the workspace; asks by default);
    - `lambda: <tool> <json>` / `mcp: <tool> <json>` → tool_use `<tool>` with the JSON object as
      input (a Lambda tool, an MCP server's tool: the agent's tool names);
    - `spawn: <agent>: <task>` → tool_use `spawn_agent {agent, prompt}`; `bg: <agent>: <task>`
      the same with `background: true` (the turn goes on; the child's answer arrives late);
      `spawn <isolation>: …` / `bg <isolation>: …` add `isolation` (`forked_sandbox`,
      `worktree`, `shared_sandbox`, `none`: `engine.isolation`);
    - `handoff: <agent>` → tool_use `handoff {agent}`;
    - `remember <key>: <text>` / `forget <key>` → `remember {key, text}` / `forget {key}` (the
      user's memory, effects); `recall <key>` / `recall: <query>` → `recall {key}` / `{query}`
      (read-only; it answers with what the recalled memory references say);
    - `team: <agent>: a; b; c` → the lead's team (`engine.team`): `team_task_create` t1..tn (each
      blocked by the one before), then one `spawn_agent {agent, prompt: "work: t<i>"}` per task;
      `work: <task_id>` → `team_task_claim`, and once claimed a `team_message` to the lead and
      `team_task_update{completed}`;
    - `later: <text>` (`later <ms>: <text>`) → tool_use `later {text, delay_ms}` (default 3000
      ms): a deferred tool, so the turn goes on at once and the answer arrives later as a late
      result (`engine.deferred`); while it runs it answers a heartbeat with the running ids;
    - anything else → the text `You said: "<line>"`;
    - `long: <n>`, structured output, compaction, `max_tokens` and token counts:
      `engine.demo_limits`.

    When the request ends with a tool result it answers `Done: <preview>` and ends the turn.

    Its text streams through `on_delta` a word at a time, like a provider's, with
    THREADS_DEMO_DELTA_MS (default 0; `threads-aws dev` sets 30) between words, so a local
    subscriber watches the answer arrive before its `model_response` commits.
    """

    def complete(
        self,
        request: bytes,
        *,
        settings: dict[str, Any],
        request_event_id: str,
        branch_id: str,
        artifacts: ArtifactAccess | None = None,
        on_delta: DeltaCallback | None = None,
    ) -> ModelResult:
        from . import demo_limits

        content, stop = self.answer(request)
        content, cut = demo_limits.truncate(content, (settings.get("model_params") or {}).get("max_tokens"))
        if on_delta is not None:
            stream_words(content, on_delta, _env_ms("THREADS_DEMO_DELTA_MS"))
        usage: dict[str, int | None] = {
            "input_tokens": len(request) // 4,
            "output_tokens": demo_limits.count_tokens(content),
        }
        return ModelResult(content, "max_tokens" if cut else stop, usage)

    def answer(self, request: bytes) -> tuple[list[dict[str, Any]], str]:
        from . import demo_limits

        lines = request_lines(request)
        limited = demo_limits.special(lines)  # long:, structured output, compaction
        if limited is not None:
            return limited, "end_turn"
        # teammates' messages delivered after the last result (engine.team) are read, not answered
        shown = len(lines)
        while shown > 1 and _text_of(lines[shown - 1].get("content")).startswith(TEAM_MAIL_PREFIX):
            shown -= 1
        mail = len(lines) - shown
        recalled = _recalled(lines[:shown])  # memory references a recall appended after its result
        shown -= len(recalled)
        last = lines[shown - 1] if shown > 1 else {}
        if last.get("role") == "tool":
            worked = _after_claim(request, lines[:shown])
            if worked is not None:
                return worked, "tool_use"
            preview = _text_of(last.get("content"))
            if len(preview) > PREVIEW_CHARS:
                preview = preview[:PREVIEW_CHARS] + "…"
            heard = f" ({mail} team message{'s' if mail != 1 else ''} read)" if mail else ""
            said = "".join(f"\n- {m}" for m in recalled)
            return [{"type": "text", "text": f"Done: {preview}{heard}{said}"}], "end_turn"
        if last.get("role") == "user" and _text_of(last.get("content")).startswith("<heartbeat>"):
            running = _text_of(last.get("content")).split("running: ", 1)[-1].split("\n", 1)[0]
            return [{"type": "text", "text": f"Still running: {running}"}], "end_turn"
        text = ""
        for line in reversed(lines[1:]):
            if line.get("role") == "user":
                text = _text_of(line.get("content")).strip()
                break
        head, sep, rest = text.partition(":")
        if sep and head.strip().lower() == "read" and ";" in rest:  # one call per path: a parallel group
            paths = [p.strip() for p in rest.split(";") if p.strip()]
            uses = [
                {
                    "type": "tool_use",
                    "call_id": call_id_for(request, i),
                    "name": "read_file",
                    "input": {"path": p},
                }
                for i, p in enumerate(paths)
            ]
            return uses, "tool_use"
        if sep and head.strip().lower() == "team":
            team = _team_uses(request, rest)
            if team:
                return team, "tool_use"
        use = self._tool_use(text)
        if use is None:
            return [{"type": "text", "text": f'You said: "{text}"'}], "end_turn"
        name, args = use
        return [
            {"type": "tool_use", "call_id": call_id_for(request, 0), "name": name, "input": args}
        ], "tool_use"

    @staticmethod
    def _tool_use(text: str) -> tuple[str, dict[str, Any]] | None:
        head, sep, rest = text.partition(":")
        cmd, rest = head.strip().lower(), rest.strip()
        verb, _, arg = text.strip().partition(" ")
        if verb.lower() == "write" and sep and head.strip()[5:].strip():
            return "write_file", {
                "content": text.partition(":")[2].lstrip(" "),
                "path": head.strip()[5:].strip(),
            }
        if verb.lower() == "read" and arg.strip():
            return "read_file", {"path": arg.strip()}
        if text.strip().lower() == "ls":
            return "list_files", {}
        if sep and cmd == "exec" and rest:
            return "exec", {"command": rest}
        if sep and cmd == "note" and rest:
            return "note", {"text": rest}
        if sep and cmd == "ask" and rest:
            return "ask_user", {"question": rest}
        if sep and cmd == "todo":
            items = [x.strip() for x in rest.split(";") if x.strip()]
            if items:
                todos = [{"id": f"t{i}", "content": c, "status": "pending"} for i, c in enumerate(items, 1)]
                return "todo_write", {"todos": todos}
        if text.strip().lower() == "time":
            return "time", {}
        if sep and cmd in ("lambda", "mcp") and rest:
            name, _, raw = rest.partition(" ")
            try:
                args = json.loads(raw) if raw.strip() else {}
            except ValueError:
                return None
            return (name, args) if isinstance(args, dict) else None
        spawn_verb, _, isolation = cmd.partition(" ")
        if sep and spawn_verb in ("spawn", "bg") and isolation.strip() in ("", *ISOLATIONS):
            agent, _, task = rest.partition(":")
            if agent.strip() and task.strip():
                spawn: dict[str, Any] = {"agent": agent.strip(), "prompt": task.strip()}
                if isolation.strip():
                    spawn["isolation"] = isolation.strip()
                return "spawn_agent", {**spawn, "background": True} if spawn_verb == "bg" else spawn
        if sep and cmd == "handoff" and rest:
            return "handoff", {"agent": rest}
        if sep and cmd == "work" and rest:
            return "team_task_claim", {"task_id": rest}
        if sep and rest and (cmd == "later" or (cmd.startswith("later ") and cmd[6:].strip().isdigit())):
            delay = int(cmd[6:].strip()) if cmd != "later" else 3000
            return "later", {"delay_ms": min(delay, 600_000), "text": rest}
        return _memory_use(text)


_MEMORY_REF = '<reference source="memory" '


def _recalled(lines: list[dict[str, Any]]) -> list[str]:
    """The bodies of the memory reference lines at the end of the request (after a recall)."""
    import html

    out: list[str] = []
    for line in reversed(lines[1:]):
        text = _text_of(line.get("content")) if line.get("role") == "user" else ""
        if not text.startswith(_MEMORY_REF):
            break
        body = text.partition("\n")[2].rpartition("\n")[0]
        out.insert(0, html.unescape(body))
    return out


def _memory_use(text: str) -> tuple[str, dict[str, Any]] | None:
    verb, _, arg = text.strip().partition(" ")
    verb = verb.lower()
    if verb == "recall:" and arg.strip():
        return "recall", {"query": arg.strip()}  # `recall: <query>`
    if verb == "recall" and arg.strip():
        return "recall", {"key": arg.strip()}
    if verb == "forget" and arg.strip():
        return "forget", {"key": arg.strip()}
    key, sep, value = arg.partition(":")
    if verb == "remember" and sep and key.strip() and value.strip():
        return "remember", {"key": key.strip(), "text": value.strip()}
    return None


TEAM_MAIL_PREFIX = '<reference source="agent" '


def _team_uses(request: bytes, rest: str) -> list[dict[str, Any]]:
    """`team: <agent>: a; b; c`: the tasks (each blocked by the one before), then a member per task."""
    agent, _, items = rest.partition(":")
    subjects = [x.strip() for x in items.split(";") if x.strip()]
    if not agent.strip() or not subjects:
        return []
    uses: list[tuple[str, dict[str, Any]]] = []
    for i, subject in enumerate(subjects, 1):
        blocked = [f"t{i - 1}"] if i > 1 else []
        uses.append(("team_task_create", {"blocked_by": blocked, "subject": subject, "task_id": f"t{i}"}))
    for i in range(1, len(subjects) + 1):
        uses.append(("spawn_agent", {"agent": agent.strip(), "prompt": f"work: t{i}"}))
    return [
        {"type": "tool_use", "call_id": call_id_for(request, i), "name": n, "input": a}
        for i, (n, a) in enumerate(uses)
    ]


def _after_claim(request: bytes, lines: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """A member's `work:` once its claim succeeded: tell the lead, then complete the task."""
    last = lines[-1]
    call = next(
        (
            p
            for line in reversed(lines)
            if line.get("role") == "assistant"
            for p in line.get("content") or []
            if p.get("type") == "tool_use" and p.get("call_id") == last.get("call_id")
        ),
        None,
    )
    if call is None or call.get("name") != "team_task_claim" or last.get("is_error"):
        return None
    tid = str(call["input"].get("task_id"))
    uses = [
        ("team_message", {"text": f"{tid} is done: {_text_of(last.get('content'))}", "to": "lead"}),
        ("team_task_update", {"status": "completed", "task_id": tid}),
    ]
    return [
        {"type": "tool_use", "call_id": call_id_for(request, i), "name": n, "input": a}
        for i, (n, a) in enumerate(uses)
    ]


def stream_words(content: list[dict[str, Any]], on_delta: DeltaCallback, pause_ms: int = 0) -> None:
    """Each text part through `on_delta`, one word (with its trailing space) per call."""
    import re
    import time

    for part in content:
        if part.get("type") != "text":
            continue
        for i, word in enumerate(re.findall(r"\s*\S+\s*|\s+", str(part.get("text", "")))):
            if pause_ms and i:
                time.sleep(pause_ms / 1000)
            on_delta("text", word)


def _env_ms(name: str) -> int:
    import os

    try:
        return max(0, min(int(os.environ.get(name, "0")), 10_000))
    except ValueError:
        return 0
