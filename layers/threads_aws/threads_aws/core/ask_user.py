"""The ask_user option matching rule (semantics §ask_user), one place for the fold, the host's
answer route and the worker: an answer matches an option after trimming surrounding whitespace
and case-folding both. Options equal under that rule (`Yes` and ` yes `) make the call invalid:
the worker closes it with an error result and never parks, and a park on it is
`invalid_transition`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def norm(text: str) -> str:
    return text.strip().casefold()


def options_of(call_input: Mapping[str, Any]) -> list[str] | None:
    """The offered options (None without a non-empty options list)."""
    options = call_input.get("options")
    if not isinstance(options, list) or not options:
        return None
    return [o for o in options if isinstance(o, str)]


def ambiguous_options(call_input: Mapping[str, Any]) -> list[str]:
    """The options that equal an earlier one under the matching rule (empty: the call is valid)."""
    seen: set[str] = set()
    dup: list[str] = []
    for o in options_of(call_input) or ():
        key = norm(o)
        if key in seen:
            dup.append(o)
        seen.add(key)
    return dup


def match(call_input: Mapping[str, Any], answer: str) -> str | None:
    """The offered spelling of the option `answer` matches, else None (options without
    duplicates under the rule: the fold refuses a park on any other call)."""
    spelled = {norm(o): o for o in options_of(call_input) or ()}
    return spelled.get(norm(answer))
