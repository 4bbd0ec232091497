"""Generate `_validators.py`: compiled line validators derived from the contract.

`python -m threads_aws_dev.schema_gen [SCHEMAS_DIR]` rewrites the module; a test checks it is fresh.
The contract's event schemas (openapi.json, components.schemas.events_*) are compiled by the small
code generator below into straight-line Python, one entry point per event type (envelope + that
type's data), so a line is checked by one dict lookup and one function, and no schema is compiled
at Lambda cold start. The generated module imports nothing but `re` and `sys`.

Rewrites, each preserving meaning:
- `$ref` with sibling keywords becomes `allOf` (draft-07 compilers ignore siblings of `$ref`);
- `JsonValue` accepts anything: a line that passed admission is already a JSON value, and
  the contract's six-way `oneOf` would only cost time;
- a pattern's final `$` becomes `\\Z`: ECMA `$` does not match before a trailing newline,
  Python's does.

Semantics are draft-07 as fastjsonschema implements them (tests/test_schema_codegen.py checks the
two agree on the conformance corpus and thousands of mutants): `integer` is an int or a float
with no fractional part, never a bool; `number` is int/float/Decimal, never a bool; `const 1`
rejects `True` and `const true` rejects `1`; `pattern` is a search; keywords of another type are
ignored (`properties` on a string passes).

How the code is specialised:
- every `allOf` (and every inlined `$ref`) is merged into one conjunction per value, so an
  object is checked once: one `isinstance`, the required keys loaded in one `try` (a KeyError is
  the failure), `additionalProperties: false` as `len(d) == required + present optional keys`,
  then a check per present property;
- small definitions are inlined at their use site; large or recursive ones become functions
  (`_v_<Name>` raises, `_ok_<Name>` returns a bool);
- a property that is pinned by a string/bool/int `const` and whose other constraints the const
  satisfies is checked by the const alone;
- `if`/`not`/`anyOf`/`oneOf` branches compile to boolean expressions (or `_ok_n` functions
  when a branch needs statements), never to exceptions; a `oneOf` whose branches are objects
  that all require a key pinned by distinct string consts (the Part unions) dispatches on it;
  a `oneOf` of branches with disjoint types is an `or`;
- anchored patterns `^X\\Z` without a top-level `|` become `fullmatch(X)`;
- in the line validators, an object's required properties that are only such a pattern (ids,
  hashes: four or five per event envelope) are first proven valid together, by one `fullmatch`
  of their values joined by newlines (none of these patterns can match one); only when that
  fails does each property's own check run, in its usual place, to name the failure.
Keywords outside the set this contract uses raise NotImplementedError at generation time.

This module loads the contract and writes the module; the compiler is `codegen/` (`nodes`:
normalisation, `exprs`: boolean expressions, `emit`: statements and `Gen`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from .codegen.emit import Gen
from .codegen.nodes import Node

__all__ = ["OUT", "Gen", "Node", "event_types", "generate", "load", "main", "module"]

PREFIX = "#/components/schemas/"
HERE = Path(__file__).resolve().parent
# The generated module belongs to the runtime package (repo/layers/threads_aws/threads_aws).
REPO = HERE.parents[1]
OUT = REPO / "layers" / "threads_aws" / "threads_aws" / "core" / "_validators.py"


def _default_schemas_dir() -> Path:
    return REPO / "schemas"


def _rewrite(node: Any) -> Any:
    if isinstance(node, list):
        return [_rewrite(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: _rewrite(v) for k, v in node.items()}
    ref = out.get("$ref")
    if isinstance(ref, str):
        out["$ref"] = ref = "#/definitions/" + ref[len(PREFIX) :] if ref.startswith(PREFIX) else ref
        siblings = {k: v for k, v in out.items() if k != "$ref"}
        if siblings:
            out = {**siblings, "allOf": [{"$ref": ref}, *siblings.get("allOf", [])]}
    pat = out.get("pattern")
    if isinstance(pat, str) and pat.endswith("$") and not pat.endswith("\\$"):
        out["pattern"] = pat[:-1] + "\\Z"
    return out


def event_types(openapi: dict[str, Any]) -> dict[str, str]:
    """type name -> schema name, from the oneOf of events_Event."""
    schemas = openapi["components"]["schemas"]
    names: dict[str, str] = {}
    for alt in schemas["events_Event"]["allOf"][1]["oneOf"]:
        name = alt["$ref"][len(PREFIX) :]
        names[schemas[name]["properties"]["type"]["const"]] = name
    return names


def load(schemas_dir: Path | None = None) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """(definitions, root schemas by entry name, event type -> schema name), all rewritten.
    Entry names: envelope, header, head, ev_<type>. The differential test compiles the same
    roots with fastjsonschema."""
    sdir = schemas_dir or _default_schemas_dir()
    openapi = json.loads((sdir / "openapi.json").read_text())
    defs = _rewrite(openapi["components"]["schemas"])
    defs["events_JsonValue"] = {}
    roots: dict[str, Any] = {"envelope": {"$ref": "#/definitions/events_Envelope"}}
    types = event_types(openapi)
    extra = json.loads((sdir / "events-extra.schema.json").read_text())["definitions"]
    for name, schema in extra.items():
        defs[name] = _rewrite(schema)
        types[schema["properties"]["type"]["const"]] = name
    for type_name, schema_name in types.items():
        roots["ev_" + type_name] = {
            "allOf": [{"$ref": "#/definitions/events_Envelope"}, {"$ref": f"#/definitions/{schema_name}"}]
        }
    for kind in ("header", "head"):
        roots[kind] = _rewrite(json.loads((sdir / f"{kind}.schema.json").read_text()))
        roots[kind].pop("$id", None)
        roots[kind].pop("$schema", None)
    return defs, roots, types


RUNTIME_NAMES = ("SchemaError", "_idx", "_is_frac", "_is_int", "_is_num", "_num_eq")


def module(header: str, runtime_from: str, gen: Gen, table_name: str, table: dict[str, str]) -> str:
    """A generated validator module: header, runtime import, constants, functions, entry table.
    Both generated modules (`_validators`, `host/_bodies`) share `_schema_rt` (one SchemaError)."""
    entries = "".join(f"    {k!r}: {v},\n" for k, v in table.items())
    return (
        f"# Generated by {header}. Do not edit.\n"
        "# ruff: noqa\n"
        "import re\n\n"
        f"from {runtime_from} import {', '.join(RUNTIME_NAMES)}\n"
        "\n\n"
        + "\n".join(gen.const_lines)
        + "\n\n\n"
        + "".join(gen.funcs[k] + "\n\n\n" for k in sorted(gen.funcs))
        + f"{table_name} = {{\n"
        + entries
        + "}\n"
    )


def generate(schemas_dir: Path | None = None) -> str:
    defs, roots, types = load(schemas_dir)
    gen = Gen(defs, batch_patterns=True)
    for entry, schema in roots.items():
        gen.root(entry, schema)
    return module(
        "threads_aws_dev.schema_gen from schemas/*.json",
        "._schema_rt",
        gen,
        "EVENT_VALIDATORS",
        {t: f"validate_ev_{t}" for t in types},
    )


def main(argv: list[str]) -> int:
    sdir = Path(argv[0]) if argv else None
    OUT.write_text(generate(sdir))
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
