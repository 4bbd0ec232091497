"""Runtime helpers of the generated validators (`_validators`, `host/_bodies`): one
SchemaError class for every generated check."""

import sys as _sys


class SchemaError(ValueError):
    """A value violates the contract schema. `path` is the JSON path below the value
    ("" for the value itself, ".data.call_id", ".data.content[2].type" ...)."""

    def __init__(self, path, rule):
        super().__init__(path, rule)
        self.path = path
        self.rule = rule

    @property
    def message(self):
        return "data" + self.path + " " + self.rule

    def __str__(self):
        return self.message


def _is_int(v):
    if isinstance(v, int):
        return not isinstance(v, bool)
    return isinstance(v, float) and v.is_integer()


def _is_num(v):
    if isinstance(v, (int, float)):
        return not isinstance(v, bool)
    d = _sys.modules.get("decimal")
    return d is not None and isinstance(v, d.Decimal)


def _is_frac(v):
    return _is_num(v) and not _is_int(v)


def _num_eq(v, c):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == c


def _idx(a, x):
    for i, y in enumerate(a):
        if y is x:
            return i
    return "?"
