"""Shared bits of the provider adapter tests: a Render v1 request builder, an in-memory artifact
store with the ArtifactStore read/put surface, and SSE framing of recorded events."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from threads_aws.config.builtin_tools import BUILTIN_TOOLS
from threads_aws.core.canonical import canonical_bytes
from threads_aws.core.errors import LogError

TIME_TOOL = {"description": "now", "input_schema": BUILTIN_TOOLS["time"]["input_schema"], "name": "time"}


def request(
    provider: str,
    lines: list[dict[str, Any]],
    *,
    settings: Any = None,
    params: Any = None,
    system: str = "Be brief.",
    tools: Any = None,
    model: str = "m-1",
) -> bytes:
    head = {
        "adapter": {"name": provider, "settings": settings or {}, "version": "1"},
        "model": {"name": model, "provider": provider},
        "params": {"max_tokens": 256} if params is None else params,
        "system": system,
        "tools": [TIME_TOOL] if tools is None else tools,
    }
    return b"".join(canonical_bytes(v) + b"\n" for v in [head, *lines])


def user(text: str) -> dict[str, Any]:
    return {"content": [{"text": text, "type": "text"}], "role": "user"}


def tool(call_id: str, text: str, is_error: bool = False) -> dict[str, Any]:
    return {
        "call_id": call_id,
        "content": [{"text": text, "type": "text"}],
        "is_error": is_error,
        "role": "tool",
    }


class MemoryArtifacts:
    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}

    def put(self, data: bytes, media_type: str) -> dict[str, Any]:
        sha = hashlib.sha256(data).hexdigest()
        self.blobs[sha] = data
        return {"bytes": len(data), "media_type": media_type, "sha256": sha}

    def get_ref(self, ref: dict[str, Any]) -> bytes:
        if ref["sha256"] not in self.blobs:
            raise LogError("artifact_missing", None, "missing")
        return self.blobs[ref["sha256"]]

    def json(self, ref: dict[str, Any]) -> Any:
        return json.loads(self.get_ref(ref))


def sse(events: list[tuple[str | None, Any]]) -> bytes:
    out = b""
    for name, data in events:
        if name is not None:
            out += f"event: {name}\n".encode()
        out += b"data: " + (data if isinstance(data, bytes) else json.dumps(data).encode()) + b"\n\n"
    return out


def complete(
    adapter: Any, req: bytes, artifacts: Any = None, deltas: list[tuple[str, str]] | None = None
) -> Any:
    return adapter.complete(
        req,
        settings={},
        request_event_id="0190b0b0-0000-7000-8000-000000000001",
        branch_id="0190b0b0-0000-7000-8000-000000000002",
        artifacts=artifacts if artifacts is not None else MemoryArtifacts(),
        on_delta=(lambda k, t: deltas.append((k, t))) if deltas is not None else None,
    )
