"""The sandbox function's body: run one command over a workspace it is handed, and hand back
what changed. Stdlib only, no AWS: the function that runs it has no permissions and no network,
so everything it needs is in the payload and everything it produces is in the answer.

Payload: `{command, timeout_ms, files: [{path, mode, data_b64}]}` (the workspace, materialised
into a fresh directory under /tmp). Answer: `{exit_code, timed_out, stdout, stderr, changed:
[{path, mode, data_b64}], deleted: [path]}`: files whose bytes or mode differ, new files, and
files that are gone. Output streams are cut at MAX_STREAM bytes; a tree that grew past the
limits is an error answer (`error: workspace_full`), never a partial one.

`python -m threads_aws.sandbox.exec_runner` reads a payload on stdin and writes the answer on
stdout (the local dev invoker: a child process, not a network-less Lambda).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

MAX_STREAM = 64 * 1024
MAX_CHANGED_BYTES = 4 << 20  # what a synchronous Lambda answer (6 MB, base64) can carry back
MAX_FILE_BYTES = 1 << 20
MAX_TIMEOUT_MS = 300_000


def _materialise(root: Path, files: list[dict[str, Any]]) -> dict[str, tuple[int, str]]:
    given: dict[str, tuple[int, str]] = {}
    for f in files:
        path = str(f["path"])
        if path.startswith("/") or ".." in path.split("/"):
            raise ValueError(f"path outside the workspace: {path!r}")
        data = base64.b64decode(f["data_b64"])
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        os.chmod(target, int(f["mode"]) & 0o777)
        given[path] = (int(f["mode"]) & 0o777, hashlib.sha256(data).hexdigest())
    return given


def _capture(root: Path, given: dict[str, tuple[int, str]]) -> dict[str, Any]:
    changed, seen, total = [], set(), 0
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            full = Path(dirpath) / name
            if full.is_symlink() or not full.is_file():
                continue  # links may point outside the workspace: never followed
            rel = full.relative_to(root).as_posix()
            seen.add(rel)
            data = full.read_bytes()
            mode = full.stat().st_mode & 0o777
            if given.get(rel) == (mode, hashlib.sha256(data).hexdigest()):
                continue
            if len(data) > MAX_FILE_BYTES:
                return {"error": f"file_too_large: {rel} ({len(data)} bytes)"}
            total += len(data)
            if total > MAX_CHANGED_BYTES:
                return {"error": f"workspace_full: more than {MAX_CHANGED_BYTES} changed bytes"}
            changed.append({"data_b64": base64.b64encode(data).decode(), "mode": mode, "path": rel})
    return {"changed": sorted(changed, key=lambda c: c["path"]), "deleted": sorted(set(given) - seen)}


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # the group is empty: nothing was left behind


def run(payload: dict[str, Any]) -> dict[str, Any]:
    timeout_ms = min(int(payload.get("timeout_ms", 30_000)), MAX_TIMEOUT_MS)
    root = Path(tempfile.mkdtemp(prefix="ws-", dir=os.environ.get("SANDBOX_TMP", "/tmp")))
    try:
        given = _materialise(root / "workspace", payload.get("files", []))
        (root / "workspace").mkdir(exist_ok=True)
        env = {
            "HOME": str(root),
            "LANG": "C.UTF-8",
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "TMPDIR": str(root),
        }
        timed_out = False
        proc = subprocess.Popen(
            ["/bin/sh", "-c", str(payload["command"])],
            cwd=root / "workspace",
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group: a timeout kills every descendant
        )
        try:
            out, err = proc.communicate(timeout=timeout_ms / 1000)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        code = proc.returncode
        # A warm Lambda runs the next invocation (another branch's tree, maybe another tenant's)
        # in the same environment: nothing the command left running in the background may
        # outlive it. (A process that made its own session escapes the group: see README.)
        _kill_group(proc.pid)
        answer = _capture(root / "workspace", given)
        answer.update(
            exit_code=code,
            stderr=err[:MAX_STREAM].decode("utf-8", "replace"),
            stdout=out[:MAX_STREAM].decode("utf-8", "replace"),
            timed_out=timed_out,
        )
        return answer
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    json.dump(run(json.load(sys.stdin)), sys.stdout)
