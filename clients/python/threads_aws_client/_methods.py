"""A route's `Call` builder (`_calls`) as a client method, so a one-call method is spelled once:
its parameters, defaults, docstring and result type are the builder's, and `Client` /
`AsyncClient` only say how they send (`method` returns the decoded body; `async_method` a
coroutine of it). Methods with logic of their own (paging, streams) stay written in each."""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar, cast

from ._core import Call

P = ParamSpec("P")
R = TypeVar("R")


class Sends(Protocol):
    def send(self, call: Call[Any]) -> Any: ...


class SendsAsync(Protocol):
    async def send(self, call: Call[Any]) -> Any: ...


def method(build: Callable[P, Call[R]]) -> Callable[Concatenate[Sends, P], R]:
    def call(self: Sends, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return cast(R, self.send(build(*args, **kwargs)))

    return _like(call, build)


def async_method(build: Callable[P, Call[R]]) -> Callable[Concatenate[SendsAsync, P], Coroutine[Any, Any, R]]:
    async def call(self: SendsAsync, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return cast(R, await self.send(build(*args, **kwargs)))

    return _like(call, build)


def _like(fn: Any, build: Callable[..., Any]) -> Any:
    """`fn` named, documented and signed as `build` with `self` first (what `help()`, `inspect`
    and the sync/async signature test see); its result is the body, not the Call."""
    functools.update_wrapper(fn, build)
    del fn.__wrapped__  # the signature below is the method's own, not the builder's
    # The builder's annotations are strings naming `_calls`' imports; `fn` lives in this module,
    # whose globals `typing.get_type_hints` would search, so hand it the resolved objects
    # (a new dict: update_wrapper shared the builder's).
    hints = typing.get_type_hints(build)
    body = typing.get_args(hints.get("return"))
    fn.__annotations__ = {**hints, "return": body[0] if body else Any}
    sig = inspect.signature(build)
    ret = sig.return_annotation
    if isinstance(ret, str) and ret.startswith("Call[") and ret.endswith("]"):
        ret = ret[len("Call[") : -1]
    this = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    fn.__signature__ = sig.replace(parameters=[this, *sig.parameters.values()], return_annotation=ret)
    return fn
