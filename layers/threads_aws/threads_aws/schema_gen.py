"""Generate `_validators.py`: compiled line validators derived from the contract.

`python -m threads_aws.schema_gen [SCHEMAS_DIR]` rewrites the module; a test checks it is fresh.
The contract's event schemas (openapi.json, components.schemas.events_*) are compiled with
fastjsonschema into plain Python, one entry point per event type (envelope + that type's data),
so a line is checked by one dict lookup and one straight-line function, and no schema is compiled
at Lambda cold start.

Rewrites, each preserving meaning:
- `$ref` with sibling keywords becomes `allOf` (draft-07 compilers ignore siblings of `$ref`);
- `JsonValue` accepts anything: a line that passed admission is already a JSON value, and
  the contract's six-way `oneOf` would only cost time;
- a pattern's final `$` becomes `\\Z`: ECMA `$` does not match before a trailing newline,
  Python's does.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import fastjsonschema

PREFIX = "#/components/schemas/"
HERE = Path(__file__).resolve().parent
OUT = HERE / "_validators.py"


def _default_schemas_dir() -> Path:
    return HERE.parents[2] / "schemas"


def _rewrite(node: Any) -> Any:
    if isinstance(node, list):
        return [_rewrite(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: _rewrite(v) for k, v in node.items()}
    ref = out.get("$ref")
    if isinstance(ref, str):
        out["$ref"] = ref = "#/definitions/" + ref[len(PREFIX):] if ref.startswith(PREFIX) else ref
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
        name = alt["$ref"][len(PREFIX):]
        names[schemas[name]["properties"]["type"]["const"]] = name
    return names


def _function_blocks(code: str) -> tuple[str, dict[str, str]]:
    """Split generated code into its preamble and top-level `def` blocks by name."""
    parts = re.split(r"(?m)^(?=def )", code)
    blocks: dict[str, str] = {}
    for part in parts[1:]:
        name = part[4:part.index("(")]
        blocks[name] = part
    return parts[0], blocks


def _strip_definitions(code: str) -> str:
    """Drop the schema literals fastjsonschema embeds in every raise: they are most of the
    module's size and cold-start cost, and callers only need the message."""
    out: list[str] = []
    i = 0
    marker = "definition={"
    while True:
        j = code.find(marker, i)
        if j < 0:
            out.append(code[i:])
            return "".join(out)
        out.append(code[i:j] + "definition=None")
        k, depth, quote = j + len(marker) - 1, 0, ""
        while True:
            ch = code[k]
            if quote:
                if ch == "\\":
                    k += 1
                elif ch == quote:
                    quote = ""
            elif ch in "'\"":
                quote = ch
            elif ch in "{[(":
                depth += 1
            elif ch in "}])":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        i = k + 1


def generate(schemas_dir: Path | None = None) -> str:
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
        roots["ev_" + type_name] = {"allOf": [{"$ref": "#/definitions/events_Envelope"}, {"$ref": f"#/definitions/{schema_name}"}]}
    for kind in ("header", "head"):
        roots[kind] = _rewrite(json.loads((sdir / f"{kind}.schema.json").read_text()))
        roots[kind].pop("$id", None)
        roots[kind].pop("$schema", None)

    preamble = ""
    blocks: dict[str, str] = {}
    regexes: dict[str, str] = {}
    for root_name, root in roots.items():
        code = fastjsonschema.compile_to_code({**root, "definitions": defs})
        pre, found = _function_blocks(code)
        m = re.search(r"REGEX_PATTERNS = (\{.*?\})\n", pre, re.S)
        if m:
            regexes.update(eval(m.group(1), {"re": re}))  # noqa: S307 - our own generated literal
        preamble = preamble or re.sub(r"REGEX_PATTERNS = \{.*?\}\n", "", pre, flags=re.S)
        for name, block in found.items():
            if name == "validate":
                name, block = f"validate_{root_name}", block.replace("def validate(", f"def validate_{root_name}(", 1)
            blocks.setdefault(name, block)
    regex_src = "{\n" + "".join(f"    {k!r}: re.compile({v.pattern!r}),\n" for k, v in sorted(regexes.items())) + "}\n"
    table = "".join(f"    {t!r}: validate_ev_{t},\n" for t in types)
    return (
        "# Generated by threads_aws.schema_gen from schemas/*.json. Do not edit.\n"
        "# ruff: noqa\n"
        + preamble.rstrip() + "\n\nREGEX_PATTERNS = " + regex_src + "\n\n"
        + "".join(_strip_definitions(blocks[k]).rstrip() + "\n\n\n" for k in sorted(blocks))
        + "\n\nEVENT_VALIDATORS = {\n" + table + "}\n"
    )


def main(argv: list[str]) -> int:
    sdir = Path(argv[0]) if argv else None
    OUT.write_text(generate(sdir))
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
