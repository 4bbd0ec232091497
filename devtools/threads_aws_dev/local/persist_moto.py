"""moto's server with its state on disk: a write-ahead journal of what moto accepted, replayed
into a fresh moto on start (`persist` holds the file format, `persist_effects` the records
written by effect).

Ordering and durability, up front:
- Every request that can change state (classified below) runs under one apply lock: moto
  applies it, and if it changed state its record is appended before the lock is released, so
  journal order is apply order (a conditional write that passed on a state replays on the same
  state). A request that failed (non-2xx) changed nothing and is not journaled.
- No response leaves before the journal is durable up to everything applied when it was
  produced (`Journal.sync_to`, a group commit): a 2xx write is on disk, and a read (or a failed
  condition) never shows a client state that a crash could take back.
- DynamoDB item writes (PutItem, UpdateItem, DeleteItem, BatchWriteItem, TransactWriteItems)
  are journaled by effect: the after-image of every item the request touched, read back from
  moto under the lock, one record per request (a transaction stays all-or-nothing). Replay sets
  the images without evaluating any condition again, so it cannot decide differently, and it
  costs a fraction of the original request (moto's expression parsing is most of that).
- S3 and every other request that may change state (table or queue settings, ...) are
  journaled as received (the WSGI environ that matters + body; bodies over `persist.BLOB_MIN`,
  i.e. large artifacts, go to blobs/ by sha256) and replayed through moto's request handling.
  Reads (GetItem, Query, Scan, GetObject, ...) are not journaled.
- SQS is journaled by effect, not by request: a message added (its id, body, attributes, group,
  dedup id, sent time) and messages deleted (by id, resolved from the receipt handle at delete
  time). ReceiveMessage and ChangeMessageVisibility are not journaled: receipt handles are
  random and visibility is a lease, so after a restart a message that was received but not
  deleted before the crash is visible again (at-least-once; the worker is idempotent). Receive
  counts restart at 0, and a move to a dead-letter queue (done by moto inside a receive) is not
  kept: the message is back in its source queue.
- Template resources are not journaled: `threads-aws dev` creates them from template.yaml on
  every start, then replays. A replayed record that fails means the state no longer fits the
  template (or moto changed): PersistError, never a silently different state.
- Compaction (on start, once the journal outgrows the snapshot): the state just replayed is
  written as a logical snapshot (one record per DynamoDB item, S3 object, SQS message, applied
  through moto's backend API), rather than a pickle of moto's objects, which holds locks and
  ties the files to one moto version.

This is dev tooling (moto server only); nothing in the Lambda runtime path imports it.
"""

from __future__ import annotations

import io
import logging
import re
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from . import persist_effects as effects
from .moto_wsgi import WsgiServer, moto_app
from .persist import PersistError, StateDir

log = logging.getLogger("threads_aws_dev.local")

COMPACT_MIN_BYTES = 8 * 1024 * 1024  # below this a journal is replayed as it is

DDB_READS = frozenset(
    "GetItem BatchGetItem Query Scan TransactGetItems DescribeTable ListTables DescribeTimeToLive "
    "DescribeContinuousBackups ListTagsOfResource DescribeLimits DescribeEndpoints ListBackups "
    "DescribeBackup ListGlobalTables DescribeGlobalTable DescribeKinesisStreamingDestination "
    "DescribeTableReplicaAutoScaling ListExports DescribeExport ListImports DescribeImport "
    "GetResourcePolicy DescribeContributorInsights ListContributorInsights "
    "GetRecords GetShardIterator DescribeStream ListStreams".split()
)
SQS_READS = frozenset(
    "ReceiveMessage ChangeMessageVisibility ChangeMessageVisibilityBatch GetQueueUrl "
    "GetQueueAttributes ListQueues ListQueueTags ListDeadLetterSourceQueues ListMessageMoveTasks".split()
)
DDB_ITEM_WRITES = frozenset("PutItem UpdateItem DeleteItem BatchWriteItem TransactWriteItems".split())
SQS_EFFECTS = frozenset("SendMessage SendMessageBatch DeleteMessage DeleteMessageBatch PurgeQueue".split())

_KEEP_ENV = frozenset(
    "REQUEST_METHOD PATH_INFO QUERY_STRING CONTENT_TYPE RAW_URI REQUEST_URI SCRIPT_NAME "
    "SERVER_PROTOCOL".split()
)
_DROP_HTTP = frozenset(
    "HTTP_CONNECTION HTTP_KEEP_ALIVE HTTP_USER_AGENT HTTP_ACCEPT_ENCODING HTTP_AMZ_SDK_INVOCATION_ID "
    "HTTP_AMZ_SDK_REQUEST HTTP_TRANSFER_ENCODING HTTP_CONTENT_LENGTH HTTP_EXPECT".split()
)
_SCOPE = re.compile(r"Credential=[^/,\s]*/[^/]*/[^/]*/([^/]*)/")


# ---------------------------------------------------------------- classifying requests


