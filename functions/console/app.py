"""GET /console (+ /console/{asset}): the web console, a small single-page app in plain modern
JavaScript (static/: console.js, console.css; no build step, nothing fetched from elsewhere).

Public like /docs: the page holds no data. It asks for an API key, keeps it in the tab's
sessionStorage and sends it as the bearer token on every API call, which the authorizer checks
as for any client. URLs in the page are relative (`console/console.js`, `v1/threads`), so it
works at the local gateway's /console and behind a stage prefix (/dev/console). Standard library
only: no layer import on this path.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

STATIC = Path(__file__).resolve().parent / "static"
TYPES = {".js": "application/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
ASSETS = ("console.js", "console.css")
# Same-origin only, no inline script or style: the API key never leaves for another origin.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "frame-ancestors 'none'; base-uri 'self'; form-action 'none'"
)

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>threads console</title>
<link rel="stylesheet" href="console/console.css">
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="bar">
  <a class="brand" href="#/">threads</a>
  <nav aria-label="Main"><a href="#/">Threads</a> <a href="docs">API reference</a></nav>
  <button type="button" id="signout" hidden>Sign out</button>
</header>
<main id="main" tabindex="-1">
  <noscript>The console needs JavaScript. The API itself is described at <a href="docs">docs</a>.</noscript>
</main>
<div id="toast" role="status" aria-live="polite"></div>
<script src="console/console.js"></script>
</body>
</html>
"""


@cache
def _asset(name: str) -> str:
    return (STATIC / name).read_text(encoding="utf-8")


def _response(status: int, body: str, content_type: str) -> dict[str, Any]:
    headers = {
        "Content-Type": content_type,
        "Cache-Control": "no-cache",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
    }
    if content_type.startswith("text/html"):
        headers["Content-Security-Policy"] = CSP
    return {"statusCode": status, "headers": headers, "body": body, "isBase64Encoded": False}


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    name = (event.get("pathParameters") or {}).get("asset")
    if name is None:
        return _response(200, PAGE, "text/html; charset=utf-8")
    if name not in ASSETS:
        body = json.dumps({"error": {"code": "not_found", "message": f"no such asset: {name}"}})
        return _response(404, body, "application/json")
    return _response(200, _asset(name), TYPES[Path(name).suffix])
