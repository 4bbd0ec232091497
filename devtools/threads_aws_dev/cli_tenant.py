"""`threads-aws tenant delete TENANT --yes` (an erasure request) and `threads-aws sweep`, on the
deployed store: EVENTS_TABLE, STATE_TABLE and ARTIFACTS_BUCKET (boto3's usual configuration,
AWS_ENDPOINT_URL included for `threads-aws dev`'s emulated AWS).

tenant delete, in order:
1. every thread of the tenant (a consistent Scan of the META rows, not the eventually
   consistent listing index) through the API's deletion (`store.deletion`: one transaction a
   thread, subagent children cascading, `busy` threads reported and left: run it again once they
   are idle; exit 1 while any is left);
2. the tenant's own rows (`store.purge.row_kinds` of scope `tenant`: API keys, notes);
3. the sweep of the tombstones (`threads_aws.sweeper`: rows no key finds), then (when no thread
   was busy) a Scan for any StateTable item still carrying the tenant (receipts, inbox rows,
   channel routes, schedules), deleted;
4. S3: the sweeper's mark-and-sweep; objects younger than its grace (a day) stay until the next
   `threads-aws sweep` (the grace protects writes in flight, of any tenant, to shared objects).
Kept: the tombstones (thread_id, tenant, deleted_at) and released ledger rows until their TTL.
Channel installations are configuration (the channels file), not rows: the command names the
tenant's and leaves them to the operator.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

ENV = ("EVENTS_TABLE", "STATE_TABLE", "ARTIFACTS_BUCKET")


def _stores() -> tuple[Any, Any, Any]:
    from .cli import CliError

    missing = [v for v in ENV if not os.environ.get(v)]
    if missing:
        raise CliError(f"the store is not configured: set {', '.join(missing)}")
    import boto3
    from threads_aws.sandbox.provider import S3WorkspaceProvider
    from threads_aws.store.aws import stores
    from threads_aws.store.names import ResourceNames
    from threads_aws.store.sweep import Sweep

    names = ResourceNames(
        events_table=os.environ["EVENTS_TABLE"],
        state_table=os.environ["STATE_TABLE"],
        bucket=os.environ["ARTIFACTS_BUCKET"],
        run_step_queue_url="",
        inbox_queue_url="",
    )
    ddb, s3 = boto3.client("dynamodb"), boto3.client("s3")
    bundle = stores(ddb, s3, names)
    return bundle, Sweep(ddb, names.state_table, s3, names.bucket), S3WorkspaceProvider(bundle.artifacts)


def _now() -> int:
    from threads_aws.store.records import wall_ms

    return wall_ms()


def cmd_delete(args: argparse.Namespace) -> int:
    from threads_aws.store.deletion import DeletionRefused, ThreadDeletion
    from threads_aws.store.purge import Purge
    from threads_aws.store.records import NotFound
    from threads_aws.sweeper import sweep

    from .cli import EXIT_LOG, CliError

    if not args.yes:
        raise CliError(f"tenant delete removes every thread, key and note of {args.tenant}: pass --yes")
    stores, sweep_store, sandbox = _stores()
    tenant = args.tenant
    deletion = ThreadDeletion(stores, clock=_now)
    deleted, busy = 0, []
    for thread_id, owner, _ttl in sweep_store.threads():
        if owner != tenant:
            continue
        try:
            deleted += deletion.delete(tenant, thread_id, reason="tenant")
        except DeletionRefused:
            busy.append(thread_id)
        except NotFound:
            pass  # a child its parent's deletion took along
    purge = Purge(stores)
    purge.tenant_rows(tenant)
    report = sweep(stores, sweep_store, sandbox, now=_now())
    # the tenant-wide net only once no thread is left: a busy thread's rows carry the tenant too
    stray = [] if busy else list(sweep_store.carrying(tenant))
    purge.delete_keys(stray)
    print(f"deleted {deleted} threads of {tenant}; {len(stray) + report.stray_rows} other rows removed")
    gc = report.gc
    if gc is not None:
        print(f"objects deleted {len(gc.deleted)}, kept (younger than the grace) {gc.kept_young}")
    for inst in _installations(tenant):
        print(f"channel installation {inst} is configuration: remove it from the channels file")
    if busy:
        print(f"busy (running or in doubt), not deleted: {' '.join(busy)}; run again once idle")
        return EXIT_LOG
    return 0


def _installations(tenant: str) -> list[str]:
    try:
        from threads_aws.channels.installations import load_installations

        installs = load_installations()
    except Exception:  # noqa: BLE001 - no channels file configured here: nothing to name
        return []
    return [f"{i.channel}/{i.installation_id}" for i in installs.all if i.tenant == tenant]


def cmd_sweep(args: argparse.Namespace) -> int:
    from threads_aws.sandbox.gc import DEFAULT_GRACE_MS
    from threads_aws.sweeper import sweep

    stores, sweep_store, sandbox = _stores()
    grace = DEFAULT_GRACE_MS if args.grace_ms is None else args.grace_ms
    report = sweep(stores, sweep_store, sandbox, now=_now(), grace_ms=grace)
    gc = report.gc
    print(
        f"expired {len(report.expired)} (busy {len(report.busy)}), tombstones finished"
        f" {len(report.finished)}, stray rows {report.stray_rows}, objects deleted"
        f" {len(gc.deleted) if gc else 0}, ledger rows released {gc.released_rows if gc else 0}"
    )
    return 0


def cmd_index_backfill(args: argparse.Namespace) -> int:
    from .cli import CliError

    table = os.environ.get("STATE_TABLE")
    if not table:
        raise CliError("the store is not configured: set STATE_TABLE")
    import boto3
    from threads_aws.store.thread_backfill import backfill

    print(f"thread rows given the listing's index keys: {backfill(boto3.client('dynamodb'), table)}")
    return 0


def add_tenant_parser(top: Any) -> None:
    from .cli import _nonneg_int

    tenant = top.add_parser("tenant", help="operator: delete a tenant's whole data (erasure)")
    sub = tenant.add_subparsers(dest="command", metavar="COMMAND", parser_class=type(tenant))
    sub.required = True
    p = sub.add_parser(
        "delete",
        help="delete every thread, key, note and row of TENANT",
        description=(__doc__ or "").split("\n\n")[1],
    )
    p.add_argument("tenant", metavar="TENANT")
    p.add_argument("--yes", action="store_true", help="confirm: this cannot be undone")
    p.set_defaults(func=cmd_delete)
    p = top.add_parser(
        "sweep",
        help="operator: one sweeper pass (retention, deleted threads' last rows, unreferenced objects)",
    )
    p.add_argument(
        "--grace-ms", type=_nonneg_int, metavar="MS", help="objects younger than this stay (default: a day)"
    )
    p.set_defaults(func=cmd_sweep)
    p = top.add_parser(
        "index-backfill",
        help="operator: once after upgrading, list the threads written before the listing's indexes",
    )
    p.set_defaults(func=cmd_index_backfill)
