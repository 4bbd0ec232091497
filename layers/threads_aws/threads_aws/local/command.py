"""The `dev` subcommand's parser and entry (kept here so cli.py only registers it)."""

from __future__ import annotations

import argparse


def add_dev_parser(top: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = top.add_parser(
        "dev",
        help="run the host locally (moto + API Gateway emulation + SQS pollers)",
        description="Start moto (DynamoDB, S3, SQS from template.yaml), an API Gateway (REST) emulation "
        "on 127.0.0.1:PORT in front of the template's functions, and pollers feeding SQS to the "
        "worker. The first stdout line is `ready http://127.0.0.1:PORT`. Ctrl-C or SIGTERM stops it.",
    )
    p.add_argument(
        "--port", type=int, default=8787, help="gateway port on 127.0.0.1 (default: 8787; 0: any free)"
    )
    p.add_argument(
        "--dev-tokens",
        action="store_true",
        help="accept bearer dev:<issuer>:<tenant>:<subject> (THREADS_DEV_TOKENS=1); local only",
    )
    p.add_argument("--template", metavar="PATH", help=argparse.SUPPRESS)
    p.add_argument(
        "--preload",
        metavar="FILE",
        action="append",
        default=[],
        help="run this Python file in the server before it serves (tests: fake models or tools)",
    )
    p.set_defaults(func=cmd_dev)


def cmd_dev(args: argparse.Namespace) -> int:
    from ..cli import CliError
    from .dev import DevError, run

    try:
        return run(args.port, args.dev_tokens, args.template, preload=args.preload)
    except DevError as exc:
        raise CliError(str(exc)) from None
