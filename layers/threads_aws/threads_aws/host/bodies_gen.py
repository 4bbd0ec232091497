"""Generate `_bodies.py`: compiled validators of the API request bodies, from the same contract
and the same code generator as the line validators (`threads_aws.schema_gen`), so a body is
checked exactly as openapi.json says, with no schema compiled at cold start.

    python -m threads_aws.host.bodies_gen [SCHEMAS_DIR]

A test fails when the generated module is stale."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .. import schema_gen as g

BODIES = (
    "StartRunRequest",
    "ApprovalDecision",
    "Answer",
    "ParkedResolution",
    "SettingsChange",
    "ModeChange",
    "ForkRequest",
)
OUT = Path(__file__).resolve().parent / "_bodies.py"


def generate(schemas_dir: Path | None = None) -> str:
    sdir = schemas_dir or g._default_schemas_dir()
    openapi = json.loads((sdir / "openapi.json").read_text())
    defs = g._rewrite(openapi["components"]["schemas"])
    defs["events_JsonValue"] = {}  # any JSON value: the body already parsed as JSON
    gen = g.Gen(defs)
    for name in BODIES:
        gen.root(name, {"$ref": f"#/definitions/{name}"})
    return g.module(
        "threads_aws.host.bodies_gen from schemas/openapi.json",
        "..core._schema_rt",
        gen,
        "BODY_VALIDATORS",
        {n: f"validate_{n}" for n in BODIES},
    )


def main(argv: list[str]) -> int:
    OUT.write_text(generate(Path(argv[0]) if argv else None))
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
