"""Generate `_validators.py`: compiled line validators derived from the contract.

`python -m threads_aws.schema_gen [SCHEMAS_DIR]` rewrites the module; a test checks it is fresh.
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
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PREFIX = "#/components/schemas/"
DEF_PREFIX = "#/definitions/"
HERE = Path(__file__).resolve().parent
OUT = HERE / "core" / "_validators.py"

INLINE_MAX = 40  # inline a $ref whose expanded schema has at most this many subschemas
ANNOTATIONS = frozenset({"description", "title", "$id", "$schema", "$comment", "examples", "deprecated"})
ATOMS = {
    "null": {"null"},
    "boolean": {"boolean"},
    "integer": {"int"},
    "number": {"int", "frac"},
    "string": {"string"},
    "array": {"array"},
    "object": {"object"},
}
ALL_ATOMS = frozenset({"null", "boolean", "int", "frac", "string", "array", "object"})
DOLLAR_FINDER = re.compile(r"(?<!\\)\$")  # as fastjsonschema: every unescaped `$` -> `\Z`


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


# --------------------------------------------------------------------------- normalised nodes
Sub = tuple[Any, tuple[str, ...]]  # (schema, names of definitions being inlined: recursion guard)


@dataclass
class Node:
    """The conjunction of every keyword that applies to one value (allOf and $ref merged)."""

    false: bool = False
    types: frozenset[str] | None = None  # atoms; None = any
    consts: list[Any] = field(default_factory=list)
    enums: list[list[Any]] = field(default_factory=list)
    props: dict[str, list[Sub]] = field(default_factory=dict)
    required: set[str] = field(default_factory=set)
    allowed: frozenset[str] | None = None  # additionalProperties false: keys must be in this
    addl: list[tuple[frozenset[str], Sub]] = field(default_factory=list)
    min_props: int | None = None
    max_props: int | None = None
    items: list[Sub] = field(default_factory=list)
    min_items: int | None = None
    max_items: int | None = None
    min_len: int | None = None
    max_len: int | None = None
    patterns: list[str] = field(default_factory=list)
    minimum: int | float | None = None
    maximum: int | float | None = None
    any_of: list[list[Sub]] = field(default_factory=list)
    one_of: list[list[Sub]] = field(default_factory=list)
    nots: list[Sub] = field(default_factory=list)
    ites: list[tuple[Sub, Sub | None, Sub | None]] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)

    def has_object(self) -> bool:
        return bool(
            self.props
            or self.required
            or self.allowed is not None
            or self.addl
            or self.min_props is not None
            or self.max_props is not None
        )

    def has_array(self) -> bool:
        return bool(self.items or self.min_items is not None or self.max_items is not None)

    def has_string(self) -> bool:
        return bool(self.min_len is not None or self.max_len is not None or self.patterns)

    def has_number(self) -> bool:
        return self.minimum is not None or self.maximum is not None

    def has_combinators(self) -> bool:
        return bool(self.any_of or self.one_of or self.nots or self.ites or self.calls)

    def trivial(self) -> bool:
        return not (
            self.false
            or self.types is not None
            or self.consts
            or self.enums
            or self.has_object()
            or self.has_array()
            or self.has_string()
            or self.has_number()
            or self.has_combinators()
        )


def _json_type_atom(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "int" if value.is_integer() else "frac"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _const_eq(value: Any, c: Any) -> bool:
    """fastjsonschema's const/enum match, for scalars."""
    if isinstance(c, bool) or c is None:
        return value is c
    if isinstance(c, (int, float)):
        return isinstance(value, (int, float)) and not isinstance(value, bool) and value == c
    if isinstance(c, str):
        return isinstance(value, str) and value == c
    raise NotImplementedError(f"const/enum of {type(c).__name__}")


