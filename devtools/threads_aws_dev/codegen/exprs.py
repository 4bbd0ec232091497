"""Boolean expressions of the validator generator: the Python expression that is True iff a
value satisfies a normalised `Node` (type, const, enum, string and number keywords, small
objects, `anyOf`, `not`), with the messages the raising form names; a node too large for one
expression becomes a function (`helper`/`func`, which the statement side, `emit.Gen`, writes).
Generated constants (compiled regexes, key sets) are named here, once per source. Dev-only."""

from __future__ import annotations

import re
from typing import Any

from .nodes import ATOMS, DOLLAR_FINDER, NO_CONST, Node, Nodes, Sub, _fullmatch_inner

_BATCHABLE = re.compile(r"[\[\]{},0-9A-Za-z_-]+")  # classes, ranges, counts: none can match "\n"


class Exprs(Nodes):
    def __init__(self, defs: dict[str, Any]) -> None:
        super().__init__(defs)
        self.consts: dict[str, str] = {}  # source -> name
        self.const_lines: list[str] = []
        self.n = 0

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
        if not items:  # `frozenset({})` is a set of a dict's keys to a type checker: say str
            return self.const("frozenset[str]()", prefix)
        return self.const("frozenset({" + ", ".join(repr(x) for x in sorted(items)) + "})", prefix)

    @staticmethod
    def short(name: str) -> str:
        return name[len("events_") :] if name.startswith("events_") else name

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

    def scalar_atoms(self, n: Node, v: str, known: frozenset[str] | None) -> list[tuple[str, str]]:
        """(condition, message) pairs for n's type/const/enum/string/number keywords, in order.
        Each condition may assume the previous ones held."""
        out: list[tuple[str, str]] = []
        c = self._const_only(n)
        if c is not NO_CONST:
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

    # ---- functions: written by the statement side (emit.Gen)
    def helper(self, n: Node, known: frozenset[str] | None) -> str:
        raise NotImplementedError

    def func(self, def_name: str, kind: str) -> str:
        raise NotImplementedError
