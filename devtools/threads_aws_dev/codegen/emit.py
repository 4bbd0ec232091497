"""Statements of the validator generator: the code that checks a normalised `Node` and either
raises `SchemaError` naming the failing path (mode `raise`) or returns False (mode `ok`):
objects with their required keys loaded in one `try`, arrays, `$ref` calls, `oneOf` (dispatch
on a discriminating const, or an `or` of disjoint types), `if`/`then`/`else`, and the batched
pattern check of an object's id-like properties. `Gen` is the whole generator, one per
generated module; `schema_gen.module` writes out what it collected. Dev-only."""

from __future__ import annotations

from typing import Any

from .exprs import Exprs
from .nodes import ALL_ATOMS, Node, Sub, _json_type_atom


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


class Gen(Exprs):
    def __init__(self, defs: dict[str, Any], *, batch_patterns: bool = False) -> None:
        super().__init__(defs)
        self.batch_patterns = batch_patterns
        self.batch_consts: dict[str, str] = {}
        self.batch_flags = 0
        self.funcs: dict[str, str] = {}  # name -> code
        self.pending: list[tuple[str, str]] = []  # (kind, def name)
        self.helpers: dict[str, str] = {}  # memo key -> function name

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
        loaded = self._emit_required(code, ind, req, children, v, path, mode)
        counted, optional = self._emit_allowed(code, ind, n, req, children, v, path, mode)
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
            self._emit_key_count(code, ind, n, counted, v, path, mode)
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

    def _emit_required(
        self, code: Code, ind: int, req: list[str], children: dict[str, Node], v: str, path: Path_, mode: str
    ) -> dict[str, str]:
        """Load the required keys in one `try` (a KeyError is the failure); key -> the variable
        holding the value of each that has its own check."""
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
        return loaded

    def _emit_allowed(
        self,
        code: Code,
        ind: int,
        n: Node,
        req: list[str],
        children: dict[str, Node],
        v: str,
        path: Path_,
        mode: str,
    ) -> tuple[str | None, list[str]]:
        """`additionalProperties: false`: either counted (the expression of the expected key
        count, the optional keys counted as they are met) or one superset check."""
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
        return counted, optional

    def _emit_key_count(
        self, code: Code, ind: int, n: Node, counted: str, v: str, path: Path_, mode: str
    ) -> None:
        code.add(ind, f"if len({v}) != {counted}:")
        if mode == "ok":
            code.add(ind + 1, "return False")
        else:
            code.add(
                ind + 1,
                f"raise SchemaError({_path_expr(path)}, 'must not contain '"
                f" + str(sorted(set({v}) - {self.frozen(n.allowed)})) + ' properties')",
            )

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
