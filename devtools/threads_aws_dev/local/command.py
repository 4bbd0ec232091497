"""The `dev` subcommand's parser and entry (kept here so cli.py only registers it)."""

from __future__ import annotations

import argparse
from pathlib import Path

DEFAULT_STATE_DIR = ".threads-aws"


def add_dev_parser(top: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = top.add_parser(
        "dev",
        help="run the host locally (moto + API Gateway emulation + SQS pollers)",
        description="Start moto (DynamoDB, S3, SQS from template.yaml), an API Gateway (REST) emulation "
        "on 127.0.0.1:PORT in front of the template's functions, and pollers feeding SQS to the "
        "worker. The first stdout line is `ready http://127.0.0.1:PORT`. Ctrl-C or SIGTERM stops it. "
        "State (threads, approvals, questions, artifacts, queued steps) is kept in --state-dir and "
        "survives a restart or a crash; delete the directory to reset.",
    )
    state = p.add_mutually_exclusive_group()
    state.add_argument(
        "--state-dir",
        metavar="DIR",
        default=DEFAULT_STATE_DIR,
        help=f"where the state is kept (default: ./{DEFAULT_STATE_DIR}); one server per directory",
    )
    state.add_argument(
        "--ephemeral", action="store_true", help="keep state in memory only: nothing is written"
    )
    p.add_argument(
        "--port", type=int, default=8787, help="gateway port on 127.0.0.1 (default: 8787; 0: any free)"
    )
    p.add_argument(
        "--dev-tokens",
        action="store_true",
        help="accept bearer dev:<issuer>:<tenant>:<subject> (THREADS_DEV_TOKENS=1); local only",
    )
    p.add_argument(
        "--real-bedrock",
        action="store_true",
        help="Bedrock Runtime on your AWS credentials (AWS_PROFILE, ...; the endpoint "
        "AWS_ENDPOINT_URL_BEDROCK_RUNTIME or AWS's own); everything else stays on moto",
    )
    p.add_argument(
        "--no-iam",
        action="store_true",
        help="sign every function's AWS requests with dev's own keys instead of its template role "
        "(by default each function runs under its own role and moto answers AccessDenied as AWS would)",
    )
    p.add_argument("--template", metavar="PATH", help=argparse.SUPPRESS)
    p.add_argument(
        "--preload",
        metavar="FILE",
        action="append",
        default=[],
        help="run this Python file in the server before it serves (tests: fake models or tools)",
    )
    g = p.add_argument_group(
        "sam local (Docker)",
        "--aws-only serves just the emulated AWS (moto, template.yaml's resources, the run-step "
        "worker) and writes the --env-vars file of `sam local start-api` / `sam local invoke`, "
        "whose containers run the real handlers against it.",
    )
    g.add_argument("--aws-only", action="store_true", help="no API Gateway emulation: AWS for sam local")
    g.add_argument(
        "--env-vars",
        metavar="FILE",
        default="env.local.json",
        help="with --aws-only: the env-vars file to write (default: env.local.json)",
    )
    g.add_argument("--aws-port", type=int, default=4566, help="with --aws-only: moto's port (default: 4566)")
    g.add_argument(
        "--aws-bind",
        default="127.0.0.1",
        metavar="ADDR",
        help="with --aws-only: moto's address (default 127.0.0.1; 0.0.0.0 on Linux, for containers)",
    )
    g.add_argument(
        "--aws-endpoint-host",
        default="host.docker.internal",
        metavar="HOST",
        help="with --aws-only: how a container reaches this machine (default: host.docker.internal)",
    )
    p.set_defaults(func=cmd_dev)


def cmd_dev(args: argparse.Namespace) -> int:
    from ..cli import CliError
    from .dev import DevError, run

    try:
        state_dir = None if args.ephemeral else args.state_dir
        if args.aws_only:
            from .aws_only import run_aws_only

            return run_aws_only(
                args.env_vars,
                bind=args.aws_bind,
                port=args.aws_port,
                endpoint_host=args.aws_endpoint_host,
                dev_tokens=args.dev_tokens,
                template=args.template,
                preload=list(args.preload),
                state_dir=Path(state_dir) if state_dir else None,
            )
        return run(
            args.port,
            args.dev_tokens,
            args.template,
            preload=args.preload,
            state_dir=state_dir,
            real_bedrock=args.real_bedrock,
            iam=not args.no_iam,
        )
    except DevError as exc:
        raise CliError(str(exc)) from None
