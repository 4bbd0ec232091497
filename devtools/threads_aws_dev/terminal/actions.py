"""The subcommands for people (see `commands` for their arguments, `__init__` for exit codes).

Each takes the parsed arguments, talks to the host through `threads_aws_client`, prints for a
person (rich) or, with --json, one JSON document per line for scripts, and returns the exit code.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

from rich.console import Console
from threads_aws_client import Client, ConnectionFailed, ThreadsError

from . import (
    EXIT_NOT_SERVED,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
)
from .live import Follower
from .prompts import with_busy_retry
from .render import print_json, timeline_table

Command = Callable[[argparse.Namespace], int]


class Refused(Exception):
    """Nothing to act on, or an ambiguous target: a message and an exit code."""

    def __init__(self, message: str, code: int = EXIT_REFUSED) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def guarded(fn: Command) -> Command:
    def run(args: argparse.Namespace) -> int:
        err = Console(stderr=True, highlight=False)
        try:
            return fn(args)
        except ConnectionFailed as exc:
            err.print(f"threads-aws: cannot reach {args.url or 'the host'}: {exc.message}", markup=False)
            return EXIT_UNREACHABLE
        except ThreadsError as exc:
            err.print(f"threads-aws: error {exc.code}: {exc.message}", markup=False)
            return EXIT_REFUSED
        except Refused as exc:
            err.print(f"threads-aws: {exc.message}", markup=False)
            return exc.code

    run.__name__ = fn.__name__
    run.__doc__ = fn.__doc__
    return run


def client_of(args: argparse.Namespace) -> Client:
    return Client(args.url, args.token)


def console_of(args: argparse.Namespace) -> Console:
    return Console(highlight=False, soft_wrap=True)


def interactive(args: argparse.Namespace) -> bool:
    return not args.json and not args.no_input and sys.stdin.isatty()


def _follower(args: argparse.Namespace, client: Client) -> Follower:
    return Follower(client, console_of(args), interactive=interactive(args), json_mode=args.json)


def _done(args: argparse.Namespace, value: dict[str, Any], line: str) -> int:
    if args.json:
        print_json(console_of(args), value)
    else:
        console_of(args).print(line, highlight=False)
    return EXIT_OK


# ------------------------------------------------------------------ runs
@guarded
def cmd_run(args: argparse.Namespace) -> int:
    """Start a run and follow it live."""
    prompt = " ".join(args.prompt)
    if prompt == "-":
        prompt = sys.stdin.read()
    if not prompt.strip():
        raise Refused("run: the prompt is empty", EXIT_USAGE)
    with client_of(args) as client:
        accepted = client.start_run(args.agent, prompt, thread_id=args.thread, branch_id=args.branch)
        if not args.json:
            console_of(args).print(
                f"thread {accepted['thread_id']} · run {accepted['run_id']}", style="dim", highlight=False
            )
        return _follower(args, client).follow(accepted["thread_id"], accepted["run_id"])


@guarded
def cmd_follow(args: argparse.Namespace) -> int:
    """Follow a run (default: the branch's latest) live, from its start."""
    with client_of(args) as client:
        run_id = args.run or latest_run(client, args.thread, args.branch)
        return _follower(args, client).follow(args.thread, run_id)


def latest_run(client: Client, thread_id: str, branch_id: str | None) -> str:
    runs = [
        e["event"]["event_id"]
        for e in _entries(client, thread_id, branch_id)
        if e["event"]["type"] == "user_input"
    ]
    if not runs:
        raise Refused(f"thread {thread_id} has no run")
    return str(runs[-1])


def _entries(client: Client, thread_id: str, branch_id: str | None) -> list[dict[str, Any]]:
    return [dict(e) for e in client.timeline(thread_id, branch_id)["entries"]]


# ------------------------------------------------------------------ reading
@guarded
def cmd_show(args: argparse.Namespace) -> int:
    """The timeline of a thread's branch, readable."""
    with client_of(args) as client:
        timeline = client.timeline(args.thread, args.branch)
    if args.json:
        print_json(console_of(args), timeline)
        return EXIT_OK
    console = console_of(args)
    console.print(f"thread {timeline['thread_id']} · branch {timeline['branch_id']}", style="dim")
    console.print(timeline_table(timeline["entries"]))
    return EXIT_OK


def _pairs(items: list[str]) -> dict[str, str]:
    """`--meta KEY=VALUE` flags as a map (a usage error names the flag)."""
    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise Refused(f"--meta takes KEY=VALUE, not {item!r}", EXIT_USAGE)
        out[key] = value
    return out


@guarded
def cmd_threads(args: argparse.Namespace) -> int:
    """The tenant's threads, most recent activity first: one page (`--limit`), or every page
    with `--all`; the filters as `GET /v1/threads` takes them."""
    filters: dict[str, Any] = {
        "status": args.status,
        "agent": args.agent,
        "metadata": _pairs(args.meta) or None,
        "title_contains": args.search,
        "updated_after": args.updated_after,
        "updated_before": args.updated_before,
    }
    with client_of(args) as client:
        if not client.has_operation("listThreads"):
            raise Refused(
                "thread listing is not available on this host (GET /v1/threads is not served)",
                EXIT_NOT_SERVED,
            )
        if args.all:
            rows = [t for page in client.thread_pages(limit=args.limit, **filters) for t in page["threads"]]
        else:
            rows = list(client.threads(limit=args.limit, **filters)["threads"])
    if args.json:
        print_json(console_of(args), {"threads": rows})
        return EXIT_OK
    from .render import threads_table

    console = console_of(args)
    if not rows and any(v is not None for v in filters.values()):
        console.print("no thread matches these filters", style="dim", highlight=False)
    elif not rows:
        console.print('no threads yet: start one with `threads-aws run "..."`', style="dim", highlight=False)
    else:
        console.print(threads_table(rows))
    return EXIT_OK


@guarded
def cmd_label(args: argparse.Namespace) -> int:
    """A thread's title and metadata: `--title`, `--meta KEY=VALUE`, `--unset KEY`."""
    metadata: dict[str, str | None] = {**_pairs(args.meta), **dict.fromkeys(args.unset)}
    if args.title is None and not metadata:
        raise Refused("say what to set: --title, --meta KEY=VALUE or --unset KEY", EXIT_USAGE)
    with client_of(args) as client:
        if not client.has_operation("updateThread"):
            raise Refused(
                "thread labels are not available on this host (PATCH /v1/threads/{id} is not served)",
                EXIT_NOT_SERVED,
            )
        row = client.update_thread(args.thread, title=args.title, metadata=metadata or None)
    if args.json:
        print_json(console_of(args), row)
        return EXIT_OK
    labels = ", ".join(f"{k}={v}" for k, v in sorted(row.get("metadata", {}).items())) or "no metadata"
    console_of(args).print(f"{row['thread_id']}: {row.get('title', '(untitled)')} · {labels}", markup=False)
    return EXIT_OK


# ------------------------------------------------------------------ what a run waits on
def open_calls(entries: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """Parked addresses of `kind` not yet resumed, newest last: [{id, call}]."""
    calls = {
        e["event"]["data"].get("call_id"): e["event"]["data"]
        for e in entries
        if e["event"]["type"] == "tool_call"
    }
    open_: dict[str, dict[str, Any]] = {}
    for e in entries:
        ev = e["event"]
        addr = ev["data"].get("address") or {}
        if addr.get("kind") != kind:
            continue
        if ev["type"] == "parked":
            cid = (
                addr["id"]
                if kind == "input"
                else next((c for c in calls if addr["id"].endswith(str(c))), None)
            )
            open_[addr["id"]] = {"id": addr["id"], "call": calls.get(cid)}
        elif ev["type"] == "resumed":
            open_.pop(addr["id"], None)
    return list(open_.values())


def _one(items: list[Any], what: str, thread_id: str, ident: Callable[[Any], str]) -> Any:
    if not items:
        raise Refused(f"nothing to {what} on thread {thread_id}")
    if len(items) > 1:
        raise Refused(
            f"{len(items)} to {what} on thread {thread_id}: name one of {', '.join(map(ident, items))}",
            EXIT_USAGE,
        )
    return items[0]


def _decide(args: argparse.Namespace, decision: str) -> int:
    with client_of(args) as client:
        challenge = args.challenge
        if challenge is None:
            pending = client.approvals(args.thread, args.branch)
            challenge = _one(
                pending,
                "approve" if decision == "grant" else "deny",
                args.thread,
                lambda a: a["challenge_id"],
            )["challenge_id"]
        rule = getattr(args, "remember", None)
        appended = with_busy_retry(
            lambda: client.decide(args.thread, challenge, decision, remember_rule=rule, reason=args.reason)  # type: ignore[arg-type]
        )
        word = "granted" if decision == "grant" else "denied"
        code = _done(
            args, {"challenge_id": challenge, "decision": decision, **appended}, f"{word} {challenge}"
        )
        return _then_follow(args, client) if args.follow else code


@guarded
def cmd_approve(args: argparse.Namespace) -> int:
    """Grant a pending approval (the only one, or CHALLENGE)."""
    return _decide(args, "grant")


@guarded
def cmd_deny(args: argparse.Namespace) -> int:
    """Deny a pending approval (the only one, or CHALLENGE)."""
    return _decide(args, "deny")


@guarded
def cmd_answer(args: argparse.Namespace) -> int:
    """Answer the open question (the only one, or --call CALL_ID)."""
    with client_of(args) as client:
        call_id = args.call
        if call_id is None:
            questions = open_calls(_entries(client, args.thread, args.branch), "input")
            call_id = _one(questions, "answer", args.thread, lambda q: q["id"])["id"]
        value: str | list[str] = args.answer[0] if len(args.answer) == 1 else list(args.answer)
        appended = with_busy_retry(lambda: client.answer(args.thread, call_id, value, branch_id=args.branch))
        code = _done(args, {"call_id": call_id, **appended}, f"answered {call_id}")
        return _then_follow(args, client) if args.follow else code


@guarded
def cmd_resolve(args: argparse.Namespace) -> int:
    """Settle an effect whose outcome is unknown: done or not-done."""
    resolution = {"done": "assume_done", "not-done": "assume_not_done"}[args.resolution]
    with client_of(args) as client:
        key = args.effect_key
        if key is None:
            effects = open_calls(_entries(client, args.thread, args.branch), "effect")
            key = _one(effects, "resolve", args.thread, lambda q: q["id"])["id"]
        appended = with_busy_retry(
            lambda: client.resolve_parked(args.thread, key, resolution, branch_id=args.branch)  # type: ignore[arg-type]
        )
        code = _done(
            args,
            {"effect_key": key, "resolution": resolution, **appended},
            f"resolved {key}: {args.resolution}",
        )
        return _then_follow(args, client) if args.follow else code


def _then_follow(args: argparse.Namespace, client: Client) -> int:
    return _follower(args, client).follow(args.thread, latest_run(client, args.thread, args.branch))


@guarded
def cmd_cancel(args: argparse.Namespace) -> int:
    """Cancel what runs on the branch."""
    with client_of(args) as client:
        appended = with_busy_retry(lambda: client.cancel(args.thread, args.branch))
    return _done(args, dict(appended), f"cancel requested (event {appended['event_id']})")


@guarded
def cmd_fork(args: argparse.Namespace) -> int:
    """Fork the thread at a fork point (default: the latest)."""
    with client_of(args) as client:
        event_id = args.event_id
        if event_id is None:
            points = client.fork_points(args.thread, args.branch)
            if not points:
                raise Refused(f"no fork point on thread {args.thread} (a fork needs a snapshot)")
            event_id = points[-1]["event_id"]
        ref = client.fork(
            args.thread, event_id, branch_id=args.branch, mode=args.mode, knowledge=args.knowledge
        )
    return _done(args, dict(ref), f"forked: branch {ref['branch_id']}")


@guarded
def cmd_export(args: argparse.Namespace) -> int:
    """The branch's JSONL log, byte-exact (verify with `threads-aws log verify`)."""
    with client_of(args) as client:
        branch = args.branch
        branches = client.branches(args.thread)  # the host checks the thread is this tenant's
        if branch is None:
            roots = [b for b in branches if "parent_branch_id" not in b]
            branch = (roots or branches)[0]["branch_id"]
        elif branch not in {b["branch_id"] for b in branches}:
            raise Refused(f"branch {branch} is not a branch of thread {args.thread}")
    # The host API serves no export: the timeline has the events but not the header line, so it
    # cannot give the log's exact bytes. The export is read from the store (as `log export
    # --branch` does), configured like `threads-aws dev` prints under `store:`.
    from ..cli import CliError, _export_from_store

    ns = argparse.Namespace(branch=branch, output=args.output)
    try:
        code = _export_from_store(ns)
    except CliError as exc:
        raise Refused(
            f"export reads the store ({exc.message}); the host API has no export route: set the "
            "`store:` environment that `threads-aws dev` prints (or the deployed tables' names)",
            EXIT_USAGE,
        ) from None
    if args.json and args.output not in (None, "-"):  # on stdout the JSONL is the output itself
        summary = {"thread_id": args.thread, "branch_id": branch, "output": args.output}
        print_json(console_of(args), {**summary, "bytes": os.path.getsize(args.output)})
    return int(code)
