"""The host's two static pages, `GET /docs` (the served contract rendered by the vendored Scalar
bundle) and `GET /console` (the web console, plain JS): one page plus the assets its function
ships in `static/`, each read once per container.

Public (no authorizer): the pages hold no data. URLs in them are relative, so they work at the
local gateway's root and behind a stage prefix; for that the page must be read at `/docs` or
`/console` exactly: `/docs/` (a trailing slash) would resolve them one level down (404 assets),
so it answers a redirect to the page (a relative Location, stage-agnostic). Standard library
only: the handlers' cold start is the interpreter's (~20 ms), no SDK on this path.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

TYPES = {
    ".js": "application/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
}
HTML = "text/html; charset=utf-8"
# /docs: same-origin; Scalar injects its styles and uses data: URIs for icons (no eval).
DOCS_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "font-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'self'; form-action 'none'"
)
# /console: no inline script or style; the API key never leaves for another origin.
CONSOLE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "frame-ancestors 'none'; base-uri 'self'; form-action 'none'"
)
CONSOLE_ASSETS = ("console.js", "console.css")
IMMUTABLE = "public, max-age=31536000, immutable"  # vendored names carry their version


@cache
def read(static: Path, name: str) -> str:
    return (static / name).read_text(encoding="utf-8")


def response(
    status: int, body: str, content_type: str, *, cache_control: str = "no-cache", csp: str = ""
) -> dict[str, Any]:
    headers = {
        "Content-Type": content_type,
        "Cache-Control": cache_control,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
    }
    if content_type == HTML:
        headers["Content-Security-Policy"] = csp
    return {"statusCode": status, "headers": headers, "body": body, "isBase64Encoded": False}


def not_found(name: str) -> dict[str, Any]:
    body = json.dumps({"error": {"code": "not_found", "message": f"no such asset: {name}"}})
    return response(404, body, "application/json")


def asset_name(event: dict[str, Any]) -> str | None:
    return (event.get("pathParameters") or {}).get("asset")


def to_page(event: dict[str, Any], page: str) -> dict[str, Any] | None:
    """`/<page>/` → 301 to `../<page>` (what `/<page>/` resolves it against is the stage's root)."""
    if not str(event.get("path") or "").endswith("/"):
        return None
    out = response(301, "", "text/plain; charset=utf-8")
    out["headers"]["Location"] = f"../{page}"
    return out


# ------------------------------------------------------------------ /docs
@cache
def docs_manifest(static: Path) -> dict[str, Any]:
    return dict(json.loads(read(static, "VENDORED.json")))


def docs_bundle(static: Path) -> str:
    return next(n for n in docs_manifest(static)["files"] if n.endswith(".js"))


def docs_page(static: Path) -> str:
    m = docs_manifest(static)
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>threads host API reference</title>
</head>
<body>
<noscript>The reference needs JavaScript; the contract is <a href="openapi.json">openapi.json</a>.</noscript>
<div id="app"></div>
<script src="docs/{docs_bundle(static)}"></script>
<script src="docs/init.js"></script>
<!-- {m["package"]} {m["version"]} (MIT): docs/LICENSE-scalar-api-reference.txt -->
</body>
</html>
"""


def docs(event: dict[str, Any], static: Path) -> dict[str, Any]:
    name = asset_name(event)
    if name is None:
        return to_page(event, "docs") or response(200, docs_page(static), HTML, csp=DOCS_CSP)
    if name == "init.js":
        return response(200, read(static, name), TYPES[".js"])
    if name not in docs_manifest(static)["files"]:
        return not_found(name)
    return response(200, read(static, name), TYPES[Path(name).suffix], cache_control=IMMUTABLE)


# ------------------------------------------------------------------ /console
CONSOLE_PAGE = """<!doctype html>
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


def console(event: dict[str, Any], static: Path) -> dict[str, Any]:
    name = asset_name(event)
    if name is None:
        return to_page(event, "console") or response(200, CONSOLE_PAGE, HTML, csp=CONSOLE_CSP)
    if name not in CONSOLE_ASSETS:
        return not_found(name)
    return response(200, read(static, name), TYPES[Path(name).suffix])
