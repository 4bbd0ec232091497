"""Generate `_bodies.py`: compiled validators of the API request bodies, from the served contract
and the same code generator as the line validators (`threads_aws_dev.schema_gen`), so a body is
checked exactly as openapi.json says, with no schema compiled at cold start.

    python -m threads_aws_dev.bodies_gen [SCHEMAS_DIR]

A test fails when the generated module is stale."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from . import schema_gen as g

BODIES = (
    "StartRunRequest",
    "ApprovalDecision",
    "Answer",
    "ParkedResolution",
    "SettingsChange",
    "ModeChange",
    "ForkRequest",
    "SteerRequest",  # ours (add-only): the served contract's additions
    "CancelRequest",
    "StopRequest",
    "RedactRequest",
    "UpdateThreadRequest",
)
_HOST = Path(__file__).resolve().parents[2] / "layers" / "threads_aws" / "threads_aws" / "host"
OUT = _HOST / "_bodies.py"


SERVED = _HOST / "openapi.json"


def generate(schemas_dir: Path | None = None) -> str:
    """From the served contract (schemas/openapi.json plus what is ours, add-only), or from
    `schemas_dir`/openapi.json when given."""
    source = schemas_dir / "openapi.json" if schemas_dir else SERVED
    openapi = json.loads(source.read_text())
    defs = g._rewrite(_without_extensions(openapi["components"]["schemas"]))
    defs["events_JsonValue"] = {}  # any JSON value: the body already parsed as JSON
    gen = g.Gen(defs)
    for name in BODIES:
        gen.root(name, {"$ref": f"#/definitions/{name}"})
    return g.module(
        "threads_aws_dev.bodies_gen from the served host/openapi.json",
        "..core._schema_rt",
        gen,
        "BODY_VALIDATORS",
        {n: f"validate_{n}" for n in BODIES},
    )


# Keywords the code generator has no rule for, each checked by the route itself instead:
# UpdateThreadRequest.metadata's key pattern (`host.thread_meta.patch_body`).
_HOST_CHECKED = ("propertyNames",)


def _without_extensions(node: object) -> object:
    """The schemas without `x-*` annotations (`x-threads-aws: ours` marks our additions), nor
    the keywords the host checks itself (_HOST_CHECKED)."""
    if isinstance(node, dict):
        return {
            k: _without_extensions(v)
            for k, v in node.items()
            if not k.startswith("x-") and k not in _HOST_CHECKED
        }
    if isinstance(node, list):
        return [_without_extensions(v) for v in node]
    return node


def main(argv: list[str]) -> int:
    OUT.write_text(generate(Path(argv[0]) if argv else None))
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
