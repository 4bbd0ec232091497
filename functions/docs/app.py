"""GET /docs (+ /docs/{asset}): an interactive reference of the served contract (/openapi.json),
rendered in the browser by the vendored Scalar bundle (static/, from scripts/vendor_docs.py).

Public like /openapi.json (no authorizer). Only the files VENDORED.json lists (and init.js) are
served; each is read once per container. URLs in the page are relative, so the same page works
at the local gateway's /docs and behind a stage prefix (/dev/docs). Standard library only: no
layer import, no SDK on this path.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

STATIC = Path(__file__).resolve().parent / "static"
TYPES = {".js": "application/javascript; charset=utf-8", ".txt": "text/plain; charset=utf-8"}
# Same-origin only: the contract, the bundle and "Test Request" calls to this host. Scalar
# injects its styles and uses data: URIs for icons; it needs no eval.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "font-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'self'; form-action 'none'"
)


@cache
def _manifest() -> dict[str, Any]:
    return dict(json.loads((STATIC / "VENDORED.json").read_text()))


@cache
def _asset(name: str) -> str:
    return (STATIC / name).read_text(encoding="utf-8")


def bundle_name() -> str:
    return next(n for n in _manifest()["files"] if n.endswith(".js"))


def page() -> str:
    m = _manifest()
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
<script src="docs/{bundle_name()}"></script>
<script src="docs/init.js"></script>
<!-- {m["package"]} {m["version"]} (MIT): docs/LICENSE-scalar-api-reference.txt -->
</body>
</html>
"""


def _response(status: int, body: str, content_type: str, cache_control: str) -> dict[str, Any]:
    headers = {
        "Content-Type": content_type,
        "Cache-Control": cache_control,
        "X-Content-Type-Options": "nosniff",
    }
    if content_type.startswith("text/html"):
        headers["Content-Security-Policy"] = CSP
    return {"statusCode": status, "headers": headers, "body": body, "isBase64Encoded": False}


def _not_found(name: str) -> dict[str, Any]:
    body = json.dumps({"error": {"code": "not_found", "message": f"no such asset: {name}"}})
    return _response(404, body, "application/json", "no-cache")


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    name = (event.get("pathParameters") or {}).get("asset")
    if name is None:
        return _response(200, page(), "text/html; charset=utf-8", "no-cache")
    if name == "init.js":
        return _response(200, _asset(name), TYPES[".js"], "no-cache")
    if name not in _manifest()["files"]:
        return _not_found(name)
    # The vendored names carry their version: a browser keeps them for good.
    return _response(200, _asset(name), TYPES[Path(name).suffix], "public, max-age=31536000, immutable")
