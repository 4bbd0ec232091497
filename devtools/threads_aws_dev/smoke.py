"""`threads-aws smoke`: the walkthrough a new user makes, run against a deployed stack (`--url`
`--key`, or `--stack NAME` for the URLs from its outputs) or a local host (`--dev` starts an
ephemeral `threads-aws dev` on a free port and stops it afterwards).

    threads-aws smoke --url URL --key KEY [--slack-url U] [--whatsapp-url U] [--agent demo]
    threads-aws smoke --stack threads-aws --key KEY
    threads-aws smoke --dev

One line per check, in order, as each ends: `PASS|FAIL|SKIP <name>: <detail> (<seconds> s)`,
then `N passed, N failed, N skipped in S s`; exit 1 on any failure, 2 on a usage problem. A check
whose prerequisite did not pass is skipped and says which. Each check has a ceiling
(`--ceiling`, 60 s): past it the check fails naming the stage it was in, and the rest go on. A
failure says what it most likely means on a fresh stack (a key the authorizer refuses, a URL
without the stage, a worker that never picks the run up, a model provider without its key),
so the first minute after a deploy is diagnosable from this output alone.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

DEFAULT_CEILING_S = 60.0
KEY_HINT = (
    "the key is not valid for this stack: create one with "
    "`STATE_TABLE=<StateTableName> threads-aws keys create --tenant T --subject S` "
    "(the stack's output StateTableName, the same region)"
)


class Failure(Exception):
    """A check's failure, in words a user can act on."""


class Skip(Exception):
    """A check that cannot run against this target (its line says why)."""


@dataclass
class Result:
    name: str
    status: str  # PASS | FAIL | SKIP
    detail: str
    seconds: float

    def line(self) -> str:
        return f"{self.status} {self.name}: {self.detail} ({self.seconds:.1f} s)"


@dataclass
class Target:
    url: str
    key: str
    slack_url: str | None = None
    whatsapp_url: str | None = None
    agent: str = "demo"


@dataclass
class Ctx:
    """What the checks share: the client, the target, the stage a check is in (for a timeout's
    line), and what earlier checks left for later ones (threads, runs)."""

    target: Target
    client: Any
    nonce: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    stage: str = ""
    kept: dict[str, Any] = field(default_factory=dict)

    def at(self, stage: str) -> None:
        self.stage = stage


Check = tuple[str, Callable[[Ctx], str], tuple[str, ...]]


def explain(exc: BaseException, ctx: Ctx | None = None) -> str:
    """A failure of a call, as what it most likely means for a freshly deployed stack."""
    from threads_aws_client import (
        ConnectionFailed,
        ForbiddenError,
        GatewayTimeoutError,
        NotFoundError,
        ThreadsError,
        UnauthenticatedError,
        UnavailableError,
        UnexpectedResponse,
    )

    url = ctx.target.url if ctx else "the URL"
    if isinstance(exc, UnauthenticatedError):
        return f"401 {exc.code}: {KEY_HINT}"
    if isinstance(exc, ForbiddenError):
        return f"403 {exc.code}: {exc.message} (the key's principal may not do this)"
    if isinstance(exc, NotFoundError) and "no such route" in exc.message:
        return (
            f"404 no such route under {url}: is --url the stack's HostApiUrl output, stage "
            "included (…/dev, the Stage parameter)?"
        )
    if isinstance(exc, ConnectionFailed):
        return f"cannot reach {url}: {exc.message}"
    if isinstance(exc, GatewayTimeoutError):
        return f"504 {exc.code}: a function did not answer within API Gateway's 29 s: {exc.message}"
    if isinstance(exc, UnavailableError) and exc.status and exc.status >= 500:
        return (
            f"{exc.status} {exc.code}: {exc.message} (a function or the authorizer failed: see "
            "its log group /aws/lambda/<stack>/<function>, the alarms mail)"
        )
    if isinstance(exc, UnexpectedResponse):
        hint = ""
        if exc.status == 403:
            hint = (
                " (not the contract's error body: is --url a threads-aws stack's HostApiUrl? a "
                "private or WAF-filtered API answers this)"
            )
        return f"{exc.message}{hint}"
    if isinstance(exc, ThreadsError):
        status = f"{exc.status} " if exc.status else ""
        return f"{status}{exc.code}: {exc.message}"
    return f"{type(exc).__name__}: {exc}"


