"""Vendor the API reference renderer served at GET /docs (functions/docs/static/).

    python scripts/vendor_docs.py            # the pinned version below
    python scripts/vendor_docs.py --check    # only verify the vendored files against the manifest

The bundle comes from the npm registry through the ordinary client (`npm pack`), at build time,
never at run time: the tarball's integrity must equal the pin below, then its standalone browser
bundle is copied as `api-reference-<version>.js` with the package's license, and
`VENDORED.json` records what was taken (a test checks the files still hash to it).

Scalar renders OpenAPI 3.2 (our served contract) without the dialect warning Swagger UI shows.
Its package ships no LICENSE file: the license is MIT by its package.json, and the MIT text
with the package's author line is written beside the bundle.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

PACKAGE = "@scalar/api-reference"
VERSION = "1.76.0"
INTEGRITY = "sha512-pjqwnzmA9YK3ZX+IZSICMsywm4qI6HLSngR2py9H6TvFApHHuJjkTAd+gFJfnqJDzJuro8k7ji6JCtJ2U+Byng=="
MEMBER = "package/dist/browser/standalone.js"
STATIC = Path(__file__).resolve().parents[1] / "functions" / "docs" / "static"
BUNDLE = f"api-reference-{VERSION}.js"
LICENSE = "LICENSE-scalar-api-reference.txt"

MIT = """MIT License

{holder}

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
"""


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fetch(tmp: Path) -> Path:
    out = subprocess.run(
        ["npm", "pack", f"{PACKAGE}@{VERSION}", "--json", "--pack-destination", str(tmp)],
        check=True,
        capture_output=True,
        text=True,
    )
    (info,) = json.loads(out.stdout)
    tarball = tmp / info["filename"]
    algo, _, want = INTEGRITY.partition("-")
    got = base64.b64encode(hashlib.new(algo, tarball.read_bytes()).digest()).decode()
    if got != want:
        sys.exit(f"{tarball.name}: integrity {algo}-{got} is not the pinned {INTEGRITY}")
    return tarball


def vendor() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tarball = fetch(Path(tmp))
        with tarfile.open(tarball) as tar:
            bundle = tar.extractfile(MEMBER).read()  # type: ignore[union-attr]
            pkg = json.loads(tar.extractfile("package/package.json").read())  # type: ignore[union-attr]
    if pkg.get("license") != "MIT":
        sys.exit(
            f"{PACKAGE}@{VERSION}: license {pkg.get('license')!r}, expected MIT (review before vendoring)"
        )
    STATIC.mkdir(parents=True, exist_ok=True)
    for old in STATIC.glob("api-reference-*.js"):
        old.unlink()
    (STATIC / BUNDLE).write_bytes(bundle)
    holder = f"Copyright (c) {pkg.get('author', 'Scalar')}"
    license_text = (
        f"{PACKAGE} {VERSION} ({BUNDLE}, from {MEMBER} of the npm package)\n"
        f"License: {pkg['license']} (package.json); the package ships no LICENSE file.\n\n"
        + MIT.format(holder=holder)
    )
    (STATIC / LICENSE).write_text(license_text)
    manifest = {
        "package": PACKAGE,
        "version": VERSION,
        "integrity": INTEGRITY,
        "member": MEMBER,
        "files": {BUNDLE: sha256(bundle), LICENSE: sha256(license_text.encode())},
    }
    (STATIC / "VENDORED.json").write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"vendored {PACKAGE}@{VERSION}: {BUNDLE} ({len(bundle):,} bytes)")


def check() -> int:
    manifest = json.loads((STATIC / "VENDORED.json").read_text())
    bad = [n for n, h in manifest["files"].items() if sha256((STATIC / n).read_bytes()) != h]
    for name in bad:
        print(f"{name}: differs from VENDORED.json", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="verify the vendored files, fetch nothing")
    if ap.parse_args().check:
        sys.exit(check())
    vendor()
