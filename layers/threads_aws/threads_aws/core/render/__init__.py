"""Render v1 (semantics §7): the exact request bytes a model sees, derived from the log alone.

A request is JSONL: line 0 (`{adapter, model, params, system, tools}` of the current settings
epoch) and then one line per rendering event, each line RFC 8785 bytes plus ``\\n``. The same
walk yields the ReducedState ``transcript``, so the two can never disagree.

Everything here is a pure function of parsed events (dicts as parsed from the JSONL lines, in seq
order). Header and head-checkpoint lines, and events of unknown type, are ignored. One module
per part of §7; every public name stays importable from here:

- `prefix`: line 0 and the declared prefix (C7): `line0`, `declared_prefix`, `render_tool`;
- `renderer`: the walk (which events render, as which role; incremental) and the request
  builder: `Renderer`, `render_request`, `transcript`, `request_ref_for`;
- `event_lines`: the bytes of each rendered event's line (results' clear and redact included);
- `texts`: escaping, the wrappers, and the strings the spec leaves open (`COMPACTION_INSTRUCTION`,
  `CLEARED_RESULT_TEXT`, ...); `redaction`: merged redact spans; `jcs`: a line's bytes;
- `artifacts`: verified artifact bytes (sha256 and length; never substituted);
- `verify`: the import's request verification (`verify_requests`, first failure wins) and the
  history prefix property (`history_prefix_violation`, `history_prefix_holds`).
"""

from __future__ import annotations

from ._events import GetArtifact
from .artifacts import fetch_artifact
from .event_lines import event_line
from .prefix import declared_prefix, line0, render_tool
from .redaction import redact_text
from .renderer import Renderer, render_request, request_ref_for, transcript
from .texts import (
    CLEARED_RESULT_TEXT,
    COMPACTION_INSTRUCTION,
    HEARTBEAT_ID_SEPARATOR,
    REDACTED_TEXT,
    SUMMARY_SOURCE,
    compaction_instruction_line,
    escape,
    heartbeat_text,
    wrap_reference,
)
from .verify import history_prefix_holds, history_prefix_violation, verify_requests

__all__ = [
    "CLEARED_RESULT_TEXT",
    "COMPACTION_INSTRUCTION",
    "HEARTBEAT_ID_SEPARATOR",
    "REDACTED_TEXT",
    "SUMMARY_SOURCE",
    "GetArtifact",
    "Renderer",
    "compaction_instruction_line",
    "declared_prefix",
    "escape",
    "event_line",
    "fetch_artifact",
    "heartbeat_text",
    "history_prefix_holds",
    "history_prefix_violation",
    "line0",
    "redact_text",
    "render_request",
    "render_tool",
    "request_ref_for",
    "transcript",
    "verify_requests",
    "wrap_reference",
]
