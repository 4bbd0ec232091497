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
