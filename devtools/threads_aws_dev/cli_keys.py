"""`threads-aws keys create|revoke`: mint and revoke host API keys in the StateTable ($STATE_TABLE;
boto3's usual configuration, AWS_ENDPOINT_URL included for a local moto server).

    threads-aws keys create --tenant T --subject S [--issuer api]   prints the token once
    threads-aws keys revoke TOKEN_OR_KEY_ID
"""

from __future__ import annotations

import argparse
import os
from typing import Any


def _keys() -> Any:
    from .cli import CliError

    table = os.environ.get("STATE_TABLE")
    if not table:
        raise CliError("keys need the store: set STATE_TABLE")
    import boto3
    from threads_aws.host.keys import ApiKeys
    from threads_aws.store.api_keys import ApiKeyRows

    return ApiKeys(ApiKeyRows(boto3.session.Session().client("dynamodb"), table))


def cmd_create(args: argparse.Namespace) -> int:
    from .cli import CliError

    try:
        minted = _keys().create(args.tenant, args.subject, args.issuer)
    except ValueError as exc:  # a principal too long to key
        raise CliError(f"keys create: {exc}") from None
    print(minted.token)
    print(f"key id {minted.key_id} for {minted.principal.key} (the token is not stored; keep it now)")
    return 0


def cmd_revoke(args: argparse.Namespace) -> int:
    from .cli import EXIT_LOG

    if _keys().revoke(args.key):
        print("revoked")
        return 0
    print("no such live key")
    return EXIT_LOG


def add_keys_parser(top: Any) -> None:
    keys = top.add_parser("keys", help="create and revoke host API keys")
    sub = keys.add_subparsers(dest="command", metavar="COMMAND", parser_class=type(keys))
    sub.required = True
    p = sub.add_parser("create", help="mint a key for a principal; prints the token once")
    p.add_argument("--tenant", required=True, metavar="T")
    p.add_argument("--subject", required=True, metavar="S")
    p.add_argument("--issuer", default="api", metavar="I", help="default: api")
    p.set_defaults(func=cmd_create)
    p = sub.add_parser("revoke", help="revoke a key by its token or key id")
    p.add_argument("key", metavar="TOKEN_OR_KEY_ID")
    p.set_defaults(func=cmd_revoke)
