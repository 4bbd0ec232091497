"""`threads-aws dev`: the host on one machine, with nothing but this repo and its dev extras.

In one process: moto's threaded server on a free loopback port, holding DynamoDB, S3 and SQS
created from template.yaml by `local.infra.create_resources` (the same definitions as a
deployment); the API Gateway emulation of `gateway` on 127.0.0.1:PORT in front of the template's
functions; and `pollers` feeding the SQS event sources to their functions.

Why the moto *server* rather than `mock_aws`: handlers then run exactly as in Lambda, ordinary
boto3 clients configured from the environment (AWS_ENDPOINT_URL), and other processes can reach
the same data: `threads-aws log export --branch B` with the printed environment exports a
branch the dev server wrote.

State: moto keeps everything in memory, so with a state directory (the command's default,
`./.threads-aws/`) `persist_moto` journals every request that changed moto's state, fsynced
before its response leaves, and replays the journal into the fresh moto on the next start (after
the template's resources are created): threads, approvals, questions, artifacts and queued run
steps survive a restart or a `kill -9`, and a received-but-undeleted step is delivered again.
Per request that costs a journal append under one apply lock plus a shared fdatasync (figures:
`benchmarks/dev_persistence.py`). `state_dir=None` (`--ephemeral`) keeps memory only and writes
nothing.
"""

from __future__ import annotations

import logging
import os
import runpy
import shlex
import signal
import sys
import threading
import uuid
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TextIO

from .gateway import Gateway, configure_logging, log, make_server, serve_in_thread
from .pollers import Poller
from .runtime import Handlers
from .sam import Template, function_env, parse_template

REGION = "us-east-1"
DEV_TOKEN = "dev:api:local:alice"


class DevError(Exception):
    pass


