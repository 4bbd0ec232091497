"""Line schemas of headers and head checkpoints: format admission, then the compiled contract
validators (see schema_gen). Event lines meet their type's validator in `Importer.feed`, the
per-line hot path."""

from __future__ import annotations

from typing import Any

from . import _validators as v
from ._validators import SchemaError
from .errors import LogError
from .lines import HEAD_FORMAT, HEADER_FORMAT

KNOWN_TYPES = frozenset(v.EVENT_VALIDATORS)


def admit_format(value: dict[str, Any], seq: int) -> str:
    """Format admission of a header or head line (before its schema). Returns the format."""
    fmt = value.get("format")
    version = value.get("format_version")
    if fmt not in (HEADER_FORMAT, HEAD_FORMAT):
        raise LogError("invalid_line", seq, f"unknown format {fmt!r}")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise LogError("invalid_line", seq, "format_version must be a positive integer")
    if version > 1:
        raise LogError("unsupported_format", seq, f"{fmt} version {version} is newer than this reader")
    return fmt


def check_header(value: dict[str, Any], seq: int) -> None:
    try:
        v.validate_header(value)
    except SchemaError as exc:
        raise LogError("invalid_line", seq, exc.message) from None


def check_head(value: dict[str, Any], seq: int) -> None:
    try:
        v.validate_head(value)
    except SchemaError as exc:
        raise LogError("invalid_line", seq, exc.message) from None
