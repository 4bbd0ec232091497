"""What both OpenAI wire flavours (`openai_responses`, `openai_chat`) share: the provider name,
the call-id alphabet, the model_params check, attachments as data URLs or text documents, and
usage (OpenAI counts cached tokens inside the input; the contract doesn't)."""

from __future__ import annotations

import base64
import re
from typing import Any

from . import common
from .common import Blobs, Conversation, unsupported

PROVIDER = "openai"
ID_RE = re.compile(r"^[A-Za-z0-9_.-]+$")


def _params(conv: Conversation) -> dict[str, Any]:
    params = common.check_params(conv)
    if "thinking" in params:
        raise unsupported("model_error", "openai maps reasoning_effort, not thinking")
    return params


def _data_url(blobs: Blobs, ref: dict[str, Any]) -> str:
    return f"data:{ref['media_type']};base64,{base64.b64encode(blobs.get(ref)).decode()}"


def _filename(part: dict[str, Any]) -> str:
    ext = {"application/pdf": "pdf"}.get(part["ref"]["media_type"], "bin")
    return f"{re.sub(r'[^A-Za-z0-9_.-]', '_', part.get('title') or part['ref']['sha256'][:16])}.{ext}"


def _text_doc(blobs: Blobs, part: dict[str, Any]) -> str:
    title = common.escape(part.get("title", ""))
    return f'<document title="{title}">\n{blobs.text(part["ref"])}\n</document>'


def _usage(u: dict[str, Any] | None, inp: str, out: str) -> dict[str, int | None]:
    if not u:
        return {"input_tokens": None, "output_tokens": None}
    details = u.get(f"{inp}_details") or u.get("prompt_tokens_details")
    out_details = u.get(f"{out}_details") or u.get("completion_tokens_details")
    total_in = u.get(inp)
    usage: dict[str, int | None] = {"input_tokens": total_in, "output_tokens": u.get(out)}
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    if isinstance(cached, int):
        usage["cache_read_tokens"] = cached
        usage["input_tokens"] = total_in - cached if isinstance(total_in, int) else None
    if isinstance(out_details, dict) and isinstance(out_details.get("reasoning_tokens"), int):
        usage["reasoning_tokens"] = out_details["reasoning_tokens"]
    return usage
