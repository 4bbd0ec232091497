"""The built-in tools' specs: what the model sees and what decides effect handling (effect
class, dedup window). Their implementations live in `engine.tools`, `engine.file_tools`,
`engine.memory_tools` and `engine.team`; an agent names them in its `tools` list
(`threads_aws.agents`)."""

from __future__ import annotations

from typing import Any


def _obj(required: list[str], **props: Any) -> dict[str, Any]:
    return {"additionalProperties": False, "properties": props, "required": required, "type": "object"}


_STR = {"type": "string"}
_INT = {"minimum": 0, "type": "integer"}
_BOOL = {"type": "boolean"}
# Workspace writes: idempotent by construction (`engine.file_tools`: same key, same base, same
# manifest; content-addressed conditional puts), so a crash after effect_begin settles
# safe_to_retry inside the window instead of parking.
WORKSPACE_DEDUP_WINDOW_MS = 7 * 86_400_000
FILE_TOOLS: dict[str, dict[str, Any]] = {
    "read_file": {
        "description": "Read a UTF-8 file of the workspace (paths relative to /workspace); "
        "offset/limit select lines.",
        "effect_class": "read_only",
        "input_schema": _obj(["path"], limit=_INT, offset=_INT, path=_STR),
    },
    "list_files": {
        "description": "List the workspace's files (path and size), optionally under a directory.",
        "effect_class": "read_only",
        "input_schema": _obj([], path=_STR),
    },
    "glob": {
        "description": "Workspace paths matching a glob (* and ? within a segment, ** across).",
        "effect_class": "read_only",
        "input_schema": _obj(["pattern"], pattern=_STR),
    },
    "grep": {
        "description": "Lines matching a regular expression in the workspace's text files.",
        "effect_class": "read_only",
        "input_schema": _obj(["pattern"], glob=_STR, ignore_case=_BOOL, path=_STR, pattern=_STR),
    },
    "write_file": {
        "description": "Create or overwrite a workspace file with UTF-8 text.",
        "effect_class": "idempotent",
        "dedup_window_ms": WORKSPACE_DEDUP_WINDOW_MS,
        "input_schema": _obj(["path", "content"], content=_STR, path=_STR),
    },
    "exec": {
        "description": "Run a shell command in an isolated sandbox (no network) over a copy of the "
        "workspace; the files it writes or deletes become the workspace's.",
        "effect_class": "idempotent",
        "dedup_window_ms": WORKSPACE_DEDUP_WINDOW_MS,
        "input_schema": _obj(["command"], command=_STR, timeout_ms=_INT),
    },
    "edit_file": {
        "description": "Replace an exact string in a workspace file (it must occur once, "
        "unless replace_all).",
        "effect_class": "idempotent",
        "dedup_window_ms": WORKSPACE_DEDUP_WINDOW_MS,
        "input_schema": _obj(
            ["path", "old_string", "new_string"],
            new_string=_STR,
            old_string=_STR,
            path=_STR,
            replace_all=_BOOL,
        ),
    },
}

BUILTIN_TOOLS: dict[str, dict[str, Any]] = {
    "ask_user": {
        "name": "ask_user",
        "description": "Ask the user a question and wait for the answer.",
        "effect_class": "read_only",
        "input_schema": {
            "additionalProperties": False,
            "properties": {
                "multi_select": {"type": "boolean"},
                "options": {"items": {"type": "string"}, "type": "array"},
                "question": {"type": "string"},
            },
            "required": ["question"],
            "type": "object",
        },
    },
    "todo_write": {
        "name": "todo_write",
        "description": "Replace the agent's todo list.",
        "effect_class": "read_only",
        "input_schema": {
            "additionalProperties": False,
            "properties": {
                "todos": {
                    "items": {
                        "additionalProperties": False,
                        "properties": {
                            "content": {"type": "string"},
                            "id": {"type": "string"},
                            "status": {"enum": ["pending", "in_progress", "completed"]},
                        },
                        "required": ["id", "content", "status"],
                        "type": "object",
                    },
                    "type": "array",
                }
            },
            "required": ["todos"],
            "type": "object",
        },
    },
    "time": {
        "name": "time",
        "description": "The current time (UTC, ISO 8601).",
        "effect_class": "read_only",
        "input_schema": {"additionalProperties": False, "properties": {}, "type": "object"},
    },
    "note": {
        "name": "note",
        "description": "Store a note durably (an effect: needs approval under the default policy).",
        "effect_class": "idempotent",
        "dedup_window_ms": 86_400_000,
        "input_schema": {
            "additionalProperties": False,
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
            "type": "object",
        },
    },
}
# The memory tools (engine.memory_tools): the turn principal's memory, per tenant.
MEMORY_TOOLS: dict[str, dict[str, Any]] = {
    "remember": {
        "description": "Remember a text under a key for the user you are talking to (replaces "
        "what the key held; an effect).",
        "effect_class": "idempotent",
        "dedup_window_ms": 86_400_000,
        "input_schema": _obj(["key", "text"], key=_STR, text=_STR),
    },
    "recall": {
        "description": "Recall what you remembered for this user: by key, or the best matches "
        "of a text query (words matched in keys and values). Recalled memories are shown as "
        "untrusted references.",
        "effect_class": "read_only",
        "input_schema": _obj([], key=_STR, query=_STR),
    },
    "forget": {
        "description": "Forget what you remembered under a key for this user (an effect).",
        "effect_class": "idempotent",
        "dedup_window_ms": 86_400_000,
        "input_schema": _obj(["key"], key=_STR),
    },
}
BUILTIN_TOOLS.update({name: {"name": name, **spec} for name, spec in FILE_TOOLS.items()})
BUILTIN_TOOLS.update({name: {"name": name, **spec} for name, spec in MEMORY_TOOLS.items()})
# The team tools (`engine.team`): recorded by their own events in the team lead's log (the root
# of the subagent tree), like todo_write's todos_updated, so read_only (no effect events).
_IDS = {"items": _STR, "type": "array"}
TEAM_TOOLS: dict[str, dict[str, Any]] = {
    "team_task_create": {
        "description": "Add a task to the team's task list; blocked_by names tasks that must be "
        "completed before anyone can claim it.",
        "effect_class": "read_only",
        "input_schema": _obj(
            ["task_id", "subject"], blocked_by=_IDS, description=_STR, subject=_STR, task_id=_STR
        ),
    },
    "team_task_claim": {
        "description": "Claim an open, unclaimed team task whose blockers are all completed.",
        "effect_class": "read_only",
        "input_schema": _obj(["task_id"], task_id=_STR),
    },
    "team_task_update": {
        "description": "Close a task you claimed (completed or failed), or release it to the open pool.",
        "effect_class": "read_only",
        "input_schema": _obj(
            ["task_id", "status"], status={"enum": ["completed", "failed", "released"]}, task_id=_STR
        ),
    },
    "team_message": {
        "description": "Send a message to a teammate: a member id, lead, or * for every member.",
        "effect_class": "read_only",
        "input_schema": _obj(["to", "text"], text=_STR, to=_STR),
    },
    "team_tasks": {
        "description": "The team's task list: each task's id, subject, status, owner and blockers.",
        "effect_class": "read_only",
        "input_schema": _obj([]),
    },
}
BUILTIN_TOOLS.update({name: {"name": name, **spec} for name, spec in TEAM_TOOLS.items()})