def run_check(ctx: Ctx, name: str, fn: Callable[[Ctx], str], ceiling: float) -> Result:
    """Run one check under its ceiling, in a daemon thread: a check stuck on a read past the
    ceiling is reported (with its stage) and left behind; the process ends at the summary."""
    box: dict[str, Any] = {}
    # Its own stage: a check left behind by its ceiling must not rename the next one's stage
    # (the client and `kept` are shared on purpose).
    ctx = dataclasses.replace(ctx, stage="starting")

    def body() -> None:
        try:
            box["detail"] = fn(ctx)
        except BaseException as exc:  # every failure becomes this check's line
            box["exc"] = exc

    started = time.monotonic()
    worker = threading.Thread(target=body, name=f"smoke-{name}", daemon=True)
    worker.start()
    worker.join(ceiling)
    took = time.monotonic() - started
    if worker.is_alive():
        return Result(name, "FAIL", f"timed out after {ceiling:g} s {ctx.stage}", took)
    exc = box.get("exc")
    if exc is None:
        return Result(name, "PASS", str(box.get("detail", "ok")), took)
    if isinstance(exc, Skip):
        return Result(name, "SKIP", str(exc), took)
    if isinstance(exc, Failure):
        return Result(name, "FAIL", str(exc), took)
    return Result(name, "FAIL", f"{ctx.stage}: {explain(exc, ctx)}", took)


def run_all(ctx: Ctx, checks: Sequence[Check], ceiling: float, out: IO[str]) -> list[Result]:
    results: dict[str, Result] = {}
    for name, fn, needs in checks:
        missing = [n for n in needs if n not in results or results[n].status != "PASS"]
        if missing:
            res = Result(name, "SKIP", f"needs {_root(results, missing[0])}", 0.0)
        else:
            res = run_check(ctx, name, fn, ceiling)
        results[name] = res
        print(res.line(), file=out, flush=True)
    return list(results.values())


def _root(results: dict[str, Result], name: str) -> str:
    """The check that did not pass at the bottom of a chain of skips: what to look at first."""
    res = results.get(name)
    while res is not None and res.status == "SKIP" and res.detail.startswith("needs "):
        name = res.detail.removeprefix("needs ").split(" ", 1)[0]
        res = results.get(name)
    return f"{name} ({res.status.lower()})" if res else name


def summary(results: Sequence[Result], seconds: float) -> str:
    n = {s: sum(r.status == s for r in results) for s in ("PASS", "FAIL", "SKIP")}
    return f"{n['PASS']} passed, {n['FAIL']} failed, {n['SKIP']} skipped in {seconds:.1f} s"


def smoke(target: Target, *, ceiling: float = DEFAULT_CEILING_S, out: IO[str] = sys.stdout) -> int:
    """Run every check against `target`; 0 when none failed, else 1."""
    from threads_aws_client import Client

    from .smoke_checks import CHECKS

    started = time.monotonic()
    print(f"smoke {target.url} (agent {target.agent}, ceiling {ceiling:.0f} s a check)", file=out, flush=True)
    with Client(target.url, target.key) as client:
        results = run_all(Ctx(target, client), CHECKS, ceiling, out)
    print(summary(results, time.monotonic() - started), file=out, flush=True)
    return 1 if any(r.status == "FAIL" for r in results) else 0


