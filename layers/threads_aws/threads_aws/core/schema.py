"""Line schemas: format admission and the compiled contract validators (see schema_gen)."""

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


def check_event(value: dict[str, Any], seq: int) -> bool:
    """Validate an event line; True if its type is known, False for a kept unknown
    non-critical event. An unknown critical type refuses the log (rule 5)."""
    type_ = value.get("type")
    validator = v.EVENT_VALIDATORS.get(type_) if isinstance(type_, str) else None
    if value.get("type_version") != 1:  # every known type is at version 1: (type, 2) is unknown
        validator = None
    try:
        if validator is None:
            v.validate_envelope(value)
        else:
            validator(value)
    except SchemaError as exc:
        raise LogError("invalid_line", seq, exc.message) from None
    if validator is None:
        if value["critical"]:
            raise LogError("unsupported_critical_event", seq, f"unknown critical type {value['type']!r}")
        return False
    return True
