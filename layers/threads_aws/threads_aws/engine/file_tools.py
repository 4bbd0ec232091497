"""File tools over the branch's workspace (`sandbox.workspace`): `read_file`, `list_files`,
`glob`, `grep` (read_only) and `write_file`, `edit_file` (effects).

Every tool reads the manifest the fold names at dispatch (`ToolContext.workspace`: the latest
committed workspace write on this branch's chain, or its fork point's snapshot).

Exactly-once of a write (class `idempotent`, dedup by content): the new manifest is a pure
function of (base manifest, call input), its file bytes and the manifest itself are stored
content-addressed with conditional puts, and nothing becomes the branch's workspace until the
log's `effect_commit` carries `provider_receipt: workspace:<manifest_hash>`. A worker that dies
between `effect_begin` and the commit leaves at most unreferenced objects; recovery marks the
effect unknown, the provider's dedup covers it (`safe_to_retry`: re-sending under the same
effect key is harmless) and the re-dispatch recomputes the same manifest from the same base,
because the base cannot move meanwhile: a branch dispatches its calls one at a time under its
lease, and the base only changes at a commit. So the file is written once and the manifest
names it once. (`sandbox_local` would not do: the semantics make it valid only under deny-all
egress or mediation and give recovery no automatic settlement, so a crash would park for a
human instead of settling.)

Caller errors (a path outside the workspace, too large, no such file, no unique match) are
error results whose text starts with the typed code (`WorkspaceError.code`).
"""

from __future__ import annotations

import re
import weakref
from typing import Any

from ..core.errors import LogError
from ..core.manifest import MAX_FILE_BYTES, Manifest, WorkspaceError, normalize_path, receipt
from ..sandbox.workspace import Workspace
from .tools import Executor, ToolContext, ToolOutput, ToolUncertain

MAX_READ_CHARS = 100_000
MAX_LIST = 1_000
MAX_GREP_MATCHES = 200
_workspaces: weakref.WeakKeyDictionary[Any, Workspace] = weakref.WeakKeyDictionary()


def workspace_of(tc: ToolContext) -> Workspace:
    """One Workspace (its manifest cache) per artifact store in this process."""
    artifacts = tc.stores.artifacts
    ws = _workspaces.get(artifacts)
    if ws is None:
        ws = _workspaces[artifacts] = Workspace(artifacts)
    return ws


def _manifest(tc: ToolContext) -> Manifest:
    return workspace_of(tc).manifest(tc.workspace)


def _text(data: bytes, path: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise WorkspaceError("not_text", f"{path} is not UTF-8 text ({len(data)} bytes)") from None


def _error(exc: WorkspaceError | LogError) -> ToolOutput:
    """A typed error result; a LogError is a manifest or file object that is gone or altered
    (`snapshot_missing`, `artifact_missing`, `artifact_corrupt`, ...): reads report it, typed."""
    if isinstance(exc, LogError):
        return ToolOutput(f"{exc.code}: {exc.message}", is_error=True)
    return ToolOutput(str(exc), is_error=True)


def _int_arg(args: dict[str, Any], name: str, default: int) -> int:
    v = args.get(name, default)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise WorkspaceError("invalid_argument", f"{name} is a non-negative integer")
    return v


# ------------------------------------------------------------------ read_only
def run_read_file(args: dict[str, Any], tc: ToolContext) -> ToolOutput:
    try:
        path = normalize_path(args.get("path"))
        m = _manifest(tc)
        text = _text(workspace_of(tc).read(m, path), path)
        offset, limit = _int_arg(args, "offset", 0), _int_arg(args, "limit", 0)
        if offset or limit:
            lines = text.splitlines(keepends=True)
            text = "".join(lines[offset : offset + limit if limit else None])
        if len(text) > MAX_READ_CHARS:
            raise WorkspaceError(
                "output_too_large", f"{path}: {len(text)} chars > {MAX_READ_CHARS}; read it with offset/limit"
            )
        return ToolOutput(text)
    except (WorkspaceError, LogError) as exc:
        return _error(exc)


def _under(m: Manifest, raw: Any) -> list[str]:
    if raw in (None, "", ".", "/workspace", "/workspace/"):
        return m.paths()
    base = normalize_path(raw)
    if m.get(base) is not None:
        return [base]
    return [p for p in m.paths() if p.startswith(base + "/")]


def run_list_files(args: dict[str, Any], tc: ToolContext) -> ToolOutput:
    try:
        m = _manifest(tc)
        paths = _under(m, args.get("path"))
        if not paths:
            return ToolOutput("(no files)")
        shown = [f"{p}\t{m.get(p).size}" for p in paths[:MAX_LIST]]  # type: ignore[union-attr]
        more = len(paths) - len(shown)
        return ToolOutput("\n".join(shown) + (f"\n… {more} more" if more > 0 else ""))
    except (WorkspaceError, LogError) as exc:
        return _error(exc)


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A path glob: `*` and `?` within one segment, `**` across segments, `[...]` classes."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:[^/]+/)*")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = pattern.find("]", i + 1)
            if j < 0:
                raise WorkspaceError("pattern_invalid", f"unclosed '[' in {pattern!r}")
            body = pattern[i + 1 : j]
            out.append("[" + ("^" + re.escape(body[1:]) if body.startswith("!") else re.escape(body)) + "]")
            i = j
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out) + r"\Z")


