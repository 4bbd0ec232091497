"""The demo model's run-limit behaviours (engine.demo_model.DemoModel), so a local user can watch
budgets, structured output, continuation and compaction without a paid model:

- `long: <n>` answers n words (a fixed word cycle), continued across `max_tokens` cuts;
- it honours `model_params.max_tokens`: an answer past it is cut there and stops `max_tokens`;
- it counts tokens deterministically: output = words of its text parts (a tool call: 1 + the
  words of its input), input = request bytes / 4 (the `context_preflight_blocked` estimate);
- an agent with a structured output (its system text ends with the schema, `agents.
  OUTPUT_INSTRUCTION`) gets one JSON value built from the schema; `json: <text>` answers the text
  verbatim (to watch a rejection);
- a compaction request (its last line is Render v1's compaction instruction) gets a summary.
"""

from __future__ import annotations

import json
import re
from typing import Any

WORDS = "the quick brown fox jumps over the lazy dog".split()
SUMMARY_HEAD = "Summary of the earlier conversation:"
TOOL_COMMANDS = frozenset({"note", "ask", "todo"})
_LONG = re.compile(r"^long:\s*(\d{1,6})\s*$", re.I)


def _text(parts: Any) -> str:
    if not isinstance(parts, list):
        return ""
    return "".join(p.get("text", "") for p in parts if isinstance(p, dict) and p.get("type") == "text")


def words(n: int, start: int = 0) -> str:
    return " ".join(WORDS[i % len(WORDS)] for i in range(start, start + n))


def count_tokens(content: list[dict[str, Any]]) -> int:
    n = 0
    for p in content:
        if p.get("type") == "text":
            n += len(str(p.get("text", "")).split())
        elif p.get("type") == "tool_use":
            n += 1 + len(json.dumps(p.get("input", {})).split())
    return n


def truncate(content: list[dict[str, Any]], max_tokens: int | None) -> tuple[list[dict[str, Any]], bool]:
    """`content` cut to `max_tokens` words of text (a text-only answer), and whether it was cut."""
    if not isinstance(max_tokens, int) or max_tokens <= 0 or count_tokens(content) <= max_tokens:
        return content, False
    if any(p.get("type") != "text" for p in content):
        return content, False  # calls are never cut in half
    text = " ".join(_text(content).split()[:max_tokens])
    return [{"type": "text", "text": text}], True


def instance(schema: Any) -> Any:
    """A small value of `schema` (the keywords the demo needs: type, enum, const, properties,
    required, items, minItems, minimum)."""
    if not isinstance(schema, dict):
        return None
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    t = schema.get("type")
    t = t[0] if isinstance(t, list) and t else t
    if t == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        keys = schema.get("required") or list(props)
        return {k: instance(props.get(k, {})) for k in keys}
    if t == "array":
        return [instance(schema.get("items", {})) for _ in range(int(schema.get("minItems", 1) or 0))]
    if t in ("integer", "number"):
        return max(1, int(schema.get("minimum", 1)))
    if t == "boolean":
        return True
    if t == "null":
        return None
    return "demo"


def output_schema(line0: dict[str, Any]) -> Any:
    from ..config.agents_file import OUTPUT_INSTRUCTION

    system = str(line0.get("system", ""))
    head, sep, tail = system.rpartition(OUTPUT_INSTRUCTION)
    if not sep:
        return None
    try:
        return json.loads(tail)
    except ValueError:
        return None


def special(lines: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The answer of a limits feature, or None (the demo's ordinary commands answer)."""
    from ..core.render import COMPACTION_INSTRUCTION
    from .continuation import CONTINUATION_INSTRUCTION

    schema = output_schema(lines[0]) if lines else None
    users = [(i, _text(ln.get("content"))) for i, ln in enumerate(lines) if ln.get("role") == "user"]
    if not users or lines[-1].get("role") != "user":
        # after a tool result: the structured answer, else the demo's `Done: <preview>`
        return _json(instance(schema)) if schema is not None else None
    last_i, last = users[-1]
    if last == COMPACTION_INSTRUCTION:
        inputs = [t for _, t in users[:-1] if not t.startswith("<")]
        gist = "; ".join(s[:60] for s in inputs[-3:]) or "nothing yet"
        return [{"type": "text", "text": f"{SUMMARY_HEAD} {len(lines) - 2} lines; the user said: {gist}"}]
    own = [(i, t) for i, t in users if not t.startswith("<")]  # not a host instruction
    if not own:
        return None
    ask_i, ask = own[-1]
    long = _LONG.match(ask)
    if long and CONTINUATION_INSTRUCTION in last and last_i > ask_i:
        said = sum(
            len(_text(ln.get("content")).split()) for ln in lines[ask_i:] if ln.get("role") == "assistant"
        )
        return [{"type": "text", "text": words(max(0, int(long.group(1)) - said), said)}]
    if long and last_i == ask_i:
        return [{"type": "text", "text": words(int(long.group(1)))}]
    if schema is not None:
        fresh = last_i == ask_i
        if fresh and ask.lower().startswith("json:"):
            return [{"type": "text", "text": ask[5:].strip()}]
        if fresh and (ask.lower() == "time" or ask.partition(":")[0].strip().lower() in TOOL_COMMANDS):
            return None  # the demo's tool commands still call their tools
        return _json(instance(schema))
    return None


def _json(value: Any) -> list[dict[str, Any]]:
    return [{"type": "text", "text": json.dumps(value, sort_keys=True)}]