def _fullmatch_inner(pattern: str) -> str | None:
    """X if `pattern` is `^X\\Z` and search(pattern) == fullmatch(X) for every string."""
    if not (pattern.startswith("^") and pattern.endswith("\\Z")) or pattern.endswith("\\\\Z"):
        return None
    try:
        from re import _parser as sre_parse  # type: ignore[attr-defined]
    except ImportError:  # pragma: no cover - Python < 3.11
        import sre_parse  # type: ignore[no-redef]
    parsed = sre_parse.parse(pattern)
    data = list(parsed.data)
    at = sre_parse.AT
    if (
        len(data) >= 2
        and data[0] == (at, sre_parse.AT_BEGINNING)
        and data[-1] == (at, sre_parse.AT_END_STRING)
        and not parsed.state.flags & ~re.UNICODE
    ):
        return pattern[1:-2]
    return None


# --------------------------------------------------------------------------- code builder
class Code:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, ind: int, line: str) -> None:
        self.lines.append("    " * ind + line)


Path_ = tuple[Any, ...]  # segments: ".key", ("key", key_var) or ("idx", array_var, item_var)


def _path_expr(path: Path_) -> str:
    if all(isinstance(p, str) for p in path):
        return repr("".join(path))
    parts = []
    for p in path:
        if isinstance(p, str):
            parts.append(p.replace("{", "{{").replace("}", "}}"))
        elif p[0] == "key":
            parts.append(f".{{{p[1]}}}")
        else:
            parts.append(f"[{{_idx({p[1]}, {p[2]})}}]")
    return 'f"' + "".join(parts).replace('"', '\\"') + '"'


_BATCHABLE = re.compile(r"[\[\]{},0-9A-Za-z_-]+")  # classes, ranges, counts: none can match "\n"


