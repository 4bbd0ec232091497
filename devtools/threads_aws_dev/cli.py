"""`threads-aws` command line: inspect, verify and move branch exports (semantics.md §1); the
local host (`dev`, local/command.py); API keys (`keys`); and the commands for people against a
host (`run`, `follow`, `show`, `approve`, ...: terminal/commands.py, exit codes in terminal/).

    threads-aws log verify FILE [--now MS] [--artifacts DIR]
    threads-aws log reduce FILE [--projections] [--now MS] [--artifacts DIR]
    threads-aws log export FILE [-o OUT] [--now MS] [--artifacts DIR]
    threads-aws log export --branch BRANCH_ID [-o OUT]         (DynamoDB/S3 store, env-configured)
    threads-aws log import FILE --tenant T [--repair] [--now MS] (DynamoDB/S3 store, env-configured)
    threads-aws log repair --branch BRANCH_ID [--now MS]        (a torn-tail import's recovery)
    threads-aws log render FILE [--artifacts DIR] [--purpose turn|compaction] [-o OUT] [--now MS]

Exit status: 0 ok; 1 the log is refused (a LogError: `error <code> at seq <seq>: <message>` on
stderr); 2 usage, file I/O or store configuration problems (one line on stderr); 3 an internal
error (a bug: one line on stderr, the traceback only with THREADS_AWS_DEBUG=1).

Startup is kept fast: this module imports only the standard library at load time; the log core
(schema validators, fold, render, projections) and boto3 are imported inside the subcommands.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:  # pragma: no cover - typing only
    from threads_aws.core.importer import Imported

PROG = "threads-aws"
EXIT_OK = 0
EXIT_LOG = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3

_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
_STORE_ENV = ("EVENTS_TABLE", "STATE_TABLE", "ARTIFACTS_BUCKET")


class CliError(Exception):
    """A user-facing failure that is not a log ErrorCode: bad path, unreadable file, no store."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


# --------------------------------------------------------------------------------------------
# I/O helpers
# --------------------------------------------------------------------------------------------


def _os_reason(exc: OSError) -> str:
    return exc.strerror or exc.__class__.__name__


def _read_file(path: str) -> bytes:
    if path == "-":
        try:
            return sys.stdin.buffer.read()
        except (OSError, AttributeError) as exc:
            raise CliError(f"cannot read stdin: {exc}") from None
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise CliError(f"cannot read {path}: {_os_reason(exc)}") from None


def _write_stdout_bytes(data: bytes) -> None:
    out = sys.stdout
    out.flush()
    buf = getattr(out, "buffer", None)
    if buf is not None:
        buf.write(data)
        buf.flush()
    else:  # a text-only stream (some test harnesses)
        out.write(data.decode("utf-8", errors="replace"))
        out.flush()


def _write_output(path: str | None, data: bytes) -> None:
    """Write `data` to `path` (atomically: temp file then rename) or to stdout for None/'-'."""
    if path is None or path == "-":
        _write_stdout_bytes(data)
        return
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
    except OSError as exc:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise CliError(f"cannot write {path}: {_os_reason(exc)}") from None


def _now(args: argparse.Namespace) -> int:
    # The wall clock is read only here, in the CLI; the log core always takes an injected clock.
    now = getattr(args, "now", None)
    return now if now is not None else time.time_ns() // 1_000_000


