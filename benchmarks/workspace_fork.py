# ruff: noqa: E501  (benchmark report lines)
"""Bytes and AWS calls per workspace write, per snapshot and per fork, for a 100-file, 10 MB
workspace (issue 12), in process against moto with the deployed table/bucket layout.

What runs (the library's real paths, every AWS call counted by botocore event hooks):
1. 100 writes of 100 KiB files (`sandbox.workspace.Workspace.write`, what `write_file` does
   after its effect_begin): per write, the file's PutObject and the new manifest's PutObject;
2. the snapshot at the turn end: the provider's capture check (`S3WorkspaceProvider.capture`)
   and the `snapshot` append through the Writer (`engine.snapshots.snapshot_draft` builds it);
3. `POST …/forks` (`Host.fork`: the fork procedure with the S3 workspace provider: ledger row,
   child branch, restore = the manifest's GET, verified (it pins every file by hash and size:
   no per-file request), fork event, ready);
   then the same fork in `mode: stub` (no restore, no ledger row, the recordings stored once);
4. the child's first write (`write_file`'s executor over the child's inherited manifest) and a
   read of one file.
Bytes are request bodies sent plus response bodies received (S3 object bodies by length).

Usage: python benchmarks/workspace_fork.py [--files N] [--kib K]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
for k, v in (
    ("AWS_ACCESS_KEY_ID", "testing"),
    ("AWS_SECRET_ACCESS_KEY", "testing"),
    ("AWS_DEFAULT_REGION", "us-east-1"),
):
    os.environ[k] = v

import boto3  # noqa: E402
from moto import mock_aws  # noqa: E402
from threads_aws.agents import load_agents  # noqa: E402
from threads_aws.core.canonical import new_uuid7  # noqa: E402
from threads_aws.core.lines import StoredLine, header_line  # noqa: E402
from threads_aws.engine.file_tools import run_read_file, run_write_file  # noqa: E402
from threads_aws.engine.tools import ToolContext  # noqa: E402
from threads_aws.host.principal import Principal  # noqa: E402
from threads_aws.services import Services  # noqa: E402
from threads_aws.store import NewBranch  # noqa: E402
from threads_aws.writer import Draft  # noqa: E402
from threads_aws_dev.local.infra import create_resources, default_template_path  # noqa: E402
from threads_aws_dev.local.moto_patch import speed_up_moto_transactions  # noqa: E402


class Meter:
    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.sent = 0
        self.received = 0

    def reset(self) -> None:
        self.calls.clear()
        self.sent = self.received = 0

    def params(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        self.calls[f"{model.service_model.service_name}.{model.name}"] += 1
        body = params.get("Body")
        if isinstance(body, bytes | bytearray):
            self.sent += len(body)

    def request(self, request: Any, **_: Any) -> None:
        if request.body and not isinstance(request.body, bytes | bytearray) or request.url.find(".s3.") >= 0:
            return  # S3 bodies are counted from the parameters (a stream here)
        self.sent += len(request.body or b"")

    def after(self, http_response: Any, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == "GetObject":
            self.received += int(parsed.get("ContentLength", 0))
        elif model.name != "HeadObject":
            self.received += len(http_response.content or b"")

    def attach(self, *clients: Any) -> None:
        for c in clients:
            c.meta.events.register("before-parameter-build.*.*", self.params)
            c.meta.events.register("before-send.*.*", self.request)
            c.meta.events.register("after-call.*.*", self.after)

    def line(self, what: str, n: int = 1) -> str:
        calls = sum(self.calls.values())
        detail = ", ".join(f"{k} {v / n:g}" for k, v in sorted(self.calls.items()))
        return (
            f"{what}: {calls / n:.1f} AWS calls, {self.sent / n:,.0f} bytes sent, "
            f"{self.received / n:,.0f} bytes received  [{detail}]"
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=100)
    ap.add_argument("--kib", type=int, default=100)
    args = ap.parse_args()
    with mock_aws():
        speed_up_moto_transactions()
        session = boto3.session.Session()
        res = create_resources(default_template_path(), session, prefix="bench")
        ddb, s3, sqs = session.client("dynamodb"), session.client("s3"), session.client("sqs")
        services = Services(res, clients={"dynamodb": ddb, "s3": s3, "sqs": sqs})
        meter = Meter()
        meter.attach(ddb, s3)
        host, ctx = services.host(), services.engine()
        thread_id, branch = new_uuid7(), new_uuid7()
        header = StoredLine.of_header(header_line(thread_id, branch, ctx.clock()))
        ctx.store.create_branch(
            NewBranch(thread_id=thread_id, tenant="acme", branch_id=branch, header=header, create_thread=True)
        )
        ctx.writer.append(
            branch, [Draft("thread_started", load_agents()["demo"].thread_started(), {"kind": "host"})]
        )

        ws = ctx.sandbox.workspace
        manifest = ws.manifest(None)
        meter.reset()
        for i in range(args.files):
            data = (f"file {i:03d} ".encode() * (args.kib * 1024 // 9 + 1))[: args.kib * 1024]
            manifest = ws.write(manifest, f"src/file_{i:03d}.txt", data)
        total = manifest.total_bytes
        print(
            f"workspace: {len(manifest)} files, {total:,} bytes, manifest {len(manifest.to_bytes()):,} bytes"
        )
        print(meter.line(f"write (mean of {args.files})", args.files))

        meter.reset()
        assert ctx.sandbox.capture(manifest.hash)
        data = ctx.sandbox.snapshot_data(branch, manifest.hash, now=ctx.clock(), retention_ms=7 * 86_400_000)
        _, lines = ctx.writer.append(branch, [Draft("snapshot", data, {"kind": "host"})])
        print(meter.line("snapshot (capture check + the snapshot append)"))

        meter.reset()
        who = Principal(issuer="api", tenant="acme", subject="alice")
        child = host.fork(who, thread_id, branch, {"event_id": lines[0].event_id})["branch_id"]
        print(meter.line("fork (POST …/forks: ledger, child, restore + verify, fork event)"))
        print(
            f"  a byte copy of the workspace would move {total:,} bytes; the fork read only the {len(manifest.to_bytes()):,}-byte manifest"
        )

        meter.reset()
        host.fork(who, thread_id, branch, {"event_id": lines[0].event_id, "mode": "stub"})
        print(meter.line("fork mode stub (no restore, no ledger row; the recorded stubs' PutObject)"))

        fold = ctx.writer.load(child).fold
        tc = ToolContext(
            "acme", thread_id, child, "c1", f"{child}:c1", 1, ctx.clock, ctx.stores, fold.workspace
        )
        meter.reset()
        out = run_write_file({"path": "src/file_000.txt", "content": "changed in the child"}, tc)
        assert not out.is_error, out.text
        print(meter.line("child's first write (a small file over the inherited manifest)"))
        meter.reset()
        run_read_file({"path": "src/file_001.txt"}, tc)
        print(meter.line(f"read of one {args.kib} KiB file (manifest cached)"))


if __name__ == "__main__":
    main()