class Gen:
    def __init__(self, defs: dict[str, Any], *, batch_patterns: bool = False) -> None:
        self.defs = defs
        self.batch_patterns = batch_patterns
        self.batch_consts: dict[str, str] = {}
        self.batch_flags = 0
        self.consts: dict[str, str] = {}  # source -> name
        self.const_lines: list[str] = []
        self.funcs: dict[str, str] = {}  # name -> code
        self.pending: list[tuple[str, str]] = []  # (kind, def name)
        self.helpers: dict[str, str] = {}  # memo key -> function name
        self.n = 0
        self._sizes: dict[str, int] = {}

    # ---- naming
    def var(self, prefix: str = "v") -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def const(self, src: str, prefix: str) -> str:
        if src not in self.consts:
            name = f"_{prefix}{len(self.consts) + 1}"
            self.consts[src] = name
            self.const_lines.append(f"{name} = {src}")
        return self.consts[src]

    def frozen(self, items: Any, prefix: str = "K") -> str:
        return self.const("frozenset({" + ", ".join(repr(x) for x in sorted(items)) + "})", prefix)

    @staticmethod
    def short(name: str) -> str:
        return name[len("events_") :] if name.startswith("events_") else name

    # ---- normalisation
    def size(self, name: str, stack: tuple[str, ...] = ()) -> int:
        if name in self._sizes:
            return self._sizes[name]
        if name in stack:
            return 10**6

        def count(node: Any) -> int:
            if isinstance(node, list):
                return sum(count(x) for x in node)
            if not isinstance(node, dict):
                return 0
            total = 1
            for k, v in node.items():
                if k == "$ref":
                    total += self.size(self._ref_name(v), (*stack, name))
                elif k == "properties":
                    total += sum(count(x) for x in v.values())
                elif k not in ANNOTATIONS and k not in ("enum", "const", "required"):
                    total += count(v)
            return total

        result = count(self.defs[name])
        self._sizes[name] = result
        return result

    @staticmethod
    def _ref_name(ref: str) -> str:
        if not ref.startswith(DEF_PREFIX):
            raise NotImplementedError(f"$ref {ref!r}")
        return ref[len(DEF_PREFIX) :]

    def node(self, subs: list[Sub], force: bool = False) -> Node:
        n = Node()
        for schema, stack in subs:
            self._collect(schema, n, stack, force)
        return n

    def _collect(self, s: Any, n: Node, stack: tuple[str, ...], force: bool = False) -> None:
        if s is True:
            return
        if s is False:
            n.false = True
            return
        if not isinstance(s, dict):
            raise NotImplementedError(f"schema {s!r}")
        for k, val in s.items():
            if k in ANNOTATIONS or k in ("then", "else"):
                continue
            if k == "$ref":
                name = self._ref_name(val)
                if force or (name not in stack and self.size(name) <= INLINE_MAX):
                    self._collect(self.defs[name], n, (*stack, name))
                else:
                    n.calls.append(name)
            elif k == "type":
                atoms = frozenset().union(*(ATOMS[t] for t in ([val] if isinstance(val, str) else val)))
                n.types = atoms if n.types is None else n.types & atoms
            elif k == "const":
                n.consts.append(val)
            elif k == "enum":
                n.enums.append(list(val))
            elif k == "properties":
                for pk, ps in val.items():
                    n.props.setdefault(pk, []).append((ps, stack))
            elif k == "required":
                n.required |= set(val)
            elif k == "additionalProperties":
                if "patternProperties" in s:
                    raise NotImplementedError("patternProperties")
                own = frozenset(s.get("properties", {}))
                if val is False:
                    n.allowed = own if n.allowed is None else n.allowed & own
                elif not self.node([(val, stack)]).trivial():
                    n.addl.append((own, (val, stack)))
            elif k in ("minProperties", "minItems", "minLength"):
                attr = {"minProperties": "min_props", "minItems": "min_items", "minLength": "min_len"}[k]
                old = getattr(n, attr)
                setattr(n, attr, val if old is None else max(old, val))
            elif k in ("maxProperties", "maxItems", "maxLength"):
                attr = {"maxProperties": "max_props", "maxItems": "max_items", "maxLength": "max_len"}[k]
                old = getattr(n, attr)
                setattr(n, attr, val if old is None else min(old, val))
            elif k == "minimum":
                n.minimum = val if n.minimum is None else max(n.minimum, val)
            elif k == "maximum":
                n.maximum = val if n.maximum is None else min(n.maximum, val)
            elif k == "pattern":
                n.patterns.append(val)
            elif k == "items":
                if not isinstance(val, (dict, bool)):
                    raise NotImplementedError("items as a list (tuple validation)")
                n.items.append((val, stack))
            elif k == "allOf":
                for sub in val:
                    self._collect(sub, n, stack, force)
            elif k == "anyOf":
                n.any_of.append([(sub, stack) for sub in val])
            elif k == "oneOf":
                n.one_of.append([(sub, stack) for sub in val])
            elif k == "not":
                n.nots.append((val, stack))
            elif k == "if":
                then = (s["then"], stack) if "then" in s else None
                other = (s["else"], stack) if "else" in s else None
                if then is not None or other is not None:
                    n.ites.append(((val, stack), then, other))
            else:
                raise NotImplementedError(f"keyword {k!r}")

    # ---- static evaluation (const simplification)
    def _static_ok(self, n: Node, value: Any) -> bool | None:
        """Whether `value` satisfies every scalar constraint of n; None if n is not scalar-only."""
        if n.has_object() or n.has_array() or n.has_combinators() or n.false:
            return None
        atom = _json_type_atom(value)
        if n.types is not None and atom not in n.types:
            return False
        if not all(_const_eq(value, c) for c in n.consts):
            return False
        if not all(any(_const_eq(value, e) for e in en) for en in n.enums):
            return False
        if isinstance(value, str):
            if n.min_len is not None and len(value) < n.min_len:
                return False
            if n.max_len is not None and len(value) > n.max_len:
                return False
            if any(not re.search(DOLLAR_FINDER.sub(r"\\Z", p), value) for p in n.patterns):
                return False
        if atom in ("int", "frac"):
            if n.minimum is not None and value < n.minimum:
                return False
            if n.maximum is not None and value > n.maximum:
                return False
        return True

    def _const_only(self, n: Node) -> Any:
        """The pinning const if n reduces to it, else a sentinel."""
        for c in n.consts:
            if isinstance(c, (str, bool)) or c is None or (isinstance(c, int) and not isinstance(c, bool)):
                values = [c, float(c)] if isinstance(c, int) and not isinstance(c, bool) else [c]
                if all(self._static_ok(n, x) for x in values):
                    return c
        return _NO

    # ---- expressions
    def type_expr(self, atoms: frozenset[str], v: str) -> str:
        parts = []
        if "object" in atoms:
            parts.append(f"isinstance({v}, dict)")
        if "array" in atoms:
            parts.append(f"isinstance({v}, (list, tuple))")
        if "string" in atoms:
            parts.append(f"isinstance({v}, str)")
        if "int" in atoms and "frac" in atoms:
            parts.append(f"type({v}) is int or _is_num({v})")
        elif "int" in atoms:
            parts.append(f"type({v}) is int or _is_int({v})")
        elif "frac" in atoms:
            parts.append(f"_is_frac({v})")
        if "boolean" in atoms:
            parts.append(f"{v} is True or {v} is False")
        if "null" in atoms:
            parts.append(f"{v} is None")
        if not parts:
            return "False"
        if len(parts) == 1 and " or " not in parts[0]:
            return parts[0]
        return "(" + " or ".join(parts) + ")"

    @staticmethod
    def const_expr(c: Any, v: str) -> str:
        if c is True or c is False or c is None:
            return f"{v} is {c!r}"
        if isinstance(c, str):
            return f"{v} == {c!r}"
        if isinstance(c, (int, float)):
            return f"(type({v}) is int and {v} == {c!r} or _num_eq({v}, {c!r}))"
        raise NotImplementedError(f"const/enum of {type(c).__name__}")

    def enum_expr(self, values: list[Any], v: str) -> str:
        if values and all(isinstance(x, str) for x in values) and len(values) > 1:
            return f"(isinstance({v}, str) and {v} in {self.frozen(values, 'E')})"
        if not values:
            return "False"
        return "(" + " or ".join(self.const_expr(x, v) for x in values) + ")"

    def regex(self, pattern: str) -> tuple[str, str]:
        """(compiled-regex constant, method) for a schema pattern."""
        pat = DOLLAR_FINDER.sub(r"\\Z", pattern)
        inner = _fullmatch_inner(pat)
        if inner is not None:
            return self.const(f"re.compile({inner!r})", "RE"), "fullmatch"
        return self.const(f"re.compile({pat!r})", "RE"), "search"

    @staticmethod
    def _batchable(n: Node) -> str | None:
        """The fullmatch regex of a node that is only `type: string` + one pattern, if that
        regex cannot match a newline (so values joined by newlines match as one string)."""
        if not (
            n.types == frozenset({"string"})
            and len(n.patterns) == 1
            and n.min_len is None
            and n.max_len is None
            and not (n.consts or n.enums or n.false or n.has_object() or n.has_array())
            and not (n.has_number() or n.has_combinators())
        ):
            return None
        inner = _fullmatch_inner(DOLLAR_FINDER.sub(r"\\Z", n.patterns[0]))
        return inner if inner is not None and _BATCHABLE.fullmatch(inner) else None

    def emit_batch(
        self, code: Code, ind: int, loaded: dict[str, str], children: dict[str, Node]
    ) -> dict[str, str]:
        """One regex call for the required string properties that are only a pattern: a
        `fullmatch` of their values joined by newlines. It only ever proves them valid; when it
        fails, each property's own check runs where it always does and names the failure, so
        verdicts and messages are unchanged. Returns key -> the flag variable."""
        keys = [k for k in sorted(loaded) if self._batchable(children[k]) is not None]
        if not self.batch_patterns or len(keys) < 2:
            return {}
        # Own counters: the names of every other constant and variable stay as they were.
        src = f"re.compile({chr(10).join(f'(?:{self._batchable(children[k])})' for k in keys)!r})"
        if src not in self.batch_consts:
            self.batch_consts[src] = f"_RB{len(self.batch_consts) + 1}"
            self.const_lines.append(f"{self.batch_consts[src]} = {src}")
        rx = self.batch_consts[src]
        self.batch_flags += 1
        flag = f"ok{self.batch_flags}"
        types = " and ".join(f"type({loaded[k]}) is str" for k in keys)
        joined = "\\n".join("{" + loaded[k] + "}" for k in keys)
        code.add(ind, f'{flag} = {types} and {rx}.fullmatch(f"{joined}") is not None')
        return dict.fromkeys(keys, flag)

    def scalar_atoms(self, n: Node, v: str, known: frozenset[str] | None) -> list[tuple[str, str]]:
        """(condition, message) pairs for n's type/const/enum/string/number keywords, in order.
        Each condition may assume the previous ones held."""
        out: list[tuple[str, str]] = []
        c = self._const_only(n)
        if c is not _NO:
            return [(self.const_expr(c, v), f"must be same as const definition: {c}")]
        if n.types is not None and not (known is not None and known <= n.types):
            names = sorted(
                t for t, a in ATOMS.items() if a <= n.types and not (t == "integer" and "frac" in n.types)
            )
            out.append((self.type_expr(n.types, v), "must be " + " or ".join(names)))
            known = n.types
        for c in n.consts:
            out.append((self.const_expr(c, v), f"must be same as const definition: {c}"))
        for en in n.enums:
            out.append((self.enum_expr(en, v), f"must be one of {en}"))
        if n.has_string():
            conds = []
            if n.min_len is not None:
                conds.append(
                    (
                        f"{v}" if n.min_len == 1 else f"len({v}) >= {n.min_len}",
                        f"must be longer than or equal to {n.min_len} characters",
                    )
                )
            if n.max_len is not None:
                conds.append(
                    (f"len({v}) <= {n.max_len}", f"must be shorter than or equal to {n.max_len} characters")
                )
            for p in n.patterns:
                rx, meth = self.regex(p)
                conds.append((f"{rx}.{meth}({v})", f"must match pattern {p}"))
            out.extend(self._guarded(conds, f"isinstance({v}, str)", known, frozenset({"string"})))
        if n.has_number():
            conds = []
            if n.minimum is not None and n.maximum is not None:
                conds.append(
                    (f"{n.minimum!r} <= {v} <= {n.maximum!r}", f"must be in [{n.minimum}, {n.maximum}]")
                )
            elif n.minimum is not None:
                conds.append((f"{v} >= {n.minimum!r}", f"must be bigger than or equal to {n.minimum}"))
            else:
                conds.append((f"{v} <= {n.maximum!r}", f"must be smaller than or equal to {n.maximum}"))
            out.extend(self._guarded(conds, f"_is_num({v})", known, frozenset({"int", "frac"})))
        return out

    @staticmethod
    def _guarded(
        conds: list[tuple[str, str]], guard: str, known: frozenset[str] | None, kinds: frozenset[str]
    ) -> list[tuple[str, str]]:
        if known is not None and known <= kinds:
            return conds
        return [(f"(not {guard} or {c})", m) for c, m in conds]

    def bool_expr(self, sub: Sub | Node, v: str, known: frozenset[str] | None, depth: int = 0) -> str:
        """A Python expression that is True iff the value at `v` is valid (v is re-evaluated)."""
        n = sub if isinstance(sub, Node) else self.node([sub])
        if n.false:
            return "False"
        if n.trivial():
            return "True"
        expr = self._try_expr(n, v, known, depth)
        if expr is not None:
            return expr
        return f"{self.helper(n, known)}({v})"

    def _try_expr(self, n: Node, v: str, known: frozenset[str] | None, depth: int) -> str | None:
        if depth > 3 or n.has_array() or n.addl or n.one_of or n.ites:
            return None
        parts = [c for c, _ in self.scalar_atoms(n, v, known)]
        if n.types is not None:
            known = n.types if known is None else known & n.types
        if n.has_object():
            sub = [f"{k!r} in {v}" for k in sorted(n.required)]
            for k, subs in n.props.items():
                child = self.bool_expr(self.node(subs), f"{v}[{k!r}]", None, depth + 1)
                if child == "True":
                    continue
                sub.append(child if k in n.required else f"({k!r} not in {v} or {child})")
            if n.allowed is not None:
                sub.append(f"{self.frozen(n.allowed)}.issuperset({v})")
            if n.min_props is not None:
                sub.append(f"len({v}) >= {n.min_props}")
            if n.max_props is not None:
                sub.append(f"len({v}) <= {n.max_props}")
            if sub:
                body = " and ".join(sub)
                parts.append(
                    body
                    if known is not None and known <= {"object"}
                    else f"(not isinstance({v}, dict) or {body})"
                )
        for alts in n.any_of:
            parts.append("(" + " or ".join(self.bool_expr(a, v, known, depth + 1) for a in alts) + ")")
        for s in n.nots:
            parts.append(f"not {self.bool_expr(s, v, known, depth + 1)}")
        for name in n.calls:
            parts.append(f"{self.func(name, 'ok')}({v})")
        expr = " and ".join(parts) if parts else "True"
        if len(expr) > 400:
            return None
        return f"({expr})" if len(parts) > 1 else expr

    def helper(self, n: Node, known: frozenset[str] | None) -> str:
        key = repr((n, sorted(known) if known is not None else None))
        if key not in self.helpers:
            name = f"_ok_{len(self.helpers) + 1}"
            self.helpers[key] = name
            code = Code()
            code.add(0, f"def {name}(x):")
            self.emit(code, 1, n, "x", (), "ok", known)
            code.add(1, "return True")
            self.funcs[name] = "\n".join(code.lines)
        return self.helpers[key]

    def func(self, def_name: str, kind: str) -> str:
        """Function for a definition that is not inlined: kind 'v' raises, 'ok' returns a bool."""
        name = f"_{kind}_{self.short(def_name)}"
        if name not in self.funcs:
            self.funcs[name] = ""  # reserve: recursion
            code = Code()
            code.add(0, f"def {name}(x):")
            n = self.node([(self.defs[def_name], (def_name,))])
            self.emit(code, 1, n, "x", (), "raise" if kind == "v" else "ok", None)
            code.add(1, "return True" if kind == "ok" else "return None")
            self.funcs[name] = "\n".join(code.lines)
        return name

    # ---- statements
    def fail(self, code: Code, ind: int, mode: str, path: Path_, msg: str) -> None:
        if mode == "ok":
            code.add(ind, "return False")
        else:
            code.add(ind, f"raise SchemaError({_path_expr(path)}, {msg!r})")

    def check(self, code: Code, ind: int, mode: str, path: Path_, atoms: list[tuple[str, str]]) -> None:
        if not atoms:
            return
        if mode == "ok" or len(atoms) == 1:
            code.add(ind, f"if not ({' and '.join(c for c, _ in atoms)}):")
            self.fail(code, ind + 1, mode, path, atoms[0][1])
            return
        code.add(ind, f"if not ({' and '.join(c for c, _ in atoms)}):")
        for c, m in atoms[:-1]:
            code.add(ind + 1, f"if not {c}:")
            self.fail(code, ind + 2, mode, path, m)
        self.fail(code, ind + 1, mode, path, atoms[-1][1])

    def emit(
        self, code: Code, ind: int, n: Node, v: str, path: Path_, mode: str, known: frozenset[str] | None
    ) -> None:
        if n.false:
            self.fail(code, ind, mode, path, "must not be there")
            return
        self.check(code, ind, mode, path, self.scalar_atoms(n, v, known))
        if n.types is not None:
            known = n.types if known is None else known & n.types
        if n.has_object():
            self.emit_object(code, ind, n, v, path, mode, known)
        if n.has_array():
            self.emit_array(code, ind, n, v, path, mode, known)
        for name in n.calls:
            self.emit_call(code, ind, name, v, path, mode)
        for alts in n.any_of:
            cond = " or ".join(self.bool_expr(a, v, known) for a in alts)
            code.add(ind, f"if not ({cond}):")
            self.fail(code, ind + 1, mode, path, "must be valid by one of anyOf definition")
        for s in n.nots:
            code.add(ind, f"if {self.bool_expr(s, v, known)}:")
            self.fail(code, ind + 1, mode, path, "must not be valid by not definition")
        for alts in n.one_of:
            self.emit_one_of(code, ind, alts, v, path, mode, known)
        for cond_sub, then, other in n.ites:
            code.add(ind, f"if {self.bool_expr(cond_sub, v, known)}:")
            mark = len(code.lines)
            if then is not None:
                self.emit(code, ind + 1, self.node([then]), v, path, mode, known)
            if len(code.lines) == mark:
                code.add(ind + 1, "pass")
            if other is not None:
                code.add(ind, "else:")
                mark = len(code.lines)
                self.emit(code, ind + 1, self.node([other]), v, path, mode, known)
                if len(code.lines) == mark:
                    code.add(ind + 1, "pass")

    def emit_call(self, code: Code, ind: int, name: str, v: str, path: Path_, mode: str) -> None:
        if mode == "ok":
            code.add(ind, f"if not {self.func(name, 'ok')}({v}):")
            code.add(ind + 1, "return False")
            return
        fn = self.func(name, "v")
        if not path:
            code.add(ind, f"{fn}({v})")
            return
        code.add(ind, "try:")
        code.add(ind + 1, f"{fn}({v})")
        code.add(ind, "except SchemaError as e:")
        code.add(ind + 1, f"e.path = {_path_expr(path)} + e.path")
        code.add(ind + 1, "raise")

    def emit_object(
        self, code: Code, ind: int, n: Node, v: str, path: Path_, mode: str, known: frozenset[str] | None
    ) -> None:
        if not (known is not None and known <= {"object"}):
            code.add(ind, f"if isinstance({v}, dict):")
            ind += 1
        mark = len(code.lines)
        self._emit_object_body(code, ind, n, v, path, mode)
        if len(code.lines) == mark:
            code.add(ind, "pass")

    def _emit_object_body(self, code: Code, ind: int, n: Node, v: str, path: Path_, mode: str) -> None:
        req = sorted(n.required)
        children = {k: self.node(subs) for k, subs in n.props.items()}
        children = {k: c for k, c in children.items() if not c.trivial()}
        loaded: dict[str, str] = {}
        if req:
            code.add(ind, "try:")
            for k in req:
                if k in children:
                    loaded[k] = self.var()
                    code.add(ind + 1, f"{loaded[k]} = {v}[{k!r}]")
                else:
                    code.add(ind + 1, f"{v}[{k!r}]")
            code.add(ind, "except KeyError:")
            self.fail(code, ind + 1, mode, path, f"must contain {req} properties")
        counted = None
        optional: list[str] = []
        if n.allowed is not None:
            optional = sorted(n.allowed - n.required)
            bare = [k for k in optional if k not in children]
            if set(req) <= n.allowed and len(bare) <= 4:
                counted = str(len(req))
                if optional:
                    counted = self.var("n")
                    code.add(ind, f"{counted} = {len(req)}")
            else:
                code.add(ind, f"if not {self.frozen(n.allowed)}.issuperset({v}):")
                self.fail(code, ind + 1, mode, path, "must not contain additional properties")
        batched = self.emit_batch(code, ind, loaded, children)
        for k in sorted(set(children) | (set(n.allowed or ()) - n.required if counted else set())):
            child = children.get(k)
            cpath = (*path, "." + k)
            if k in batched:
                assert child is not None
                code.add(ind, f"if not {batched[k]}:")
                self.emit(code, ind + 1, child, loaded[k], cpath, mode, None)
                continue
            if k in loaded:
                assert child is not None
                self.emit(code, ind, child, loaded[k], cpath, mode, None)
                continue
            code.add(ind, f"if {k!r} in {v}:")
            if counted and optional and k in n.allowed:  # type: ignore[operator]
                code.add(ind + 1, f"{counted} += 1")
            if child is not None:
                w = self.var()
                code.add(ind + 1, f"{w} = {v}[{k!r}]")
                self.emit(code, ind + 1, child, w, cpath, mode, None)
        if counted:
            code.add(ind, f"if len({v}) != {counted}:")
            if mode == "ok":
                code.add(ind + 1, "return False")
            else:
                code.add(
                    ind + 1,
                    f"raise SchemaError({_path_expr(path)}, 'must not contain '"
                    f" + str(sorted(set({v}) - {self.frozen(n.allowed)})) + ' properties')",
                )
        if n.min_props is not None:
            code.add(ind, f"if len({v}) < {n.min_props}:")
            self.fail(code, ind + 1, mode, path, f"must contain at least {n.min_props} properties")
        if n.max_props is not None:
            code.add(ind, f"if len({v}) > {n.max_props}:")
            self.fail(code, ind + 1, mode, path, f"must contain at most {n.max_props} properties")
        for own, sub in n.addl:
            child = self.node([sub])
            if child.trivial():
                continue
            k, w = self.var("k"), self.var()
            code.add(ind, f"for {k}, {w} in {v}.items():")
            code.add(ind + 1, f"if {k} not in {self.frozen(own)}:")
            self.emit(code, ind + 2, child, w, (*path, ("key", k)), mode, None)

    def emit_array(
        self, code: Code, ind: int, n: Node, v: str, path: Path_, mode: str, known: frozenset[str] | None
    ) -> None:
        if not (known is not None and known <= {"array"}):
            code.add(ind, f"if isinstance({v}, (list, tuple)):")
            ind += 1
        mark = len(code.lines)
        self._emit_array_body(code, ind, n, v, path, mode)
        if len(code.lines) == mark:
            code.add(ind, "pass")

    def _emit_array_body(self, code: Code, ind: int, n: Node, v: str, path: Path_, mode: str) -> None:
        if n.min_items is not None:
            code.add(ind, f"if len({v}) < {n.min_items}:")
            self.fail(code, ind + 1, mode, path, f"must contain at least {n.min_items} items")
        if n.max_items is not None:
            code.add(ind, f"if len({v}) > {n.max_items}:")
            self.fail(code, ind + 1, mode, path, f"must contain at most {n.max_items} items")
        child = self.node(n.items)
        if child.trivial():
            return
        w = self.var()
        if child.false:
            code.add(ind, f"if {v}:")
            self.fail(code, ind + 1, mode, path, "must not be there")
            return
        code.add(ind, f"for {w} in {v}:")
        self.emit(code, ind + 1, child, w, (*path, ("idx", v, w)), mode, None)

    def _discriminator(self, branches: list[Node]) -> str | None:
        if len(branches) < 2 or not all(b.types == frozenset({"object"}) for b in branches):
            return None
        for key in sorted(set.intersection(*(b.required for b in branches))):
            consts = []
            for b in branches:
                c = self._const_only(self.node(b.props.get(key, [])))
                if not isinstance(c, str):
                    break
                consts.append(c)
            else:
                if len(set(consts)) == len(consts):
                    return key
        return None

    def _types_of(self, n: Node) -> frozenset[str]:
        if n.false:
            return frozenset()
        t = ALL_ATOMS if n.types is None else n.types
        for c in n.consts:
            t &= {_json_type_atom(c)}
        for en in n.enums:
            t &= {_json_type_atom(x) for x in en}
        return frozenset(t)

    def emit_one_of(
        self,
        code: Code,
        ind: int,
        alts: list[Sub],
        v: str,
        path: Path_,
        mode: str,
        known: frozenset[str] | None,
    ) -> None:
        branches = [self.node([a]) for a in alts]
        msg = "must be valid exactly by one definition"
        key = self._discriminator(branches)
        if key is not None:
            if not (known is not None and known <= {"object"}):
                code.add(ind, f"if not isinstance({v}, dict):")
                self.fail(code, ind + 1, mode, path, msg)
            t = self.var("t")
            code.add(ind, f"{t} = {v}.get({key!r})")
            for i, b in enumerate(branches):
                c = self._const_only(self.node(b.props[key]))
                code.add(ind, f"{'if' if i == 0 else 'elif'} {t} == {c!r}:")
                self.emit(code, ind + 1, b, v, path, mode, frozenset({"object"}))
                # the selected branch must pass: the others fail on their distinct const
            code.add(ind, "else:")
            self.fail(code, ind + 1, mode, path, msg)
            return
        types = [self._types_of(b) for b in branches]
        disjoint = all(not (types[i] & types[j]) for i in range(len(types)) for j in range(i))
        exprs = [self.bool_expr(b, v, known) for b in branches]
        if disjoint:
            code.add(ind, f"if not ({' or '.join(exprs)}):")
        else:
            code.add(ind, f"if {' + '.join(f'(1 if {e} else 0)' for e in exprs)} != 1:")
        self.fail(code, ind + 1, mode, path, msg)

    # ---- roots
    def root(self, entry: str, schema: Any) -> None:
        code = Code()
        code.add(0, f"def validate_{entry}(x):")
        n = self.node([(schema, ())], force=True)
        self.emit(code, 1, n, "x", (), "raise", None)
        code.add(1, "return x")
        self.funcs[f"validate_{entry}"] = "\n".join(code.lines)


class _NoConst:
    pass


_NO = _NoConst()

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
        "threads_aws.schema_gen from schemas/*.json",
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
