"""The event kinds Render v1 reads, and the artifact getter every part of it takes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: The store's getter: ArtifactRef -> bytes (may raise LogError, KeyError, FileNotFoundError).
GetArtifact = Callable[[dict[str, Any]], bytes]

RESPONSES = frozenset({"model_response", "model_response_recovered"})
RESULTS = frozenset({"tool_result", "tool_result_late"})
INPUTS = frozenset({"user_input", "steer"})
#: Every event that may render a line of its own (whether it does depends on the walk).
CANDIDATES = RESPONSES | RESULTS | INPUTS | {"injected", "heartbeat", "tools_changed"}
#: Output parts an omit_prior settings change drops from earlier responses (ModelSettings).
OMITTABLE_PARTS = frozenset({"reasoning", "hosted_tool"})
#: before_input hook decisions that drop the input they name.
DENYING = frozenset({"deny", "failed"})


def is_event(ev: Any) -> bool:
    """An event line (not a header or head checkpoint line)."""
    return isinstance(ev, dict) and "type" in ev and "seq" in ev and isinstance(ev.get("data"), dict)
