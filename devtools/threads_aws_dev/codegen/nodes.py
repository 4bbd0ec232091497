"""Schemas normalised for the validator generator (`schema_gen`): every keyword that applies
to one value (`allOf` members and inlined `$ref`s merged) as one `Node`, the conjunction the
emitter checks once. Small definitions are inlined at their use site (a recursion guard and a
size bound, `INLINE_MAX`); others stay calls. Also the static evaluation of scalar constraints,
which lets a property pinned by a const be checked by the const alone. Dev-only (generation
time), like the rest of `codegen/`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

DEF_PREFIX = "#/definitions/"
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


class _NoConst:
    pass


NO_CONST = _NoConst()


class Nodes:
    """Normalisation over one set of definitions (sizes memoised per definition)."""

    def __init__(self, defs: dict[str, Any]) -> None:
        self.defs = defs
        self._sizes: dict[str, int] = {}

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
        return NO_CONST
