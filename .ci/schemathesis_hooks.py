"""schemathesis hooks for CI (.ci/schemathesis.toml `hooks`): drop generated requests that no
server could tell apart from valid ones once they are on the wire.

`GET /v1/threads` takes `metadata[key]=value` (deepObject, values `type: string`). Negating
`type` yields null, a number or a boolean for a value, but a query string carries text only:
`metadata[e]=null` is the valid filter "e equals the string null", and the route rightly answers
200. schemathesis skips this for flat query parameters but not for an object parameter (it
cannot know how the object is rewritten), so its negative_data_rejection check reports the
valid request as accepted invalid data. Only these cases are dropped: a negated key (pattern),
too many pairs or an over-long value still reach the route, and it answers 400 for each.
"""

from __future__ import annotations

from typing import Any

import schemathesis


def _scalar_not_text(v: Any) -> bool:
    return v is None or isinstance(v, (bool, int, float))


def _only_text_values(query: Any) -> bool:
    if not isinstance(query, dict):
        return True
    # The case holds the object either whole ({"metadata": {...}}) or already spread into its
    # wire names ({"metadata[e]": ...}). A scalar that is not a string is written as the text it
    # spells; list/dict values change the wire shape (metadata[e][x]=…) and are refused by the
    # route, so they stay.
    whole = query.get("metadata")
    values = list(whole.values()) if isinstance(whole, dict) else []
    values += [v for k, v in query.items() if isinstance(k, str) and k.startswith("metadata[")]
    return not any(_scalar_not_text(v) for v in values)


def _is_thread_listing(ctx: Any) -> bool:
    op = getattr(ctx, "operation", None)
    return op is not None and op.method.upper() == "GET" and op.path == "/v1/threads"


@schemathesis.hook
def filter_query(ctx: Any, query: Any) -> bool:
    return not _is_thread_listing(ctx) or _only_text_values(query)


@schemathesis.hook
def filter_case(ctx: Any, case: Any) -> bool:
    return not _is_thread_listing(ctx) or _only_text_values(case.query)
