"""How a tool call looks on a stream: its ACP kind, title, subject, touched paths, arguments and
result text, each capped the way craze caps them (8 KiB output tails, a compact `rawInput`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

OUTPUT_TAIL_BYTES = 8 * 1024
RAW_INPUT_BYTES = 8 * 1024
TITLE_CHARS = 200
SUBJECT_KEYS = ("command", "cmd", "file_path", "path", "url", "query", "pattern", "question", "text")
PATH_KEYS = ("file_path", "path", "paths", "files")

# Words of a tool's name → its ACP kind (first match in this order). Built-ins by name first.
BUILTIN_KINDS = {
    "time": "other",
    "todo_write": "think",
    "ask_user": "other",
    "note": "edit",
    "remember": "edit",
    "recall": "read",
    "forget": "delete",
}
KIND_WORDS = (
    (("spawn", "task", "agent", "subagent", "delegate"), "task"),
    (("bash", "shell", "exec", "execute", "run", "command", "terminal"), "execute"),
    (("delete", "remove", "rm", "unlink"), "delete"),
    (("move", "rename", "mv"), "move"),
    (("write", "edit", "patch", "replace", "create", "update", "apply"), "edit"),
    (("read", "view", "cat", "open", "get"), "read"),
    (("grep", "glob", "search", "find", "ls", "list", "query"), "search"),
    (("fetch", "http", "web", "url", "download", "browse", "curl"), "fetch"),
    (("think", "todo", "plan", "reason"), "think"),
)


def kind_of(name: str) -> str:
    if name in BUILTIN_KINDS:
        return BUILTIN_KINDS[name]
    words = set(name.lower().replace("-", "_").split("_"))
    for keys, kind in KIND_WORDS:
        if words.intersection(keys):
            return kind
    return "other"


def is_task(name: str) -> bool:
    return kind_of(name) == "task"


def subject_of(args: Mapping[str, Any]) -> str:
    """The one argument that says what the call is about (a command, a path, a question…)."""
    for key in SUBJECT_KEYS:
        v = args.get(key)
        if isinstance(v, str) and v.strip():
            return _cap_chars(" ".join(v.split()), TITLE_CHARS)
    return ""


def title_of(name: str, args: Mapping[str, Any]) -> str:
    return subject_of(args) or name


def label_of(name: str, args: Mapping[str, Any]) -> str:
    """What an approval permits, e.g. ``note: buy milk``."""
    subject = subject_of(args)
    return f"{name}: {subject}" if subject else name


def locations_of(args: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for key in PATH_KEYS:
        v = args.get(key)
        for p in v if isinstance(v, list) else [v]:
            if isinstance(p, str) and p and p not in out:
                out.append(p)
    return out


def raw_input(args: Any) -> str:
    """Compact JSON of the arguments, capped at RAW_INPUT_BYTES (cut on a character boundary)."""
    text = json.dumps(args, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
    return head_bytes(text, RAW_INPUT_BYTES)[0]


def result_text(data: Mapping[str, Any]) -> str:
    """A tool result as text: its text parts joined, else its preview."""
    parts = data.get("content")
    if isinstance(parts, list):
        texts = [p["text"] for p in parts if isinstance(p, dict) and p.get("type") == "text"]
        if texts:
            return "\n".join(str(t) for t in texts)
    return str(data.get("preview", ""))


def head_bytes(text: str, cap: int) -> tuple[str, bool]:
    raw = text.encode()
    if len(raw) <= cap:
        return text, False
    return raw[:cap].decode(errors="ignore"), True


def tail_bytes(text: str, cap: int = OUTPUT_TAIL_BYTES) -> tuple[str, bool]:
    raw = text.encode()
    if len(raw) <= cap:
        return text, False
    return raw[-cap:].decode(errors="ignore"), True


def _cap_chars(text: str, cap: int) -> str:
    return text if len(text) <= cap else text[: cap - 1] + "…"
