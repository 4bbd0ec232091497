"""GET /docs (+ /docs/{asset}): the served contract rendered by the vendored Scalar bundle in
static/ (from scripts/vendor_docs.py); threads_aws.host.static_site serves it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from threads_aws.host.static_site import docs

STATIC = Path(__file__).resolve().parent / "static"


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return docs(event, STATIC)
