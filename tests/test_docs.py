"""GET /docs: the page, the vendored Scalar bundle it references (byte-identical to what
VENDORED.json records), nothing loaded from elsewhere; served by the function and through the
local gateway; rendered by headless Chromium when Debian's chromium is installed (operation
names of the served contract in the rendered page, with every other host unresolvable)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import shutil
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from helpers.people_dev import people_dev

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "functions" / "docs"
MANIFEST = json.loads((DOCS / "static" / "VENDORED.json").read_text())
BUNDLE = next(n for n in MANIFEST["files"] if n.endswith(".js"))
LAMBDA_PAYLOAD = 6 * 1024 * 1024


def handler() -> Any:
    spec = importlib.util.spec_from_file_location("fn_docs_test", DOCS / "app.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.handler


def get(asset: str | None = None) -> dict[str, Any]:
    event = {
        "path": "/docs" + (f"/{asset}" if asset else ""),
        "pathParameters": {"asset": asset} if asset else None,
    }
    return dict(handler()(event, None))


def test_the_page_references_the_vendored_bundle_and_nothing_remote():
    out = get()
    assert out["statusCode"] == 200 and out["headers"]["Content-Type"].startswith("text/html")
    html = out["body"]
    assert f'<script src="docs/{BUNDLE}"></script>' in html and '<script src="docs/init.js"></script>' in html
    assert not re.search(r"(src|href)=\"(https?:)?//", html)  # relative URLs only: no CDN
    csp = out["headers"]["Content-Security-Policy"]
    assert "default-src 'self'" in csp and "connect-src 'self'" in csp and "script-src 'self';" in csp
    init = get("init.js")
    assert init["statusCode"] == 200 and "createApiReference" in init["body"]
    assert "telemetry: false" in init["body"] and 'url: "openapi.json"' in init["body"]


def test_the_bundle_and_its_license_are_served_as_vendored():
    out = get(BUNDLE)
    assert out["statusCode"] == 200 and out["headers"]["Content-Type"].startswith("application/javascript")
    assert "immutable" in out["headers"]["Cache-Control"]
    assert hashlib.sha256(out["body"].encode()).hexdigest() == MANIFEST["files"][BUNDLE]
    assert "createApiReference" in out["body"]
    # what Lambda returns is this JSON: under its 6 MB response limit, with room to spare
    assert len(json.dumps(out).encode()) < LAMBDA_PAYLOAD * 0.9
    lic = get("LICENSE-scalar-api-reference.txt")
    assert lic["statusCode"] == 200 and "MIT License" in lic["body"] and MANIFEST["version"] in lic["body"]
    missing = get("../app.py")
    assert missing["statusCode"] == 404 and json.loads(missing["body"])["error"]["code"] == "not_found"


def test_vendored_files_match_the_manifest():
    for name, digest in MANIFEST["files"].items():
        assert hashlib.sha256((DOCS / "static" / name).read_bytes()).hexdigest() == digest, name
    script = (REPO / "scripts" / "vendor_docs.py").read_text()
    assert (
        f'VERSION = "{MANIFEST["version"]}"' in script and f'INTEGRITY = "{MANIFEST["integrity"]}"' in script
    )
    assert sorted(p.name for p in (DOCS / "static").iterdir()) == sorted(
        [*MANIFEST["files"], "VENDORED.json", "init.js"]
    )


def fetch(url: str) -> tuple[int, dict[str, str], bytes]:
    with urllib.request.urlopen(url, timeout=60) as r:
        return r.status, dict(r.headers), r.read()


def test_docs_through_the_local_gateway_without_a_token():
    base = people_dev().url
    status, headers, body = fetch(base + "/docs")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert f"docs/{BUNDLE}".encode() in body
    status, headers, body = fetch(f"{base}/docs/{BUNDLE}")
    assert status == 200 and hashlib.sha256(body).hexdigest() == MANIFEST["files"][BUNDLE]
    status, _, body = fetch(base + "/openapi.json")  # what the page renders
    assert status == 200 and json.loads(body)["openapi"].startswith("3.2")


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)")
def test_chromium_renders_the_operations(tmp_path: Path):
    url = people_dev().url + "/docs"
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-default-apps",
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",  # nothing but this host resolves
        f"--user-data-dir={tmp_path / 'profile'}",
        "--virtual-time-budget=20000",
        "--window-size=1280,1400",
    ]
    dom = subprocess.run(
        [str(CHROMIUM), *flags, "--dump-dom", url], capture_output=True, text=True, timeout=180
    ).stdout
    doc = json.loads(fetch(people_dev().url + "/openapi.json")[2])
    summaries = [op["summary"] for item in doc["paths"].values() for op in item.values() if "summary" in op]
    assert summaries and all(s in dom for s in summaries), [s for s in summaries if s not in dom]
    assert "OpenAPI 3.2" in dom and doc["info"]["title"] in dom
    shot = tmp_path / "docs.png"
    subprocess.run([str(CHROMIUM), *flags, f"--screenshot={shot}", url], capture_output=True, timeout=180)
    assert shot.exists() and shot.stat().st_size > 10_000


def test_a_trailing_slash_redirects_to_the_page_whose_relative_urls_resolve():
    """`/docs/` and `/console/` would resolve the pages' relative asset URLs one level down (404):
    the handler answers 301 to the page, relative (so behind a stage prefix too), locally and
    by the functions."""
    app = REPO / "functions" / "console" / "app.py"
    console_spec = importlib.util.spec_from_file_location("fn_console_test", app)
    assert console_spec is not None and console_spec.loader is not None
    console_mod = importlib.util.module_from_spec(console_spec)
    console_spec.loader.exec_module(console_mod)
    for page, fn in (("docs", handler()), ("console", console_mod.handler)):
        out = fn({"path": f"/{page}/", "pathParameters": None}, None)
        assert out["statusCode"] == 301 and out["headers"]["Location"] == f"../{page}", page
        assert urllib.parse.urljoin(f"https://h/prod/{page}/", out["headers"]["Location"]) == f"https://h/prod/{page}"
        assert fn({"path": f"/{page}", "pathParameters": None}, None)["statusCode"] == 200
    base = people_dev().url
    for page, asset in (("docs", "init.js"), ("console", "console.js")):
        with urllib.request.urlopen(f"{base}/{page}/", timeout=60) as r:  # follows the redirect
            assert r.status == 200 and r.url == f"{base}/{page}"
            assert f'src="{page}/{asset}"'.encode() in r.read()
        assert fetch(urllib.parse.urljoin(r.url, f"{page}/{asset}"))[0] == 200
