"""Executors of the memory tools (specs in `config.builtin_tools`; rows in `store.memory`).

Memory is per principal (semantics.md §7 invariant 6): the scope is the turn's principal
(`Turn.principal`: the opener's, or a later steer's), `<e(issuer)>/<e(subject)>` under the
thread's tenant. A turn without a principal, or one of another tenant, has no memory (an error
result, nothing read or written).

- `remember {key, text}` (idempotent, effectful): sets the key's value; the effect key is the
  idempotency key (`MemoryStore.remember`), so a re-dispatch after a crash stores nothing new
  and answers the same. A value over `TEXT_MAX` bytes is an error result, stored nowhere.
- `forget {key}` (idempotent, effectful): tombstones the key; a re-dispatch answers the same.
- `recall {key} | {query}` (read_only: no effect events): the value under a key, or up to
  RECALL_MAX of the scope's memories matching a text query (bounded: `MemoryStore.search`). The
  values are not in the tool result: each is an `injected{source: memory, trust:
  untrusted_reference}` appended after it with the owner's principal as actor, so Render v1
  wraps it as an untrusted reference and hides it once another principal is answered.
"""

from __future__ import annotations

from typing import Any

from ..core.canonical import new_uuid7
from ..store.memory import KEY_MAX, TEXT_MAX, MemoryRow, MemoryWrite, memory_scope
from .tools import Executor, ToolContext, ToolOutput, ToolUncertain

RECALL_MAX = 5  # memories one recall injects


def _scope(tc: ToolContext) -> str | ToolOutput:
    """The turn principal's scope, or the error result when there is none to use."""
    p = tc.principal
    if not isinstance(p, dict) or not p.get("issuer") or not p.get("subject"):
        return ToolOutput("No memory: this turn has no principal to remember for.", is_error=True)
    if p.get("tenant") != tc.tenant:
        return ToolOutput("No memory: the principal belongs to another tenant.", is_error=True)
    return memory_scope(str(p["issuer"]), str(p["subject"]))


def _key(args: dict[str, Any]) -> str | ToolOutput:
    key = args.get("key")
    if not isinstance(key, str) or not key.strip():
        return ToolOutput("A memory key is a non-empty string.", is_error=True)
    if len(key.encode("utf-8", "surrogatepass")) > KEY_MAX:
        return ToolOutput(f"A memory key is at most {KEY_MAX} bytes.", is_error=True)
    return key


def run_remember(args: dict[str, Any], tc: ToolContext) -> ToolOutput:
    assert tc.effect_key is not None
    scope, key = _scope(tc), _key(args)
    if isinstance(scope, ToolOutput):
        return scope
    if isinstance(key, ToolOutput):
        return key
    text = str(args.get("text", ""))
    size = len(text.encode("utf-8"))
    if size > TEXT_MAX:
        return ToolOutput(f"Not remembered: {size} bytes, over the {TEXT_MAX}-byte limit.", is_error=True)
    w = MemoryWrite(
        tenant=tc.tenant,
        scope=scope,
        key=key,
        text=text,
        effect_key=tc.effect_key,
        thread_id=tc.thread_id,
        branch_id=tc.branch_id,
        call_id=tc.call_id,
        now=tc.clock(),
    )
    try:
        tc.stores.memory.remember(w, new_uuid7())
    except Exception as exc:  # the put may or may not have landed
        raise ToolUncertain("transport_error") from exc
    return ToolOutput(f"Remembered {key!r} ({size} bytes).")


def run_forget(args: dict[str, Any], tc: ToolContext) -> ToolOutput:
    assert tc.effect_key is not None
    scope, key = _scope(tc), _key(args)
    if isinstance(scope, ToolOutput):
        return scope
    if isinstance(key, ToolOutput):
        return key
    try:
        forgot = tc.stores.memory.forget(tc.tenant, scope, key, tc.effect_key, tc.clock())
    except Exception as exc:  # the update may or may not have landed
        raise ToolUncertain("transport_error") from exc
    return ToolOutput(f"Forgot {key!r}." if forgot else f"Nothing was remembered under {key!r}.")


def run_recall(args: dict[str, Any], tc: ToolContext) -> ToolOutput:
    scope = _scope(tc)
    if isinstance(scope, ToolOutput):
        return scope
    has_key, query = "key" in args, args.get("query")
    if has_key == isinstance(query, str):
        return ToolOutput("recall takes a key or a query (one of them).", is_error=True)
    memory = tc.stores.memory
    truncated = False
    if has_key:
        key = _key(args)
        if isinstance(key, ToolOutput):
            return key
        row = memory.get(tc.tenant, scope, key)
        rows = [row] if row is not None else []
        if not rows:
            return ToolOutput(f"Nothing is remembered under {key!r}.")
    else:
        assert isinstance(query, str)
        rows, truncated = memory.search(tc.tenant, scope, query, RECALL_MAX)
        if not rows:
            return ToolOutput("No memory matches the query." + (_TRUNCATED if truncated else ""))
    n = len(rows)
    text = f"Recalled {n} {'memory' if n == 1 else 'memories'} (shown as memory references)."
    actor = {"kind": "tool", "principal": dict(tc.principal or {})}
    return ToolOutput(
        text + (_TRUNCATED if truncated else ""), injected=tuple((_injected(r), actor) for r in rows)
    )


_TRUNCATED = " Only the scope's first memories were searched."


def _injected(row: MemoryRow) -> dict[str, Any]:
    data: dict[str, Any] = {
        "origin": {"id": row.key, "version": row.record_id},
        "source": "memory",
        "trust": "untrusted_reference",
    }
    if row.text is not None:
        data["text"] = row.text
    else:
        data["ref"] = row.ref  # the value's artifact: Render v1 reads and verifies it
    return data


MEMORY_EXECUTORS: dict[str, Executor] = {
    "remember": run_remember,
    "recall": run_recall,
    "forget": run_forget,
}