def _service(environ: dict[str, Any]) -> str:
    m = _SCOPE.search(environ.get("HTTP_AUTHORIZATION", ""))
    if m:
        return m.group(1).lower()
    cred = parse_qs(environ.get("QUERY_STRING", "")).get("X-Amz-Credential")  # presigned URLs
    if cred:
        parts = cred[0].split("/")
        return parts[3].lower() if len(parts) > 3 else ""
    return ""


def _action(environ: dict[str, Any], body: bytes) -> str:
    target = environ.get("HTTP_X_AMZ_TARGET", "")
    if target:
        return target.rpartition(".")[2]
    if environ.get("CONTENT_TYPE", "").startswith("application/x-www-form-urlencoded"):
        found = parse_qs(body.decode("utf-8", "replace")).get("Action")
        if found:
            return found[0]
    return (parse_qs(environ.get("QUERY_STRING", "")).get("Action") or [""])[0]


def _region(environ: dict[str, Any]) -> str:
    m = re.search(r"Credential=[^/,\s]*/[^/]*/([^/]*)/", environ.get("HTTP_AUTHORIZATION", ""))
    return m.group(1) if m else "us-east-1"


def classify(environ: dict[str, Any], body: bytes) -> str:
    """ "read" (changes nothing kept), "ddb"/"sqs" (journaled by effect) or "raw" (journaled as
    sent); anything unknown is "raw": journaling a read is harmless, missing a write is not."""
    service = _service(environ)
    if service == "dynamodb":
        action = _action(environ, body)
        if action in DDB_ITEM_WRITES:
            return "ddb"
        return "read" if action in DDB_READS else "raw"
    if service in ("iam", "sts"):  # the functions' roles: `local.iam` makes them on every start
        return "read"
    if service == "sqs":
        action = _action(environ, body)
        if action in SQS_EFFECTS:
            return "sqs"
        return "read" if action in SQS_READS else "raw"
    if environ.get("REQUEST_METHOD") in ("GET", "HEAD", "OPTIONS"):
        return "read"
    return "raw"


# ---------------------------------------------------------------- WSGI plumbing


def read_body(environ: dict[str, Any]) -> bytes:
    """The whole request body, with the environ rewired to a replayable copy of it."""
    stream = environ.get("wsgi.input")
    if stream is None:
        body = b""
    elif environ.get("wsgi.input_terminated"):
        body = stream.read()
    else:
        n = int(environ.get("CONTENT_LENGTH") or 0)
        body = stream.read(n) if n > 0 else b""
    environ["wsgi.input"] = io.BytesIO(body)
    environ["CONTENT_LENGTH"] = str(len(body))
    environ.pop("wsgi.input_terminated", None)
    environ.pop("HTTP_TRANSFER_ENCODING", None)
    return body


def call_app(app: Callable[..., Any], environ: dict[str, Any]) -> tuple[str, list[Any], bytes]:
    """Run a WSGI app to completion: (status line, headers, body)."""
    captured: list[Any] = []
    chunks: list[bytes] = []

    def start_response(status: str, headers: list[Any], exc_info: Any = None) -> Callable[[bytes], Any]:
        captured[:] = [status, headers]
        return chunks.append

    it = app(environ, start_response)
    try:
        for chunk in it:
            chunks.append(chunk)
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            close()
    return captured[0], captured[1], b"".join(chunks)


def http_meta(environ: dict[str, Any]) -> dict[str, Any]:
    from moto.core.request import PRESERVED_HEADER_NAMES_ENVIRON_KEY

    env = {
        k: v
        for k, v in environ.items()
        if isinstance(v, str) and (k in _KEEP_ENV or (k.startswith("HTTP_") and k not in _DROP_HTTP))
    }
    meta: dict[str, Any] = {"k": "http", "env": env}
    names = environ.get(PRESERVED_HEADER_NAMES_ENVIRON_KEY)
    if names:
        meta["names"] = dict(names)
    return meta


# ---------------------------------------------------------------- the journaling front


class JournalingApp:
    """WSGI middleware in front of moto's app. Passes everything through until `arm`ed (the
    template's resources are created through it on every start, unjournaled)."""

    def __init__(self, app: Callable[..., Any], state: StateDir) -> None:
        self.app = app
        self.state = state
        self.journal: Any = None
        self.lock = threading.Lock()
        self.failed: BaseException | None = None

    def arm(self) -> None:
        self.journal = self.state.start_journal()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        journal = self.journal
        if journal is None:
            return self.app(environ, start_response)
        if self.failed is not None:
            return self._refuse(start_response)
        body = read_body(environ)
        kind = classify(environ, body)
        if kind == "read":
            status, headers, out = call_app(self.app, environ)
            with self.lock:  # whatever this read saw was applied, and so appended, by now
                end = journal.written
        else:
            meta, stored = self.state.split_body(http_meta(environ), body) if kind == "raw" else ({}, b"")
            with self.lock:
                if kind == "sqs":
                    effects.collect()
                try:
                    status, headers, out = call_app(self.app, environ)
                finally:
                    records = effects.collected()  # SQS effects happened, whatever the status
                try:
                    if kind == "raw" and status[:1] == "2":
                        journal.append(meta, stored)
                    elif kind == "ddb" and status[:1] == "2":
                        journal.append(effects.ddb_effect(_action(environ, body), _region(environ), body))
                    for rec in records:
                        journal.append(rec)
                except Exception as exc:  # applied in memory, not on disk: stop taking requests
                    self.failed = exc
                    log.exception("state journal write failed: restart `threads-aws dev`")
                    return self._refuse(start_response)
                end = journal.written
        journal.sync_to(end)
        start_response(status, headers)
        return [out]

    def _refuse(self, start_response: Callable[..., Any]) -> list[bytes]:
        start_response("500 Internal Server Error", [("Content-Type", "text/plain")])
        return [f"threads-aws dev: the state journal failed ({self.failed}); restart the server".encode()]


