"""What the API handlers and the run-step worker run on, built one way: `Services.from_env()`.

A container builds its `Services` once (`current()`): the resource names from the environment
(template.yaml's Globals), then, each on first use, the boto3 session and clients, the stores
(`store.aws.stores`), the writer (its per-branch view cache lives as long as the container), the
run-step queue, the agents, and the `Host` (API) or `EngineContext` (worker) over them. Nothing
is created before it is needed, so a handler's cold start pays only for what its route uses (the
authorizer never creates an S3 client), and tests or the local gateway can point the environment
at moto first. Host and engine receive stores, never a client or a table name.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from .store.dynamo import LazyClient
from .store.names import ResourceNames
from .store.records import Clock, wall_ms

if TYPE_CHECKING:
    from .agents import Agent
    from .engine.step import EngineContext
    from .host.keys import ApiKeys
    from .host.service import Host
    from .store.deferred_calls import DeferredCalls
    from .store.functions import Functions
    from .store.inbox_queue import InboxQueue
    from .store.protocol import Stores
    from .store.run_steps import RunStepQueue
    from .store.scheduler import EventBridgeSchedules
    from .store.step_timer import StepTimer
    from .writer import Writer

T = TypeVar("T")


class Services:
    def __init__(
        self,
        names: ResourceNames,
        *,
        session: Any = None,
        clients: Mapping[str, Any] | None = None,
        clock: Clock = wall_ms,
        agents: Mapping[str, Agent] | None = None,
        event_store: Mapping[str, Any] | None = None,
    ) -> None:
        """`session` is a boto3 Session (default: a new one on first use); `clients` are
        ready clients by service name ("dynamodb", "s3", "sqs") to use instead of the
        session's; `agents` defaults to `agents.load_agents()`; `event_store` passes
        EventStore tuning through (tests)."""
        self.names = names
        self.clock = clock
        self._session = session
        self._clients = dict(clients or {})
        self._agents = agents
        self._event_store = dict(event_store or {})
        self._lock = threading.RLock()
        self._made: dict[str, Any] = {}
        self.ddb = LazyClient(lambda: self._client("dynamodb"))
        self.s3 = LazyClient(lambda: self._client("s3"))
        self.sqs = LazyClient(lambda: self._client("sqs"))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, *, session: Any = None) -> Services:
        return cls(ResourceNames.from_env(environ), session=session)

    def _client(self, service: str, config: Any = None) -> Any:
        if service in self._clients:
            return self._clients[service]
        # A boto3 Session is not thread-safe; clients are. Create them one at a time.
        with self._lock:
            if self._session is None:
                import boto3

                self._session = boto3.session.Session()
            return self._session.client(service, config=config)

    def _once(self, name: str, make: Callable[[], T]) -> T:
        with self._lock:
            if name not in self._made:
                self._made[name] = make()
            value: T = self._made[name]
            return value

    # ------------------------------------------------------------------ parts
    @property
    def stores(self) -> Stores:
        from .store.aws import stores

        def make() -> Stores:
            # the agents' own retentions, read when a thread's TTL is first written (the
            # agents are loaded by then on every path that writes one)
            by_agent = lambda: agent_retention_ms(self.agents)  # noqa: E731
            return stores(
                self.ddb, self.s3, self.names, clock=self.clock, agent_retention=by_agent, **self._event_store
            )

        return self._once("stores", make)

    @property
    def writer(self) -> Writer:
        """The API's writer. The worker gets one of its own (`engine`): a Host builds a control
        into its cached view under its lock before committing, so the view cache is never shared
        with a worker in the same process (the local host runs both)."""
        from .writer import Writer

        return self._once(
            "writer", lambda: Writer(self.stores.events, clock=self.clock, activity=self.stores.threads)
        )

    @property
    def steps(self) -> RunStepQueue:
        from .store.run_steps import RunStepQueue

        return self._once("steps", lambda: RunStepQueue(self.sqs, self.names.run_step_queue_url))

    @property
    def timer(self) -> StepTimer | None:
        """The run-step timer (a retry's wake-up), where the deployment has one."""
        from .store.step_timer import StepTimer

        url = self.names.run_step_timer_url
        return self._once("timer", lambda: StepTimer(self.sqs, url)) if url else None

    @property
    def deferred_calls(self) -> DeferredCalls | None:
        """Where deferred (non-blocking) calls go to run off the turn, where the deployment has
        the queue (`store.deferred_calls`)."""
        from .store.deferred_calls import DeferredCalls, SigningKey

        url = self.names.deferred_call_url
        if not url:
            return None
        return self._once(
            "deferred_calls",
            lambda: DeferredCalls(self.sqs, url, SigningKey(self.ddb, self.names.state_table)),
        )

    @property
    def inbox_queue(self) -> InboxQueue:
        from .store.inbox_queue import InboxQueue

        return self._once("inbox_queue", lambda: InboxQueue(self.sqs, self.names.inbox_queue_url))

    @property
    def scheduler(self) -> EventBridgeSchedules:
        from .store.scheduler import EventBridgeSchedules

        return self._once(
            "scheduler", lambda: EventBridgeSchedules(LazyClient(lambda: self._client("scheduler")))
        )

    @property
    def functions(self) -> Functions:
        """Lambda tools' invoker: a client per read timeout, never retrying by itself
        (`store.functions`); logical ids of this stack from TOOL_FUNCTIONS."""
        import os

        from .store.functions import Functions, client_config, function_names

        return self._once(
            "functions",
            lambda: Functions(
                lambda timeout_s: self._client("lambda", client_config(timeout_s)),
                function_names(os.environ),
            ),
        )

    @property
    def agents(self) -> Mapping[str, Agent]:
        def load() -> Mapping[str, Agent]:
            from .agents import load_agents

            return self._agents if self._agents is not None else load_agents()

        return self._once("agents", load)

    # ------------------------------------------------------------------ runtimes
    def host(self) -> Host:
        """The API's `Host` (one per container: its lock orders a process's controls)."""
        from .host.service import Host
        from .sandbox.provider import S3WorkspaceProvider

        def make() -> Host:
            sandbox = S3WorkspaceProvider(self.stores.artifacts)  # restores workspace snapshots
            host = Host(self.stores, self.writer, self.steps, self.agents, self.clock, sandbox=sandbox)
            host.schedule_remover = self.scheduler.delete  # a deleted thread's schedules
            return host

        return self._once("host", make)

    def engine(self, **overrides: Any) -> EngineContext:
        """The worker's `EngineContext`; `overrides` (models, tools, lease_ttl_ms, ...) build a
        fresh one instead of the container's (tests)."""
        from .engine.step import EngineContext

        def make() -> EngineContext:
            from .writer import Writer

            return EngineContext(
                writer=Writer(self.stores.events, clock=self.clock, activity=self.stores.threads),
                stores=self.stores,
                steps=self.steps,
                agents=dict(self.agents),
                clock=self.clock,
                **{
                    "inbox_queue": self.inbox_queue,
                    "timer": self.timer,
                    "deferred_calls": self.deferred_calls,
                    "functions": self.functions,
                    "lease_ttl_ms": _lease_ttl_ms(),
                    **overrides,
                },
            )

        return make() if overrides else self._once("engine", make)

    def api_keys(self) -> ApiKeys:
        from .host.keys import ApiKeys

        return self._once("api_keys", lambda: ApiKeys(self.stores.api_keys, clock=self.clock))


def agent_retention_ms(agents: Mapping[str, Agent]) -> dict[str, int]:
    """Agent name -> its `retention_days` in ms, for the agents that set one (`store.retention`)."""
    from .store.retention import DAY_MS

    return {name: a.retention_days * DAY_MS for name, a in agents.items() if a.retention_days}


def _lease_ttl_ms() -> int:
    """RUN_STEP_LEASE_TTL_MS: the worker's branch lease (default 60 s; the local host's crash
    tests shorten it so a dead worker's lease lapses quickly)."""
    import os

    from .engine.context import LEASE_TTL_MS

    try:
        return max(1000, int(os.environ.get("RUN_STEP_LEASE_TTL_MS") or LEASE_TTL_MS))
    except ValueError:
        return LEASE_TTL_MS


_lock = threading.Lock()
_current: Services | None = None


def current() -> Services:
    """This container's Services, built from the environment on first use."""
    global _current
    with _lock:
        if _current is None:
            _current = Services.from_env()
        return _current


def reset() -> None:
    """Forget this container's Services (tests and the local host re-point the environment)."""
    global _current
    with _lock:
        _current = None
