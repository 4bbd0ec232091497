"""GET /console (+ /console/{asset}): the web console (static/: console.js, console.css);
threads_aws.host.static_site serves it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from threads_aws.host.static_site import console

STATIC = Path(__file__).resolve().parent / "static"


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return console(event, STATIC)