@dataclass
class DevServer:
    """Everything `threads-aws dev` runs; usable in process (tests) with start()/stop()."""

    port: int = 8787
    host: str = "127.0.0.1"
    dev_tokens: bool = False
    template_path: Path | None = None
    prefix: str = "threads-local"
    poller_concurrency: int = 2
    extra_env: dict[str, str] = field(default_factory=dict)
    preload: list[str] = field(default_factory=list)  # Python files run before serving
    # `--aws-only` (local.aws_only): moto where containers can reach it, no API Gateway emulation.
    moto_host: str = "127.0.0.1"
    moto_port: int = 0
    serve_api: bool = True
    state_dir: Path | None = None  # None: memory only (--ephemeral)
    real_bedrock: bool = False  # --real-bedrock: Bedrock Runtime alone on the ordinary credential chain
    # Each function under its own role from template.yaml (local.iam); False: dev's keys for all.
    iam: bool = True

    moto: Any = None
    moto_url: str = ""
    resources: Any = None
    template: Template | None = None
    handlers: Handlers | None = None
    gateway: Gateway | None = None
    lambda_api: Any = None  # local.lambda_invoke.LocalLambda: the template's tool functions
    demo_mcp: Any = None  # local.demo_mcp.DemoMcp: the demo agent's MCP server (demo-tools)
    pollers: list[Poller] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    restored: Any = None  # persist_moto.RestoreReport when state_dir is set
    local_iam: Any = None  # local.iam.LocalIam when `iam`
    _front: Any = None  # local.iam.AuthorizingApp in front of moto
    _server: Any = None
    _thread: threading.Thread | None = None
    _saved_env: dict[str, str | None] = field(default_factory=dict)
    _ticker: Any = None  # the schedule ticker's stop event
    _timers: Any = None  # the Schedule events' timers' stop event (local.timers)

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://{self.host}:{self._server.server_address[1]}"

    def start(self) -> None:
        try:
            import boto3
            from moto.server import ThreadedMotoServer
        except ImportError as exc:
            raise DevError(
                f"`threads-aws dev` needs the dev extras ({exc.name} is missing): pip install -e '.[dev]'"
            ) from None
        from .aws_limits import install_from_env
        from .infra import create_resources, default_template_path
        from .moto_patch import serialize_dynamodb, speed_up_moto_transactions

        # THREADS_AWS_LIMITS=strict (the test suite sets it): a request AWS would refuse fails
        # here too, logged, before any client exists.
        install_from_env()
        speed_up_moto_transactions()
        serialize_dynamodb()
        template_path = Path(self.template_path or default_template_path())
        self.template = parse_template(template_path)
        self.warnings += self.template.skipped

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's per-request lines (pollers!)
        self._start_moto(ThreadedMotoServer)
        host, port = self.moto.get_host_and_port()
        self.moto_url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}"
        aws_env = {
            "AWS_ENDPOINT_URL": self.moto_url,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
        }
        real_chain = self._real_chain() if self.real_bedrock else None  # before the dummy keys
        self._set_env(aws_env, unset=("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"))
        session = boto3.Session(region_name=REGION)
        self.resources = create_resources(template_path, session, prefix=self.prefix)
        self._restore_state()

        env, warnings = function_env(self.template, self.resources.physical, REGION, stack=self.prefix)
        self.warnings += warnings
        env.update(self.resources.env())
        env["POWERTOOLS_TRACE_DISABLED"] = "true"  # no X-Ray daemon here
        if self.dev_tokens:
            env["THREADS_DEV_TOKENS"] = "1"
        if "THREADS_DEMO_DELTA_MS" not in os.environ:  # the demo model's words arrive one by one
            env["THREADS_DEMO_DELTA_MS"] = "30"
        env.update(self.extra_env)
        env.update(self._bedrock(real_chain))
        self.env = {**aws_env, **env}
        self._set_env(env, unset=() if self.dev_tokens else ("THREADS_DEV_TOKENS",))

        self.handlers = Handlers(self.template.functions, region=REGION)
        self._start_iam(template_path)
        self._start_lambda_api()
        self._start_demo_mcp()
        for path in self.preload:  # after the environment is set, before any handler loads
            runpy.run_path(path, run_name="__threads_preload__")
        for lid in self.template.functions:  # import now: errors show at start, requests are fast
            try:
                self.handlers.handler(lid)
            except Exception as exc:
                self.warnings.append(f"{lid}: handler not loadable ({exc.__class__.__name__}: {exc})")
        if self.serve_api:
            self.gateway = Gateway(self.template, self.handlers, region=REGION)
            self._server = make_server(self.gateway, self.host, self.port)
            self._thread = serve_in_thread(self._server)

        from threads_aws.store.dynamo import LazyClient

        sqs = session.client("sqs")
        for src in self.template.sqs:
            url = self.resources.physical.get(src.queue)
            if not src.enabled or not url:
                self.warnings.append(f"{src.function}.{src.event}: queue {src.queue} not polled")
                continue
            # An event source mapping polls with its function's role (AWSLambdaSQSQueueExecutionRole).
            # Made on the poller's first receive, in its thread: the start doesn't wait for the role.
            polling = (
                LazyClient(partial(self.local_iam.client, src.function, "sqs")) if self.local_iam else sqs
            )
            poller = Poller(
                src, url, polling, self.handlers, region=REGION, concurrency=self.poller_concurrency
            )
            poller.start()
            self.pollers.append(poller)
        if self.local_iam is not None:  # the first functions' roles, while the banner is read
            first = [s.function for s in self.template.sqs] + ["AuthorizerFunction", "StartRunFunction"]
            warm = threading.Thread(target=self.local_iam.warm, args=(first,), name="iam-warm", daemon=True)
            warm.start()
        if self.serve_api:  # schedules: the in-process stand-in for EventBridge Scheduler
            from threads_aws import services
            from threads_aws.schedules.ticker import start as start_ticker

            self._ticker = start_ticker(services.current())[1]
            # the template's Schedule events (the sweeper's rate): their functions, on timers
            from .timers import start as start_timers

            self._timers, timer_warnings = start_timers(self.template.schedules, self.handlers)
            self.warnings += timer_warnings

    def _real_chain(self) -> Any:
        """A boto3 Session on the credentials this shell gives boto3 (AWS_PROFILE, the keys,
        SSO, ...), resolved now, before dev replaces them with moto's dummy keys."""
        import boto3
        import botocore.session

        profile = os.environ.get("AWS_PROFILE")
        core = botocore.session.Session()
        try:
            creds = core.get_credentials()
        except Exception as exc:  # noqa: BLE001 - a broken profile: say so, don't crash
            raise DevError(f"--real-bedrock: AWS credentials unusable: {exc}") from None
        if creds is None:
            raise DevError(
                "--real-bedrock: no AWS credentials (set AWS_PROFILE, run `aws configure`, "
                "or export AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)"
            )
        if profile:  # keeps its config (region, ...) once dev unsets AWS_PROFILE
            core.set_config_variable("profile", profile)
        core.set_config_variable("region", core.get_config_variable("region") or REGION)
        return boto3.Session(botocore_session=core)

    def _bedrock(self, real_chain: Any) -> dict[str, str]:
        """Bedrock Runtime: the real chain (--real-bedrock), else the endpoint the environment
        names (a fake), else none: moto has no Converse (a 500 the worker would retry), so every
        Bedrock request then fails before it is sent, saying what to set."""
        from threads_aws.engine.providers import bedrock

        if real_chain is not None:
            bedrock.use_session(real_chain)
            return {}
        if os.environ.get(bedrock.ENDPOINT_VAR):
            return {}
        return {
            bedrock.UNAVAILABLE_VAR: "threads-aws dev has no Bedrock (moto does not implement "
            f"Converse): start dev with --real-bedrock (your AWS credentials, for Bedrock Runtime "
            f"only) or set {bedrock.ENDPOINT_VAR} (e.g. the local fake: "
            "python -m threads_aws_dev.fakes.models)"
        }

    def _start_lambda_api(self) -> None:
        """The Lambda Invoke API over the template's functions (tools as Lambda functions):
        the worker's boto3 client reaches it through AWS_ENDPOINT_URL_LAMBDA."""
        from .lambda_invoke import LocalLambda
        from .sam import function_names

        assert self.handlers is not None and self.template is not None
        # By logical id (tool functions) or by the template's FunctionName (the exec sandbox).
        names = function_names(self.template, self.resources.physical, REGION, stack=self.prefix)
        self.lambda_api = LocalLambda(self.handlers, host="127.0.0.1", names=names)
        self.lambda_api.iam = self.local_iam
        self.lambda_api.start()
        self.env["AWS_ENDPOINT_URL_LAMBDA"] = self.lambda_api.url
        self._set_env({"AWS_ENDPOINT_URL_LAMBDA": self.lambda_api.url})

    def _start_iam(self, template_path: Path) -> None:
        """The template's roles, enforced from here on (`local.iam`): moto answers AccessDenied
        to a function's request its role does not allow, as AWS would."""
        if not self.iam:
            return
        from . import iam
        from .sam import function_names

        assert self.template is not None
        by_name = function_names(self.template, self.resources.physical, REGION, stack=self.prefix)
        names = {lid: lid for lid in self.template.functions}
        names.update({lid: name for name, lid in by_name.items()})
        plans, warnings = iam.plan(
            template_path, self.resources.physical, names, region=REGION, prefix=self.prefix
        )
        self.warnings += warnings
        keys = iam.hash_keys(template_path, self.resources.physical)
        self.local_iam = iam.LocalIam(plans, endpoint=self.moto_url, region=REGION, hash_keys=keys)
        self.local_iam.other_keys_unchecked = not self.serve_api  # --aws-only: SAM's containers
        self._front.iam = self.local_iam
        iam.activate(self.local_iam)

    def _start_demo_mcp(self) -> None:
        """The demo MCP server on a free loopback port; the `demo-tools` agent finds it through
        THREADS_DEMO_MCP_URL (an environment that names another server keeps it)."""
        if os.environ.get("THREADS_DEMO_MCP_URL"):
            return
        from .demo_mcp import DemoMcp

        try:
            self.demo_mcp = DemoMcp().start()
        except Exception as exc:  # noqa: BLE001 - the rest of dev works without it
            self.warnings.append(f"demo MCP server not started ({exc.__class__.__name__}: {exc})")
            return
        self.env["THREADS_DEMO_MCP_URL"] = self.demo_mcp.url
        self._set_env({"THREADS_DEMO_MCP_URL": self.demo_mcp.url})

    def _start_moto(self, threaded_server: Any) -> None:
        from .iam import AuthorizingApp, MotoServer

        if self.state_dir is None:
            if not self.iam:
                self.moto = threaded_server(ip_address=self.moto_host, port=self.moto_port, verbose=False)
                self.moto.start()
                return
            self.moto = MotoServer(self.moto_host, self.moto_port)
            self.moto.start()
            self._front = self.moto.front
            return
        from .persist import PersistError
        from .persist_moto import DurableMoto

        def wrap(app: Any) -> Any:
            self._front = AuthorizingApp(app)
            return self._front

        moto = DurableMoto(
            self.state_dir, host=self.moto_host, port=self.moto_port, wrap=wrap if self.iam else None
        )
        try:
            moto.start()
        except PersistError as exc:
            raise DevError(str(exc)) from None
        self.moto = moto

    def _restore_state(self) -> None:
        """Replay the state directory into moto, now that the template's resources exist."""
        if self.state_dir is None:
            return
        from .persist import PersistError

        names = {v.rstrip("/").rsplit("/", 1)[-1] for v in self.resources.physical.values()}
        try:
            self.restored = self.moto.restore(names)
        except PersistError as exc:
            raise DevError(str(exc)) from None
        self.warnings += self.restored.warnings

    def stop(self) -> None:
        if self.real_bedrock:
            from threads_aws.engine.providers import bedrock

            bedrock.use_session(None)
        if self._ticker is not None:
            self._ticker.set()
            self._ticker = None
        if self._timers is not None:
            self._timers.set()
            self._timers = None
        for p in self.pollers:
            p.stop()
        self.pollers.clear()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self.lambda_api is not None:
            self.lambda_api.stop()
            self.lambda_api = None
        if self.demo_mcp is not None:
            self.demo_mcp.stop()
            self.demo_mcp = None
        if self.moto is not None:
            self.moto.stop()
            self.moto = None
        if self.local_iam is not None:
            from .iam import deactivate

            deactivate(self.local_iam)
            self.local_iam = None
        for k, v in self._saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        self._saved_env.clear()

    def _set_env(self, env: dict[str, str], unset: tuple[str, ...] = ()) -> None:
        for k in (*env, *unset):
            self._saved_env.setdefault(k, os.environ.get(k))
        for k in unset:
            os.environ.pop(k, None)
        os.environ.update(env)

    # -- what the user is told

    def token(self) -> tuple[str | None, str]:
        """A bearer token for the user, and how it was made."""
        if self.dev_tokens:
            return DEV_TOKEN, "dev token: with --dev-tokens any bearer dev:<issuer>:<tenant>:<subject> works"
        try:
            from threads_aws.host.keys import ApiKeys
        except ImportError:
            return None, "no API keys in this build: restart with --dev-tokens"
        import boto3

        ddb = boto3.Session(region_name=REGION).client("dynamodb")
        from threads_aws.store.api_keys import ApiKeyRows

        minted = ApiKeys(ApiKeyRows(ddb, self.resources.state_table)).create("local", "alice", "api")
        kept = f"kept in {self.state_dir}" if self.state_dir else "in memory: gone when this stops"
        return minted.token, f"API key of tenant local, subject alice ({kept})"

    def banner(self) -> list[str]:
        token, how = self.token()
        lines = [f"ready {self.url}"]
        shown = token or "<TOKEN>"
        lines.append(f"token {shown}  ({how})")
        key = f"demo-{uuid.uuid4().hex[:12]}"
        body = '{"agent":"demo","input":"note: buy milk"}'
        lines.append(
            "try: curl -s -X POST "
            + " ".join(
                shlex.quote(a)
                for a in (
                    f"{self.url}/v1/runs",
                    "-H",
                    f"Authorization: Bearer {shown}",
                    "-H",
                    "Content-Type: application/json",
                    "-H",
                    f"Idempotency-Key: {key}",
                    "-d",
                    body,
                )
            )
        )
        lines.append(
            "then: curl -sN -H "
            + shlex.quote(f"Authorization: Bearer {shown}")
            + f" {self.url}/v1/threads/<thread_id>/runs/<run_id>/events"
        )
        store_env = " ".join(
            f"{k}={shlex.quote(self.env[k])}"
            for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")
            + ("EVENTS_TABLE", "STATE_TABLE", "ARTIFACTS_BUCKET")
        )
        lines.append(f"store: {store_env} threads-aws log export --branch <branch_id>")
        if self.demo_mcp is not None:
            demo = 'mcp: mcp__demo__lookup_rate {"currency": "USD"}'
            lines.append(f"mcp: demo MCP server {self.demo_mcp.url} (agent demo-tools: {demo})")
        lines.append(self.iam_line())
        lines.append(self.state_line())
        return lines

    def iam_line(self) -> str:
        if self.local_iam is None:
            return "iam: off (--no-iam): every function signs with dev's own keys"
        n = len(self.local_iam.plans)
        return f"iam: each function under its own role from template.yaml ({n} roles; AccessDenied as on AWS)"

    def state_line(self) -> str:
        if self.state_dir is None:
            return "state: in memory only (--ephemeral): everything is gone when this stops"
        r = self.restored
        what = f"{r.records} records replayed in {r.seconds:.2f}s" if r and r.records else "new"
        reset = f"reset: stop, then rm -rf {shlex.quote(str(self.state_dir))}"
        return f"state: {self.state_dir} ({what}; {reset})"


def run(
    port: int,
    dev_tokens: bool,
    template: str | None = None,
    out: TextIO | None = None,
    preload: list[str] | None = None,
    state_dir: str | None = None,
    real_bedrock: bool = False,
    iam: bool = True,
) -> int:
    """The command: start, print the banner, serve until Ctrl-C or SIGTERM, stop; exit 0.
    `state_dir` None keeps memory only."""
    out = out or sys.stdout
    # Our banner is the only thing on stdout: handlers' prints and loggers go to stderr.
    sys.stdout = sys.stderr
    configure_logging(verbose=True)
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    server = DevServer(
        port=port,
        dev_tokens=dev_tokens,
        template_path=Path(template) if template else None,
        preload=list(preload or []),
        state_dir=Path(state_dir) if state_dir else None,
        real_bedrock=real_bedrock,
        iam=iam,
    )
    try:
        try:
            server.start()
        except OSError as exc:
            raise DevError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from None
        for w in server.warnings:
            log.warning("%s", w)
        for line in server.banner():
            print(line, file=out, flush=True)
        while not stop.wait(0.5):
            pass
        log.info("stopping")
        return 0
    finally:
        server.stop()
        for s, h in previous.items():
            signal.signal(s, h)
        sys.stdout = out
