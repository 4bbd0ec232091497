"""The people subcommands' parsers (standard library only: `threads-aws` starts fast; the client,
rich and the views load in `actions` when a subcommand runs)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from . import EPILOG

DEFAULT_AGENT = "demo"


def _lazy(name: str) -> Any:
    def run(args: argparse.Namespace) -> int:
        from . import actions

        return int(getattr(actions, name)(args))

    return run


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    g = common.add_argument_group("host")
    g.add_argument(
        "--url",
        default=os.environ.get("THREADS_URL"),
        help="the host's base URL (default: $THREADS_URL, else http://127.0.0.1:8787, `threads-aws dev`)",
    )
    g.add_argument(
        "--token",
        default=os.environ.get("THREADS_TOKEN"),
        help="the API key (default: $THREADS_TOKEN, else the dev token dev:api:local:alice)",
    )
    g.add_argument("--json", action="store_true", help="print JSON (one document per line) for scripts")
    g.add_argument("--no-input", action="store_true", help="never prompt (also when stdin is not a terminal)")
    return common


def _thread(p: argparse.ArgumentParser, *, branch: bool = True) -> None:
    p.add_argument("thread", metavar="THREAD", help="the thread id")
    if branch:
        p.add_argument("--branch", metavar="BRANCH", help="the branch (default: the thread's main branch)")


def _follow_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--follow", action="store_true", help="then follow the run live, as `run` does")


def add_people_parsers(top: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    common = _common()

    def add(name: str, func: str, help_: str, description: str | None = None) -> argparse.ArgumentParser:
        p = top.add_parser(
            name, parents=[common], help=help_, description=description or help_, epilog=EPILOG
        )
        p.set_defaults(func=_lazy(func))
        return p

    p = add(
        "run",
        "cmd_run",
        "start a run and follow it live",
        "Start a run and follow it: streamed text, tool rows, todos; asks for approvals and answers "
        "when the run waits on you; Ctrl-C offers to cancel. Exits with the run's outcome.",
    )
    p.add_argument(
        "--agent",
        default=os.environ.get("THREADS_AGENT", DEFAULT_AGENT),
        help=f"the agent (default: $THREADS_AGENT, else {DEFAULT_AGENT})",
    )
    p.add_argument("--thread", metavar="THREAD", help="continue this thread (default: a new one)")
    p.add_argument("--branch", metavar="BRANCH", help="with --thread: the branch to continue")
    p.add_argument("prompt", nargs="+", metavar="PROMPT", help="what to ask ('-': read stdin)")

    p = add("follow", "cmd_follow", "follow a run live (default: the thread's latest run)")
    _thread(p)
    p.add_argument("run", nargs="?", metavar="RUN", help="the run id (default: the latest)")

    p = add("show", "cmd_show", "print a thread's timeline")
    _thread(p)

    p = add("threads", "cmd_threads", "list the tenant's threads, most recent activity first")
    p.add_argument("--limit", type=int, help="at most this many (a page; default 50)")
    p.add_argument("--all", action="store_true", help="every page")
    p.add_argument(
        "--status", choices=("idle", "in_turn", "parked", "cancelled", "inspection_only"), help="only these"
    )
    p.add_argument("--agent", help="only this agent's threads")
    p.add_argument(
        "--meta",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="only threads labelled so (repeatable)",
    )
    p.add_argument("--search", metavar="TEXT", help="only threads whose title contains TEXT (any case)")
    p.add_argument("--updated-after", type=int, metavar="MS", help="last activity after this (epoch ms)")
    p.add_argument("--updated-before", type=int, metavar="MS", help="last activity before this (epoch ms)")

    p = add("label", "cmd_label", "set a thread's title or metadata (PATCH /v1/threads/{id})")
    _thread(p, branch=False)
    p.add_argument("--title", help="the thread's new title")
    p.add_argument("--meta", action="append", default=[], metavar="KEY=VALUE", help="set a key (repeatable)")
    p.add_argument("--unset", action="append", default=[], metavar="KEY", help="remove a key (repeatable)")

    for name, func, what in (("approve", "cmd_approve", "grant"), ("deny", "cmd_deny", "deny")):
        p = add(name, func, f"{what} a pending approval (the only one, or CHALLENGE)")
        _thread(p)
        p.add_argument("challenge", nargs="?", metavar="CHALLENGE", help="the challenge id")
        if name == "approve":
            p.add_argument("--remember", metavar="RULE", help="keep this rule (one of the suggested rules)")
        p.add_argument("--reason", help="recorded with the decision")
        _follow_flag(p)

    p = add("answer", "cmd_answer", "answer the open question")
    _thread(p)
    p.add_argument(
        "answer", nargs="+", metavar="ANSWER", help="the answer; several for a multi-select question"
    )
    p.add_argument("--call", metavar="CALL_ID", help="the question's call id (default: the only open one)")
    _follow_flag(p)

    p = add("resolve", "cmd_resolve", "settle an effect whose outcome is unknown")
    _thread(p)
    p.add_argument("resolution", choices=("done", "not-done"), help="what happened")
    p.add_argument("effect_key", nargs="?", metavar="EFFECT_KEY", help="default: the only unknown one")
    _follow_flag(p)

    p = add("cancel", "cmd_cancel", "cancel what runs on a branch")
    _thread(p)

    p = add("fork", "cmd_fork", "fork a thread at a fork point (default: the latest)")
    _thread(p)
    p.add_argument("event_id", nargs="?", metavar="EVENT_ID", help="the snapshot event to fork at")
    p.add_argument("--mode", choices=("live", "stub"), help="stub: nothing mediated goes live (default live)")
    p.add_argument("--knowledge", choices=("pinned", "current"), help="default pinned")

    p = add(
        "export",
        "cmd_export",
        "write a branch's JSONL log (verify it with `threads-aws log verify`)",
        "Write the branch's log, byte-exact. The host API has no export route (the timeline lacks "
        "the header line), so the bytes come from the store: set the environment `threads-aws "
        "dev` prints under `store:` (EVENTS_TABLE, STATE_TABLE, ARTIFACTS_BUCKET, AWS_*).",
    )
    _thread(p)
    p.add_argument("-o", "--output", metavar="OUT", help="output file (default: stdout)")