def run_glob(args: dict[str, Any], tc: ToolContext) -> ToolOutput:
    try:
        pattern = args.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise WorkspaceError("pattern_invalid", "pattern is a non-empty string")
        rx = glob_regex(pattern.removeprefix("./"))
        hits = [p for p in _manifest(tc).paths() if rx.match(p)]
        return ToolOutput("\n".join(hits[:MAX_LIST]) if hits else "(no matches)")
    except (WorkspaceError, LogError) as exc:
        return _error(exc)


def run_grep(args: dict[str, Any], tc: ToolContext) -> ToolOutput:
    try:
        pattern = args.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise WorkspaceError("pattern_invalid", "pattern is a non-empty string")
        try:
            rx = re.compile(pattern, re.IGNORECASE if args.get("ignore_case") else 0)
        except re.error as exc:
            raise WorkspaceError("pattern_invalid", f"{pattern!r}: {exc}") from None
        m = _manifest(tc)
        paths = _under(m, args.get("path"))
        if isinstance(args.get("glob"), str):
            g = glob_regex(args["glob"])
            paths = [p for p in paths if g.match(p)]
        ws, hits = workspace_of(tc), []
        for p in paths:
            try:
                text = _text(ws.read(m, p), p)
            except WorkspaceError:
                continue  # binary files hold no lines to match
            for n, line in enumerate(text.splitlines(), 1):
                if rx.search(line):
                    hits.append(f"{p}:{n}:{line}")
                    if len(hits) >= MAX_GREP_MATCHES:
                        return ToolOutput("\n".join(hits) + f"\n… stopped at {MAX_GREP_MATCHES} matches")
        return ToolOutput("\n".join(hits) if hits else "(no matches)")
    except (WorkspaceError, LogError) as exc:
        return _error(exc)


# ------------------------------------------------------------------ effects
def _store(tc: ToolContext, build: Any) -> ToolOutput:
    """Run a write: a caller error is its (committed) error result and changes nothing; a store
    failure after the begin is an unknown outcome (the re-dispatch is safe, see the module doc)."""
    try:
        text, new = build()
    except WorkspaceError as exc:
        return _error(exc)
    except LogError as exc:  # the base manifest is missing or corrupt: nothing was stored
        return ToolOutput(f"{exc.code}: {exc.message}", is_error=True)
    except Exception as exc:  # noqa: BLE001 - S3 may or may not have taken the puts
        raise ToolUncertain("transport_error") from exc
    return ToolOutput(text, receipt=receipt(new))


def _content(args: dict[str, Any], name: str) -> str:
    v = args.get(name)
    if not isinstance(v, str):
        raise WorkspaceError("invalid_argument", f"{name} is a string")
    return v


def run_write_file(args: dict[str, Any], tc: ToolContext) -> ToolOutput:
    def build() -> tuple[str, Manifest]:
        path = normalize_path(args.get("path"))
        data = _content(args, "content").encode("utf-8")
        if len(data) > MAX_FILE_BYTES:
            raise WorkspaceError(
                "file_too_large", f"{path}: {len(data)} bytes > the {MAX_FILE_BYTES} byte limit"
            )
        ws = workspace_of(tc)
        new = ws.write(ws.manifest(tc.workspace), path, data)
        return f"wrote {path} ({len(data)} bytes)", new

    return _store(tc, build)


def run_edit_file(args: dict[str, Any], tc: ToolContext) -> ToolOutput:
    def build() -> tuple[str, Manifest]:
        path = normalize_path(args.get("path"))
        old, new_text = _content(args, "old_string"), _content(args, "new_string")
        if not old:
            raise WorkspaceError("invalid_argument", "old_string is empty")
        ws = workspace_of(tc)
        base = ws.manifest(tc.workspace)
        text = _text(ws.read(base, path), path)
        count = text.count(old)
        if count == 0:
            raise WorkspaceError("edit_no_match", f"old_string does not occur in {path}")
        if count > 1 and not args.get("replace_all"):
            raise WorkspaceError("edit_not_unique", f"old_string occurs {count} times in {path}")
        data = text.replace(old, new_text).encode("utf-8")
        if len(data) > MAX_FILE_BYTES:
            raise WorkspaceError(
                "file_too_large", f"{path}: {len(data)} bytes > the {MAX_FILE_BYTES} byte limit"
            )
        new = ws.write(base, path, data)
        return f"edited {path} ({count} replacement{'s' if count > 1 else ''})", new

    return _store(tc, build)


FILE_EXECUTORS: dict[str, Executor] = {
    "read_file": run_read_file,
    "list_files": run_list_files,
    "glob": run_glob,
    "grep": run_grep,
    "write_file": run_write_file,
    "edit_file": run_edit_file,
}
