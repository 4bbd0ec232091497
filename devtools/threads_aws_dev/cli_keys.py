"""`threads-aws keys create|revoke`: mint and revoke host API keys in the StateTable
(boto3's usual configuration, AWS_ENDPOINT_URL included for a local moto server).

    threads-aws keys create --tenant T --subject S [--issuer api]   prints the token once
    threads-aws keys revoke TOKEN_OR_KEY_ID

Which table: `--table NAME`, else $STATE_TABLE, else `--stack NAME` (the deployed stack's
`StateTableName` output). Which region: `--region`, else AWS_REGION, else boto3's
(AWS_DEFAULT_REGION, the profile's config), else the one `sam deploy --guided` saved in
./samconfig.toml; none of these is a one-line error, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import tomllib
from pathlib import Path
from typing import Any

SAMCONFIG = "samconfig.toml"


def samconfig_region(path: Path = Path(SAMCONFIG)) -> str | None:
    """The region `sam deploy --guided` saved (deploy's, else global's), if any."""
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return None
    env = doc.get("default") or {}
    for command in ("deploy", "global"):
        region = ((env.get(command) or {}).get("parameters") or {}).get("region")
        if isinstance(region, str) and region:
            return region
    return None


def _session(region: str | None) -> Any:
    import boto3

    from .cli import CliError

    # AWS_REGION as the AWS CLI v2 and Lambda read it (boto3 itself reads AWS_DEFAULT_REGION)
    region = region or os.environ.get("AWS_REGION")
    session = boto3.session.Session(region_name=region) if region else boto3.session.Session()
    if session.region_name:
        return session
    saved = samconfig_region()
    if saved:
        return boto3.session.Session(region_name=saved)
    raise CliError(
        "keys: no AWS region: pass --region REGION (the stack's), or set AWS_REGION, "
        "or run `aws configure` (or run from the clone whose samconfig.toml `sam deploy --guided` wrote)"
    )


def stack_output(session: Any, stack: str, key: str) -> str:
    """One output of a deployed CloudFormation stack (a one-line CliError if it isn't there)."""
    from botocore.exceptions import BotoCoreError, ClientError

    from .cli import CliError

    try:
        stacks = session.client("cloudformation").describe_stacks(StackName=stack)["Stacks"]
    except (ClientError, BotoCoreError) as exc:
        raise CliError(f"keys: stack {stack} in {session.region_name}: {exc}") from None
    for out in (stacks[0].get("Outputs") or []) if stacks else []:
        if out.get("OutputKey") == key:
            return str(out["OutputValue"])
    raise CliError(f"keys: stack {stack} in {session.region_name} has no output {key}")


def _keys(args: argparse.Namespace) -> Any:
    from .cli import CliError

    session = _session(args.region)
    table = args.table or os.environ.get("STATE_TABLE")
    if not table and args.stack:
        table = stack_output(session, args.stack, "StateTableName")
    if not table:
        raise CliError(
            "keys need the state table: pass --stack STACK_NAME (or --table NAME, or set STATE_TABLE)"
        )
    from threads_aws.host.keys import ApiKeys
    from threads_aws.store.api_keys import ApiKeyRows

    return ApiKeys(ApiKeyRows(session.client("dynamodb"), table))


def _store(what: str, fn: Any, *a: Any) -> Any:
    """AWS failures (no credentials, no such table, denied) as one line for people."""
    from botocore.exceptions import BotoCoreError, ClientError

    from .cli import CliError

    try:
        return fn(*a)
    except (ClientError, BotoCoreError) as exc:
        raise CliError(f"keys {what}: {exc}") from None


def cmd_create(args: argparse.Namespace) -> int:
    from .cli import CliError

    keys = _keys(args)
    try:
        minted = _store("create", keys.create, args.tenant, args.subject, args.issuer)
    except ValueError as exc:  # a principal too long to key
        raise CliError(f"keys create: {exc}") from None
    print(minted.token)
    print(f"key id {minted.key_id} for {minted.principal.key} (the token is not stored; keep it now)")
    return 0


def cmd_revoke(args: argparse.Namespace) -> int:
    from .cli import EXIT_LOG

    if _store("revoke", _keys(args).revoke, args.key):
        print("revoked")
        return 0
    print("no such live key")
    return EXIT_LOG


def _where(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stack", metavar="NAME", help="read the table from this stack's StateTableName output")
    p.add_argument("--table", metavar="NAME", help="the state table (default: $STATE_TABLE)")
    p.add_argument("--region", metavar="REGION", help="default: boto3's, else samconfig.toml's")


def add_keys_parser(top: Any) -> None:
    keys = top.add_parser("keys", help="create and revoke host API keys")
    sub = keys.add_subparsers(dest="command", metavar="COMMAND", parser_class=type(keys))
    sub.required = True
    p = sub.add_parser("create", help="mint a key for a principal; prints the token once")
    p.add_argument("--tenant", required=True, metavar="T")
    p.add_argument("--subject", required=True, metavar="S")
    p.add_argument("--issuer", default="api", metavar="I", help="default: api")
    _where(p)
    p.set_defaults(func=cmd_create)
    p = sub.add_parser("revoke", help="revoke a key by its token or key id")
    p.add_argument("key", metavar="TOKEN_OR_KEY_ID")
    _where(p)
    p.set_defaults(func=cmd_revoke)
