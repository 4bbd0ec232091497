"""What a run step runs on: `EngineContext` (built once per container by
`services.Services.engine`), the step's outcome, and the engine's tunables."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..core import render
from ..sandbox.provider import S3WorkspaceProvider
from ..store.functions import Functions
from ..store.protocol import Artifacts, EventLog, StepQueue, StepTimer, Stores
from ..store.records import wall_ms
from ..writer import View, Writer
from .exec_tool import WORKSPACE_EXECUTORS
from .memory_tools import MEMORY_EXECUTORS
from .models import ModelAdapter, adapter_for
from .tools import BUILTIN_EXECUTORS, Executor

LEASE_TTL_MS = 60_000
DEADLINE_MARGIN_MS = 10_000  # stop and re-enqueue this long before the Lambda deadline
RENDERERS = 64  # branches whose incremental renderer a container keeps

ModelResolver = Callable[[dict[str, Any], dict[str, Any]], ModelAdapter]


def _step_mcp() -> Any:
    from .mcp_tools import StepMcp  # the worker's first MCP server loads it (and the SDK later)

    return StepMcp()


@dataclass(frozen=True)
class StepOutcome:
    state: str  # idle | parked | more | busy | wait (a retry is due at not_before)
    appended: int
    not_before: int | None = None  # wait: when the retry is due
    armed: bool = False  # wait: its wake-up is scheduled (else the queue handler backs off)


@dataclass
class _Rendered:
    renderer: render.Renderer = field(default_factory=render.Renderer)
    fed: int = 0


@dataclass
class EngineContext:
    """The writer, the stores, the run-step queue (to re-enqueue a step that runs out of time),
    the step timer (a retry's wake-up), the deployed agents, the model resolver, the built-in tool
    executors and the Lambda tools' invoker."""

    writer: Writer
    stores: Stores
    steps: StepQueue | None = None
    timer: StepTimer | None = None  # wakes a branch when its retry is due (engine.retry_turn)
    deferred_calls: Any = None  # store.deferred_calls.DeferredCalls: deferred calls' runner queue
    agents: dict[str, Any] | None = None
    models: ModelResolver = adapter_for
    clock: Callable[[], int] = wall_ms
    tools: dict[str, Executor] = field(
        default_factory=lambda: {**BUILTIN_EXECUTORS, **WORKSPACE_EXECUTORS, **MEMORY_EXECUTORS}
    )
    inbox_queue: Any = None  # channels: wakes a thread whose inbox items waited on this branch
    functions: Functions | None = None  # Lambda tools (`store.functions`; engine.bindings)
    mcp: Callable[[], Any] = field(default_factory=lambda: _step_mcp)  # a step's MCP side (mcp_tools)
    lease_ttl_ms: int = LEASE_TTL_MS
    margin_ms: int = DEADLINE_MARGIN_MS
    _sandbox: S3WorkspaceProvider | None = None
    _rendered: OrderedDict[str, _Rendered] = field(default_factory=OrderedDict)

    @property
    def store(self) -> EventLog:
        return self.writer.store

    @property
    def artifacts(self) -> Artifacts:
        return self.stores.artifacts

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, session: Any = None) -> EngineContext:
        """An engine built from the environment (`services.Services.from_env().engine()`)."""
        from ..services import Services

        return Services.from_env(environ, session=session).engine()

    @property
    def sandbox(self) -> S3WorkspaceProvider:
        """The workspace provider that captures snapshots (over this context's artifacts)."""
        if self._sandbox is None:
            self._sandbox = S3WorkspaceProvider(self.artifacts)
        return self._sandbox

    def renderer(self, view: View) -> render.Renderer:
        """The branch's Render v1 renderer, fed the view's events it hasn't seen (a step renders
        the next request without re-walking the log)."""
        r = self._rendered.pop(view.branch_id, None)
        events = view.fold.events
        if r is None or r.fed > len(events):
            r = _Rendered()
        for ev in events[r.fed :]:
            r.renderer.feed(ev)
        r.fed = len(events)
        self._rendered[view.branch_id] = r
        while len(self._rendered) > RENDERERS:
            self._rendered.popitem(last=False)
        return r.renderer
