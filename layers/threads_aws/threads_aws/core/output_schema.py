"""Rule 20: an accepted structured output validates against the pinned schema.

Compiled once per schema hash; the pinned schema is model-facing JSON Schema, compiled with the
same engine the line schemas use."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import fastjsonschema

from .canonical import canonical_bytes


@lru_cache(maxsize=64)
def _compiled(schema_bytes: bytes) -> Any:
    import json

    return fastjsonschema.compile(json.loads(schema_bytes))


def validates(schema: dict[str, Any], value: Any) -> bool:
    try:
        _compiled(canonical_bytes(schema))(value)
    except fastjsonschema.JsonSchemaException:
        return False
    return True


def errors(schema: dict[str, Any], value: Any) -> list[dict[str, str]]:
    """Why `value` fails the pinned schema, as `output_validated.errors` (`[]` when it
    validates). The compiled validator stops at the first failure: one error, its JSON path."""
    try:
        _compiled(canonical_bytes(schema))(value)
    except fastjsonschema.JsonSchemaValueException as exc:
        path = "".join(f"/{p}" for p in (exc.path or [])[1:])  # drop the root name "data"
        return [{"message": exc.message, "path": path or "/"}]
    except fastjsonschema.JsonSchemaException as exc:
        return [{"message": str(exc), "path": "/"}]
    return []
