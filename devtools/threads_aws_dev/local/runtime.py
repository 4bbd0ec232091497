"""Calling a template function's handler in this process, as Lambda would: its module loaded once
from its own directory (by file path, under a unique module name, so every function's `app.py`
stays distinct), a LambdaContext with the function's timeout."""

from __future__ import annotations

import importlib.util
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .sam import ACCOUNT, Function


@dataclass
class LambdaContext:
    """The attributes Lambda's Python context has (Powertools reads several)."""

    function_name: str
    function_version: str
    invoked_function_arn: str
    memory_limit_in_mb: int
    aws_request_id: str
    log_group_name: str
    log_stream_name: str
    deadline_ms: int
    identity: Any = None
    client_context: Any = None
    tenant_id: str | None = None

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self.deadline_ms - int(time.time() * 1000))


@dataclass
class Handlers:
    """Loads each function's handler on first use (thread-safe) and invokes it."""

    functions: dict[str, Function]
    region: str = "us-east-1"
    _cache: dict[str, Callable[..., Any]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def handler(self, logical_id: str) -> Callable[..., Any]:
        with self._lock:
            fn = self._cache.get(logical_id)
            if fn is None:
                fn = self._cache[logical_id] = load_handler(self.functions[logical_id])
            return fn

    def context(self, logical_id: str, request_id: str | None = None) -> LambdaContext:
        f = self.functions[logical_id]
        return LambdaContext(
            function_name=f.logical_id,
            function_version="$LATEST",
            invoked_function_arn=f.arn(self.region),
            memory_limit_in_mb=f.memory_mb,
            aws_request_id=request_id or str(uuid.uuid4()),
            log_group_name=f"/aws/lambda/{f.logical_id}",
            log_stream_name=f"local/{f.logical_id}",
            deadline_ms=int(time.time() * 1000) + f.timeout_s * 1000,
        )

    def invoke(self, logical_id: str, event: Any, request_id: str | None = None) -> Any:
        """Run the handler as Lambda would, under the function's identity: with `local.iam`
        active its AWS requests are signed with its own role's credentials."""
        from .iam import CURRENT

        token = CURRENT.set(logical_id)
        try:
            return self.handler(logical_id)(event, self.context(logical_id, request_id))
        finally:
            CURRENT.reset(token)


def module_name(f: Function) -> str:
    return f"_threads_local_fn_{f.logical_id}_{f.handler.rsplit('.', 1)[0].replace('.', '_')}"


def load_handler(f: Function) -> Callable[..., Any]:
    """Import `<CodeUri>/<module path>.py` under a unique name and return its handler attribute
    (a web adapter function's handler is its ASGI app: `local.lwa`)."""
    if f.asgi is not None:
        from .lwa import load_asgi

        return load_asgi(f.logical_id, f.code_dir, f.asgi)  # type: ignore[no-any-return]
    mod_path, _, attr = f.handler.rpartition(".")
    if not mod_path or not attr:
        raise ValueError(f"{f.logical_id}: Handler {f.handler!r} is not module.attribute")
    file = f.code_dir.joinpath(*mod_path.split(".")).with_suffix(".py")
    if not file.is_file():
        raise FileNotFoundError(f"{f.logical_id}: handler module {file} not found")
    name = module_name(f)
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:  # pragma: no cover
        raise ImportError(f"cannot load {file}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    handler = getattr(module, attr, None)
    if not callable(handler):
        raise AttributeError(f"{f.logical_id}: {file} has no callable {attr!r}")
    return handler  # type: ignore[no-any-return]


__all__ = ["ACCOUNT", "Handlers", "LambdaContext", "load_handler"]