def _nonneg_int(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0 or value > 2**53 - 1:
        raise argparse.ArgumentTypeError(f"out of range (0..2^53-1): {text}")
    return value


# --------------------------------------------------------------------------------------------
# Artifacts from a directory of files named by their sha256
# --------------------------------------------------------------------------------------------


def dir_artifacts(directory: str) -> Callable[[dict[str, Any]], bytes]:
    """A `get_artifact(ref)` over DIR/<sha256>, verifying length and sha256.

    Absent → `artifact_missing`; wrong length or hash → `artifact_corrupt` (LogError, seq filled
    in by the caller: the event that carries the ref).
    """
    from threads_aws.core.errors import LogError

    root = Path(directory)
    if not root.is_dir():
        raise CliError(f"--artifacts {directory}: not a directory")

    def get_artifact(ref: dict[str, Any]) -> bytes:
        sha = ref.get("sha256") if isinstance(ref, dict) else None
        if not isinstance(sha, str) or not _SHA256_HEX.match(sha):
            raise LogError("artifact_missing", None, f"artifact reference without a sha256: {sha!r}")
        path = root / sha
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise LogError("artifact_missing", None, f"artifact {sha} not in {directory}") from None
        except OSError as exc:
            raise CliError(f"cannot read artifact {path}: {_os_reason(exc)}") from None
        length = ref.get("bytes")
        if isinstance(length, int) and len(data) != length:
            raise LogError("artifact_corrupt", None, f"artifact {sha}: {len(data)} bytes, expected {length}")
        if hashlib.sha256(data).hexdigest() != sha:
            raise LogError("artifact_corrupt", None, f"artifact {sha}: content hash differs")
        return data

    return get_artifact


def _no_artifacts(ref: dict[str, Any]) -> bytes:
    from threads_aws.core.errors import LogError

    sha = ref.get("sha256") if isinstance(ref, dict) else None
    raise LogError("artifact_missing", None, f"artifact {sha} needed (pass --artifacts DIR)")


# --------------------------------------------------------------------------------------------
# Import of a FILE (the shared first step)
# --------------------------------------------------------------------------------------------


def _load(args: argparse.Namespace, *, verify_requests: bool = True) -> Imported:
    """Read and import FILE; with --artifacts (and `verify_requests`) also check every
    model_request against Render v1 of the events before it."""
    from threads_aws.core.importer import import_log

    data = _read_file(args.file)
    verify = None
    artifacts = getattr(args, "artifacts", None)
    if verify_requests and artifacts is not None:
        get_artifact = dir_artifacts(artifacts)

        def verify(imp: Imported) -> None:
            from threads_aws.core.render import verify_requests as check

            check(imp.fold.known_events(), get_artifact)

    return import_log(data, now=_now(args), verify=verify)


def _head(imp: Imported) -> tuple[int, str]:
    line = imp.head
    return line.seq, line.hash


def _unverified_note(imp: Imported) -> str | None:
    if imp.head_verified:
        return None
    if imp.torn is not None:
        return f"head unverified (torn tail of {len(imp.torn)} bytes dropped)"
    return "head unverified (no head checkpoint)"


def _line_count(imp: Imported) -> int:
    return sum(1 + len(seg.lines) for seg in imp.segments)


# --------------------------------------------------------------------------------------------
# Subcommands
# --------------------------------------------------------------------------------------------


def cmd_verify(args: argparse.Namespace) -> int:
    imp = _load(args)
    seq, hash_ = _head(imp)
    print(f"ok {_line_count(imp)} lines, head seq {seq} {hash_}")
    note = _unverified_note(imp)
    if note:
        print(note)
    return EXIT_OK


def cmd_reduce(args: argparse.Namespace) -> int:
    from threads_aws.core.reduced_state import reduce

    imp = _load(args)
    state: dict[str, Any] = reduce(imp.fold, imp.head.hash)
    if args.projections:
        from threads_aws.core.projections import all_projections

        state["projections"] = all_projections(imp.fold.events, _now(args))
    note = _unverified_note(imp)
    if note:
        print(f"{PROG}: note: {note}", file=sys.stderr)
    print(json.dumps(state, indent=2, sort_keys=True, ensure_ascii=False))
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    if args.branch is not None:
        if args.file is not None:
            raise CliError("log export: give either FILE or --branch, not both")
        return _export_from_store(args)
    if args.file is None:
        raise CliError("log export: FILE or --branch BRANCH_ID is required")
    from threads_aws.core.importer import export_bytes
    from threads_aws.core.lines import head_line

    imp = _load(args)
    seq, hash_ = _head(imp)
    out = export_bytes(imp.segments, head_line(imp.branch_id, seq, hash_))
    note = _unverified_note(imp)
    if note:
        print(f"{PROG}: note: {note}; the export ends at seq {seq}", file=sys.stderr)
    _write_output(args.output, out)
    return EXIT_OK


def cmd_render(args: argparse.Namespace) -> int:
    from threads_aws.core.render import render_request

    imp = _load(args, verify_requests=False)
    get_artifact = dir_artifacts(args.artifacts) if args.artifacts is not None else _no_artifacts
    body = render_request(imp.fold.known_events(), get_artifact, purpose=args.purpose)
    _write_output(args.output, body)
    return EXIT_OK


# A writable open of a log refused for one of these is `log_corrupt{at_seq, cause}` (semantics.md
# §1 "Corruption at seq k"); the others (an unknown format or critical type, a conflict with the
# stored bytes, a missing artifact) are not corruption and keep their own code.
CORRUPTION = frozenset(
    {"invalid_line", "seq_mismatch", "prev_hash_mismatch", "head_mismatch", "invalid_transition"}
)


def cmd_import(args: argparse.Namespace) -> int:
    from threads_aws.core.errors import LogError

    tenant = args.tenant or os.environ.get("THREADS_TENANT")
    if not tenant:
        raise CliError("log import: the owning tenant is required (--tenant T or THREADS_TENANT)")
    store = _open_store()
    try:
        imp = _load(args)
    except LogError as exc:
        if exc.code not in CORRUPTION:
            raise
        raise LogError("log_corrupt", exc.seq, f"cause {exc.code}: {exc.message}") from None
    report = import_into_store(store, imp, tenant=tenant, now=_now(args))
    seq, hash_ = _head(imp)
    print(f"imported {imp.branch_id}: {report}, head seq {seq} {hash_}")
    note = _unverified_note(imp)
    if note:
        print(note)
        rec = _store_call("read head", store.events.head, imp.branch_id) if args.repair else None
        if rec is not None and rec.state == "inspection_only" and imp.torn is not None:
            _repair(store, imp.branch_id, _now(args), at_offset=imp.torn_offset)
    return EXIT_OK


def cmd_repair(args: argparse.Namespace) -> int:
    _repair(_open_store(), args.branch, _now(args))
    return EXIT_OK


def _repair(store: _Store, branch_id: str, now: int | None, *, at_offset: int | None = None) -> None:
    """The torn tail's recovery (`threads_aws.repair`): log_repaired, then the branch is ready."""
    from threads_aws.repair import repair_torn_tail

    done = _store_call(
        f"repair {branch_id}",
        repair_torn_tail,
        store.events,
        branch_id,
        holder_id=f"cli-{os.getpid()}",
        now=now,
        at_offset=at_offset,
    )
    d = done.data
    what = "log_repaired" if done.appended else "already log_repaired"
    print(
        f"repaired {branch_id}: {what} at seq {done.seq} ({d['truncated_bytes']} bytes dropped at "
        f"offset {d['at_offset']}, kept as artifact {d['dropped_ref']['sha256']}); the branch is ready"
    )


# --------------------------------------------------------------------------------------------
# The DynamoDB/S3 store (threads_aws.store, env-configured)
# --------------------------------------------------------------------------------------------


class _Store:
    def __init__(self, events: Any, artifacts: Any) -> None:
        self.events = events
        self.artifacts = artifacts


def _open_store() -> _Store:
    """EventStore + ArtifactStore from EVENTS_TABLE, STATE_TABLE and ARTIFACTS_BUCKET (boto3
    reads region, credentials and AWS_ENDPOINT_URL from its usual environment)."""
    import importlib

    try:
        events_mod = importlib.import_module("threads_aws.store.events")
        artifacts_mod = importlib.import_module("threads_aws.store.artifacts")
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("threads_aws.store"):
            raise CliError(
                f"the DynamoDB/S3 store is not available in this build ({exc.name} is missing); "
                "use `log verify`/`log export FILE` on files instead"
            ) from None
        raise CliError(f"the store needs {exc.name}, which is not installed") from None
    missing = [name for name in _STORE_ENV if not os.environ.get(name)]
    if missing:
        raise CliError(f"the store is not configured: set {', '.join(missing)}")
    try:
        import boto3

        ddb = boto3.client("dynamodb")
        s3 = boto3.client("s3")
    except Exception as exc:  # NoRegionError and friends: configuration, not a bug
        raise CliError(f"cannot create AWS clients: {exc}") from None
    artifacts = artifacts_mod.ArtifactStore(s3, os.environ["ARTIFACTS_BUCKET"])
    events = events_mod.EventStore(ddb, os.environ["EVENTS_TABLE"], os.environ["STATE_TABLE"], artifacts)
    return _Store(events, artifacts)


def _store_call(what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run a store operation; AWS/store failures become one-line CliErrors (LogErrors pass)."""
    from botocore.exceptions import BotoCoreError, ClientError
    from threads_aws.store.records import StoreError

    try:
        return fn(*args, **kwargs)
    except (ClientError, BotoCoreError, StoreError) as exc:
        raise CliError(f"store: {what}: {exc}") from None


def import_into_store(store: _Store, imp: Imported, *, tenant: str, now: int) -> str:
    """Store the verified export (see `store.ingest`); one-line errors for people."""
    from threads_aws.store.ingest import import_into_store as store_import

    report = _store_call("import", store_import, store.events, store.artifacts, imp, tenant=tenant, now=now)
    if report.noop:
        return "already stored (no-op)"
    return f"{report.created} branch(es) created, {report.appended} line(s) appended"


def _export_from_store(args: argparse.Namespace) -> int:
    store = _open_store()
    rec = _store_call("read head", store.events.head, args.branch)
    if rec is None:
        raise CliError(f"branch {args.branch} not found")
    data = _store_call(f"export {args.branch}", store.events.export, args.branch)
    _write_output(args.output, data)
    return EXIT_OK


# --------------------------------------------------------------------------------------------
# Parser and entry point
# --------------------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _add_common(p: argparse.ArgumentParser, *, artifacts_help: str | None) -> None:
    p.add_argument(
        "--now",
        type=_nonneg_int,
        metavar="MS",
        help="the clock, epoch ms (default: the wall clock); snapshot expiry and projections use it",
    )
    if artifacts_help is not None:
        p.add_argument("--artifacts", metavar="DIR", help=artifacts_help)


_VERIFY_ARTIFACTS = (
    "directory of artifacts named by their sha256; enables request verification "
    "(every model_request's bytes must equal Render v1 of the events before it)"
)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="The threads host on AWS: run and follow agent runs, approve, answer, inspect "
        "threads (run, follow, show, approve, ...: `threads-aws run --help`); tools for branch "
        "exports (log); the local host (dev); API keys (keys).",
        epilog="exit status: 0 ok, 1 log refused (error <code> at seq <seq>) or refused by the host, "
        "2 usage/I/O/store, 3 internal; host commands also: 4 host unreachable, 5 not served, "
        "10 run failed, 11 parked, 12 cancelled, 13 budget exhausted, 14 handed off, 130 interrupted",
    )
    top = parser.add_subparsers(dest="group", metavar="COMMAND", parser_class=_Parser)
    top.required = True
    log = top.add_parser("log", help="verify, reduce, export, import and render branch exports")
    sub = log.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    p = sub.add_parser(
        "verify",
        help="import FILE read-only and report its head",
        description="Import FILE as a branch export (every line, chain, fork link and the head "
        "checkpoint). Prints `ok <n> lines, head seq <s> <hash>`; a torn tail is dropped and "
        "reported as `head unverified`.",
    )
    p.add_argument("file", metavar="FILE", help="a JSONL branch export ('-' for stdin)")
    _add_common(p, artifacts_help=_VERIFY_ARTIFACTS)
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("reduce", help="print the ReducedState of FILE as JSON")
    p.add_argument("file", metavar="FILE", help="a JSONL branch export ('-' for stdin)")
    p.add_argument("--projections", action="store_true", help='add "projections": every named projection')
    _add_common(p, artifacts_help=_VERIFY_ARTIFACTS)
    p.set_defaults(func=cmd_reduce)

    p = sub.add_parser(
        "export",
        help="re-export FILE (or a stored branch) after verifying it",
        description="Verify FILE, then write its header and event lines and a Head checkpoint: "
        "byte-identical for a clean export; a torn tail is not re-exported. With --branch, export "
        "a branch from the DynamoDB/S3 store (EVENTS_TABLE, STATE_TABLE, ARTIFACTS_BUCKET).",
    )
    p.add_argument("file", metavar="FILE", nargs="?", help="a JSONL branch export ('-' for stdin)")
    p.add_argument("--branch", metavar="BRANCH_ID", help="export this branch from the store instead")
    p.add_argument("-o", "--output", metavar="OUT", help="output file (default: stdout)")
    _add_common(p, artifacts_help=_VERIFY_ARTIFACTS)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser(
        "import",
        help="import FILE into the DynamoDB/S3 store",
        description="Verify FILE and store it (EVENTS_TABLE, STATE_TABLE, ARTIFACTS_BUCKET). "
        "Identical bytes already stored are a no-op; a differing byte is seq_conflict; a corrupt "
        "line is log_corrupt at its seq (cause: the precise code); a torn tail is dropped, kept as "
        "an artifact, and the branch left inspection_only (see --repair and `log repair`).",
    )
    p.add_argument("file", metavar="FILE", help="a JSONL branch export ('-' for stdin)")
    p.add_argument("--tenant", metavar="T", help="owning tenant of a new thread (default: $THREADS_TENANT)")
    p.add_argument(
        "--repair",
        action="store_true",
        help="a torn tail: recover at once (log_repaired; the branch is ready) instead of leaving "
        "the branch inspection_only",
    )
    _add_common(p, artifacts_help=_VERIFY_ARTIFACTS)
    p.set_defaults(func=cmd_import)

    p = sub.add_parser(
        "repair",
        help="recover a stored branch left inspection_only by a torn-tail import",
        description="Append log_repaired{truncated_bytes, at_offset, dropped_ref} under the "
        "branch's lease and make it ready (its head verified). Idempotent.",
    )
    p.add_argument("--branch", metavar="BRANCH_ID", required=True, help="the stored branch")
    _add_common(p, artifacts_help=None)
    p.set_defaults(func=cmd_repair)

    p = sub.add_parser(
        "render",
        help="print the Render v1 bytes of the next request",
        description="Verify FILE, then write the Render v1 bytes of the next model request.",
    )
    p.add_argument("file", metavar="FILE", help="a JSONL branch export ('-' for stdin)")
    p.add_argument("--purpose", choices=("turn", "compaction"), default="turn", help="default: turn")
    p.add_argument("-o", "--output", metavar="OUT", help="output file (default: stdout)")
    _add_common(p, artifacts_help="directory of artifacts named by their sha256 (for rendered parts)")
    p.set_defaults(func=cmd_render)

    from .local.command import add_dev_parser

    add_dev_parser(top)
    from .cli_keys import add_keys_parser

    add_keys_parser(top)
    from .cli_tenant import add_tenant_parser

    add_tenant_parser(top)
    from .smoke import add_smoke_parser

    add_smoke_parser(top)
    from .terminal.commands import add_people_parsers

    add_people_parsers(top)
    return parser


def _log_error_line(exc: Any) -> str:
    where = f" at seq {exc.seq}" if exc.seq is not None else ""
    return f"error {exc.code}{where}: {exc.message}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help or a usage error: argparse already printed
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    try:
        return int(args.func(args))
    except CliError as exc:
        print(f"{PROG}: {exc.message}", file=sys.stderr)
        return exc.code
    except BrokenPipeError:
        # stdout closed early (e.g. piped into `head`): stop quietly.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return EXIT_LOG
    except KeyboardInterrupt:
        return 130
    except ModuleNotFoundError as exc:
        top = (exc.name or "").split(".")[0]
        if not top or top in ("threads_aws", "threads_aws_dev"):  # our own module: a bug, below
            return _internal(exc)
        print(f"{PROG}: {missing_dependency_hint(top)}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:
        return _internal(exc)


# An optional dependency a command imports when it runs → what installs it.
_INSTALLS = {"threads_aws_client": "-e clients/python", "httpx": "-e clients/python"}
_INSTALL_LOCAL = "-c layers/threads_aws/constraints.txt -e clients/python -e '.[local]'"


def missing_dependency_hint(module: str) -> str:
    what = _INSTALLS.get(module, _INSTALL_LOCAL)
    return f"this command needs the package {module!r}, which is not installed: pip install {what}"


def _internal(exc: Exception) -> int:
    from threads_aws.core.errors import LogError

    if isinstance(exc, LogError):
        print(_log_error_line(exc), file=sys.stderr)
        return EXIT_LOG
    if isinstance(exc, OSError):
        print(f"{PROG}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if os.environ.get("THREADS_AWS_DEBUG") == "1":
        raise exc
    print(f"{PROG}: internal error: {exc.__class__.__name__}: {exc}", file=sys.stderr)
    return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