# ---------------------------------------------------------------- replay and snapshot


def _replay_http(app: Callable[..., Any], meta: dict[str, Any], body: bytes, port: int) -> str:
    from moto.core.request import PRESERVED_HEADER_NAMES_ENVIRON_KEY

    environ: dict[str, Any] = {
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": False,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": str(port),
        "REMOTE_ADDR": "127.0.0.1",
        "SCRIPT_NAME": "",
        "QUERY_STRING": "",
        **meta["env"],
        "wsgi.input": io.BytesIO(body),
        "CONTENT_LENGTH": str(len(body)),
    }
    if meta.get("names"):
        environ[PRESERVED_HEADER_NAMES_ENVIRON_KEY] = meta["names"]
    status, _, out = call_app(app, environ)
    if status[:1] != "2":
        env = meta["env"]
        what = env.get("HTTP_X_AMZ_TARGET") or f"{env.get('REQUEST_METHOD')} {env.get('PATH_INFO')}"
        return f"{what}: {status} {out[:300].decode('utf-8', 'replace')}"
    return ""


def apply_record(app: Callable[..., Any], meta: dict[str, Any], body: bytes, port: int) -> str:
    """Apply one record to moto; "" on success, else what went wrong."""
    kind = meta.get("k")
    try:
        if kind == "http":
            return _replay_http(app, meta, body, port)
        if not effects.apply_effect(meta, body):
            return f"unknown record kind {kind!r}"
    except Exception as exc:  # moto's own exceptions: the record does not fit this state
        return f"{kind}: {exc.__class__.__name__}: {exc}"
    return ""


# ---------------------------------------------------------------- the server


@dataclass
class RestoreReport:
    generation: int = 0
    records: int = 0
    seconds: float = 0.0
    compacted: int | None = None  # records in the new snapshot, if compacted
    warnings: list[str] = field(default_factory=list)


class DurableMoto:
    """moto's threaded server (as `moto.server.ThreadedMotoServer`) with the journal in front.
    start() → (create the template's resources) → restore(names) → serve; stop()."""

    def __init__(
        self,
        state_dir: Any,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        fsync: bool = True,
        compact_min_bytes: int = COMPACT_MIN_BYTES,
        wrap: Callable[[Any], Any] | None = None,
    ) -> None:
        """`wrap` puts a WSGI middleware in front of the journal (`local.iam`'s checks: a
        denied request is never journaled)."""
        self.wrap = wrap
        self.host, self.port = host, port
        self.state = StateDir(state_dir, fsync=fsync)
        self.compact_min_bytes = compact_min_bytes
        self.front: JournalingApp | None = None
        self._wsgi = WsgiServer(host, port)

    def start(self) -> None:
        self.state.open()  # takes the directory's lock first: PersistError if in use
        effects.install_sqs_hooks()
        self.app = moto_app()
        self.front = JournalingApp(self.app, self.state)
        self._wsgi.serve(self.wrap(self.front) if self.wrap else self.front)

    def get_host_and_port(self) -> tuple[str, int]:
        return self._wsgi.get_host_and_port()

    def restore(self, template_names: set[str]) -> RestoreReport:
        """Replay the state into moto (resources already created), compact if the journal has
        outgrown the snapshot, then journal everything from here on."""
        assert self.front is not None
        started = time.monotonic()
        port = self.get_host_and_port()[1]
        report = RestoreReport()
        for meta, body in self.state.records():
            problem = apply_record(self.app, meta, body, port)
            if problem:
                self.state.close()
                raise PersistError(
                    f"{self.state.path}: record {report.records + 1} does not replay ({problem}). "
                    "The state no longer fits template.yaml (or moto changed). Move the directory "
                    "away (or delete it) to start fresh, or run with --ephemeral."
                )
            report.records += 1
        stats = self.state.stats
        report.warnings += stats.warnings
        if stats.journal_bytes > max(self.compact_min_bytes, stats.snapshot_bytes):
            have = effects.resources()
            extra = sorted(n for names in have.values() for n in names if n not in template_names)
            if extra:
                report.warnings.append(
                    f"not compacting the state journal: resources outside template.yaml ({extra})"
                )
            else:
                report.compacted = self.state.compact(effects.snapshot_records())
        report.generation = self.state.generation
        self.front.arm()
        report.seconds = time.monotonic() - started
        return report

    def stop(self) -> None:
        self._wsgi.stop()
        self.state.close()
