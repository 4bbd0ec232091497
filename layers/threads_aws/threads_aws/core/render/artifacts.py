"""Artifacts a request references (semantics §7 "Artifacts").

Every referenced artifact is verified by sha256 **and** length before the request may be sent,
and a failure is a LogError at the seq of the event carrying the ref: a failed artifact is never
substituted.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..canonical import sha256_hex
from ..errors import LogError
from ._events import GetArtifact


def fetch_artifact(get_artifact: GetArtifact, ref: dict[str, Any], seq: int | None) -> bytes:
    """Verified bytes of `ref`; any failure is a LogError at `seq` (the event carrying the ref).

    The length and sha256 are re-checked here, so a lenient `get_artifact` can't substitute bytes.
    """
    try:
        data = get_artifact(ref)
    except LogError as exc:
        raise LogError(exc.code, seq, exc.message) from exc
    except (KeyError, FileNotFoundError) as exc:
        raise LogError("artifact_missing", seq, f"artifact {ref.get('sha256')} missing") from exc
    if data is None:
        raise LogError("artifact_missing", seq, f"artifact {ref.get('sha256')} missing")
    if len(data) != ref.get("bytes") or sha256_hex(data) != ref.get("sha256"):
        raise LogError("artifact_corrupt", seq, f"artifact {ref.get('sha256')} does not verify")
    return data


def artifact_text(get_artifact: GetArtifact, ref: dict[str, Any], seq: int) -> str:
    data = fetch_artifact(get_artifact, ref, seq)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LogError("artifact_corrupt", seq, "artifact text is not UTF-8") from exc


def verify_part_refs(get_artifact: GetArtifact, parts: Iterable[dict[str, Any]], seq: int) -> None:
    # Parts render as recorded (the ref, never the bytes), but every referenced artifact must
    # exist and verify before the request may be sent.
    for part in parts:
        ref = part.get("ref")
        if isinstance(ref, dict):
            fetch_artifact(get_artifact, ref, seq)
