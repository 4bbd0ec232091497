"""Line 0 of a request and the declared prefix (semantics §7 "Line 0", C7).

Line 0 is ``{adapter, model, params, system, tools}``: ``system`` and ``tools`` are pinned by
``thread_started`` and never change; ``adapter``, ``model`` and ``params`` come from the latest
``thread_started``/``settings_changed``. So line 0, and the ``declared_prefix`` a model_request
records (its bytes and sha256), are byte-equal within a settings epoch (C7, `prefix_changed`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..canonical import sha256_hex
from ..errors import LogError
from ..fold import epoch_settings
from ._events import is_event
from .jcs import line


def render_tool(spec: dict[str, Any]) -> dict[str, Any]:
    """A ToolSpec as the model sees it; execution metadata (effect_class, ...) is not rendered."""
    if spec.get("defer_loading") is True:
        return {"deferred": True, "description": spec["description"], "name": spec["name"]}
    return {"description": spec["description"], "input_schema": spec["input_schema"], "name": spec["name"]}


def line0_value(started: dict[str, Any], settings: dict[str, Any] | None) -> dict[str, Any]:
    """Line 0's value from the `thread_started` data and the current epoch's settings."""
    src = settings if settings is not None else started
    return {
        "adapter": src["adapter"],
        "model": src["model"],
        "params": src["model_params"],
        "system": started["instructions"],
        "tools": [render_tool(t) for t in started["tools"]],
    }


def line0(events: Iterable[dict[str, Any]]) -> bytes:
    """Render v1 line 0 (with its newline) of the settings epoch current after `events`."""
    started: dict[str, Any] | None = None
    settings: dict[str, Any] | None = None
    for ev in events:
        if not is_event(ev):
            continue
        settings = epoch_settings(ev) or settings
        if ev["type"] == "thread_started":
            started = ev["data"]
    if started is None:
        raise LogError("invalid_transition", None, "no thread_started: nothing pins line 0")
    return line(line0_value(started, settings))


def declared_prefix(events: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """`{bytes, sha256}` of line 0, as a model_request declares it."""
    data = line0(events)
    return {"bytes": len(data), "sha256": sha256_hex(data)}