# ------------------------------------------------------------------ the command
def stack_outputs(stack: str, region: str | None) -> dict[str, str]:
    """The stack's outputs (CloudFormation DescribeStacks, the ordinary credential chain)."""
    from .cli import CliError

    try:
        import boto3
        import botocore.exceptions

        cfn = boto3.session.Session(region_name=region).client("cloudformation")
        described = cfn.describe_stacks(StackName=stack)["Stacks"][0]
    except botocore.exceptions.NoRegionError:
        raise CliError("smoke --stack: no region: pass --region or set AWS_REGION") from None
    except botocore.exceptions.NoCredentialsError:
        raise CliError("smoke --stack: no AWS credentials to read the stack's outputs") from None
    except botocore.exceptions.ClientError as exc:
        raise CliError(f"smoke --stack {stack}: {exc}") from None
    return {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}


def _loopback_origin(url: str) -> str | None:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.hostname in ("127.0.0.1", "localhost", "::1"):
        return f"{parts.scheme}://{parts.netloc}"
    return None


def target_of(args: argparse.Namespace, url: str | None, key: str | None) -> Target:
    from .cli import CliError

    slack, whatsapp = args.slack_url, args.whatsapp_url
    if args.stack:
        outs = stack_outputs(args.stack, args.region)
        url = url or outs.get("HostApiUrl")
        slack = slack or outs.get("SlackWebhookUrl")
        whatsapp = whatsapp or outs.get("WhatsAppWebhookUrl")
    url = url or os.environ.get("THREADS_URL")
    key = key or os.environ.get("THREADS_TOKEN")
    if not url or not key:
        raise CliError("smoke: give --url and --key (or THREADS_URL/THREADS_TOKEN, or --stack), or --dev")
    url = url.rstrip("/")
    origin = _loopback_origin(url)
    if origin:  # `threads-aws dev` serves the function URLs on its own port
        slack = slack or f"{origin}/channels/slack/events"
        whatsapp = whatsapp or f"{origin}/channels/whatsapp/events"
    return Target(url, key, slack, whatsapp, args.agent)


def cmd_smoke(args: argparse.Namespace) -> int:
    if not args.dev:
        return smoke(target_of(args, args.url, args.key), ceiling=args.ceiling)
    if args.stack:
        from .cli import CliError

        raise CliError("smoke: --dev checks a local host; --stack names a deployed one")
    from .smoke_dev import ephemeral_dev

    with ephemeral_dev() as dev:
        args.slack_url = args.slack_url or dev.slack_url
        args.whatsapp_url = args.whatsapp_url or dev.whatsapp_url
        return smoke(target_of(args, dev.url, args.key or dev.key), ceiling=args.ceiling)


def add_smoke_parser(top: Any) -> None:
    p = top.add_parser(
        "smoke",
        help="run the user's walkthrough against a deployed stack (or --dev) and report each check",
        description="Start a run, stream it, grant an approval, answer a question, list threads, "
        "page the timeline, fork at a snapshot, steer, cancel, and send forged channel webhooks "
        "(refused 401 unverified). One PASS/FAIL/SKIP line per check and a summary; exit 1 on "
        "any failure.",
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument("--url", metavar="URL", help="the host API's base URL, stage included (HostApiUrl)")
    where.add_argument(
        "--dev", action="store_true", help="start an ephemeral `threads-aws dev --dev-tokens`, stop it after"
    )
    p.add_argument(
        "--key", metavar="KEY", help="an API key (threads-aws keys create); default $THREADS_TOKEN"
    )
    p.add_argument("--stack", metavar="NAME", help="read HostApiUrl and the webhook URLs from its outputs")
    p.add_argument("--region", metavar="R", help="with --stack: the stack's region")
    p.add_argument("--slack-url", metavar="URL", help="the Slack webhook function URL (SlackWebhookUrl)")
    p.add_argument("--whatsapp-url", metavar="URL", help="the WhatsApp webhook URL (WhatsAppWebhookUrl)")
    p.add_argument(
        "--agent",
        default="demo",
        help="the agent to run: one on the demo model, whose commands the checks use (default: demo)",
    )
    p.add_argument(
        "--ceiling", type=float, default=DEFAULT_CEILING_S, metavar="S", help="seconds a check may take (60)"
    )
    p.set_defaults(func=cmd_smoke)
