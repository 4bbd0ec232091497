"""Asking a person what a parked run waits on: an approval (grant / deny / grant and remember one
of the suggested rules), a question (its choices when offered), an effect of unknown outcome
(done / not done). Each answer is sent at once; "later" leaves the run parked."""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from rich.console import Console
from rich.panel import Panel
from rich.text import Text
from threads_aws_client import (
    ApprovalDuplicateError,
    BranchBusyError,
    Client,
    InvalidRequestError,
    NoOpenQuestionError,
    NotParkedError,
)
from threads_aws_client.types import PendingApproval

from .line_input import read_line
from .render import call_text

if TYPE_CHECKING:  # pragma: no cover
    from .live import RunView

T = TypeVar("T")
BUSY_TRIES = 20  # × 0.25 s: the worker holds the branch lease only while it writes


def with_busy_retry(fn: Callable[[], T]) -> T:
    """Send a control again while the branch is busy (branch_busy: nothing was written)."""
    for _ in range(BUSY_TRIES - 1):
        try:
            return fn()
        except BranchBusyError:
            time.sleep(0.25)
    return fn()


def settle(client: Client, console: Console, view: RunView, outcome: dict[str, Any]) -> bool:
    """Ask about everything the parked run waits on; True when all of it was answered (follow
    on), False when the person chose to leave it waiting (or nothing here can settle it)."""
    thread_id, branch_id = outcome["thread_id"], outcome["branch_id"]
    pending = outcome.get("pending") or []
    settled = 0
    if outcome.get("reason") == "awaiting_approval":
        wanted = {p["id"] for p in pending if p.get("kind") == "approval"}
        for approval in client.approvals(thread_id, branch_id):
            if approval["challenge_id"] in wanted:
                if not ask_approval(client, console, thread_id, approval):
                    return False
                settled += 1
        for p in pending:  # a subagent's park: its approvals are the child's (or a grandchild's)
            if p.get("kind") == "child":
                found = child_approvals(client, p["id"])
                for child, approval in found:
                    if not ask_approval(client, console, child, approval):
                        return False
                    settled += 1
                if not found and working(client, p["id"]):  # granted: the child goes on
                    time.sleep(0.25)
                    settled += 1
    elif outcome.get("reason") == "awaiting_input":
        for p in pending:
            if p.get("kind") == "input":
                question = view.calls.get(p["id"]) or find_call(client, thread_id, branch_id, p["id"])
                if not ask_question(client, console, thread_id, branch_id, p["id"], question):
                    return False
                settled += 1
    elif outcome.get("reason") == "effect_unknown":
        for p in pending:
            if p.get("kind") == "effect":
                if not ask_effect(client, console, thread_id, branch_id, p["id"], view):
                    return False
                settled += 1
    return settled > 0


def child_approvals(client: Client, thread_id: str, depth: int = 0) -> list[tuple[str, Any]]:
    """(thread, approval) pairs open in a parked child, or down its running children."""
    found = [(thread_id, a) for a in client.approvals(thread_id)]
    if found or depth >= 8:
        return found
    for c in client.thread(thread_id).get("children", []):
        if c["status"] == "running":
            found += child_approvals(client, c["child_thread_id"], depth + 1)
    return found


def working(client: Client, thread_id: str, depth: int = 0) -> bool:
    """The child is no longer parked (or the child it parks on isn't): its parent resumes soon,
    so following on will see the run go on."""
    detail = client.thread(thread_id)
    if detail["status"] != "parked":
        return True
    return depth < 8 and any(
        working(client, c["child_thread_id"], depth + 1)
        for c in detail.get("children", [])
        if c["status"] == "running"
    )


def find_call(client: Client, thread_id: str, branch_id: str, call_id: str) -> dict[str, Any] | None:
    for entry in client.timeline(thread_id, branch_id)["entries"]:
        ev = entry["event"]
        if ev["type"] == "tool_call" and ev["data"].get("call_id") == call_id:
            return dict(ev["data"])
    return None


def _ask(console: Console, prompt: str, accepted: dict[str, str]) -> str:
    """Read one of `accepted` (word or letter → choice); Ctrl-D means later."""
    while True:
        try:
            raw = read_line(console, prompt).strip().lower()
        except EOFError:
            return "later"
        if raw in accepted:
            return accepted[raw]
        console.print(f"  answer one of: {', '.join(sorted(set(accepted)))}", style="dim")


def ask_approval(client: Client, console: Console, thread_id: str, approval: PendingApproval) -> bool:
    rules = list(approval.get("suggested_rules") or [])
    body = Text.assemble(
        (call_text(approval["tool"], approval.get("input")), "bold cyan"),
        "\n",
        (json.dumps(approval.get("input"), indent=2, ensure_ascii=False), "dim"),
    )
    console.print(Panel(body, title="approval needed", border_style="yellow", expand=False))
    options = {
        "g": "grant",
        "grant": "grant",
        "y": "grant",
        "yes": "grant",
        "d": "deny",
        "deny": "deny",
        "n": "deny",
    }
    options |= {"l": "later", "later": "later"}
    menu = "[bold]g[/]rant · [bold]d[/]eny · "
    if rules:
        options |= {"r": "remember", "remember": "remember"}
        menu += "[bold]r[/]emember a rule · "
    choice = _ask(console, menu + "[bold]l[/]ater: ", options)
    if choice == "later":
        return False
    rule = None
    if choice == "remember":
        rule = rules[0] if len(rules) == 1 else _pick(console, "rule to keep", rules)
        if rule is None:
            return False
    decision: Literal["grant", "deny"] = "deny" if choice == "deny" else "grant"
    try:
        with_busy_retry(
            lambda: client.decide(thread_id, approval["challenge_id"], decision, remember_rule=rule)
        )
    except ApprovalDuplicateError:
        console.print("  already decided elsewhere", style="dim")
        return True
    what = {"grant": "granted", "deny": "denied"}[decision] + (f", rule kept: {rule}" if rule else "")
    console.print(f"  {what}", style="green" if decision == "grant" else "red", highlight=False)
    return True


def _pick(console: Console, what: str, options: list[str], *, multi: bool = False) -> Any:
    for i, option in enumerate(options, 1):
        console.print(f"  [bold]{i}[/]) {option}", highlight=False)
    hint = "numbers, comma-separated" if multi else "a number"
    while True:
        try:
            raw = read_line(console, f"{what} ({hint}; empty: later): ").strip()
        except EOFError:
            return None
        if not raw:
            return None
        picked = []
        for part in raw.split(",") if multi else [raw]:
            part = part.strip()
            if part.isdigit() and 1 <= int(part) <= len(options):
                picked.append(options[int(part) - 1])
            elif any(part.lower() == o.lower() for o in options):
                picked.append(next(o for o in options if part.lower() == o.lower()))
            else:
                picked = []
                break
        if picked:
            return picked if multi else picked[0]
        console.print(f"  pick from 1..{len(options)}", style="dim")


def ask_question(
    client: Client,
    console: Console,
    thread_id: str,
    branch_id: str,
    call_id: str,
    call: dict[str, Any] | None,
) -> bool:
    args = (call or {}).get("input") or {}
    question = str(args.get("question") or "(the question is not in the log)")
    options = [o for o in args.get("options") or [] if isinstance(o, str)]
    console.print(Panel(Text(question, style="bold"), title="question", border_style="yellow", expand=False))
    while True:
        if options:
            answer: Any = _pick(console, "your answer", options, multi=args.get("multi_select") is True)
        else:
            try:
                answer = read_line(console, "your answer (empty: later): ").strip() or None
            except EOFError:
                answer = None
        if answer is None:
            return False
        try:
            with_busy_retry(functools.partial(client.answer, thread_id, call_id, answer, branch_id=branch_id))
        except InvalidRequestError as exc:
            console.print(f"  {exc.message}", style="red", highlight=False)
            continue
        except NoOpenQuestionError:
            console.print("  already answered", style="dim")
        return True


def ask_effect(
    client: Client, console: Console, thread_id: str, branch_id: str, effect_key: str, view: RunView
) -> bool:
    call = next((c for cid, c in view.calls.items() if effect_key.endswith(cid)), None)
    what = call_text(str(call.get("name")), call.get("input")) if call else effect_key
    console.print(
        Panel(
            Text.assemble(("Did this take effect?\n", "bold"), (what, "cyan")),
            title="outcome unknown",
            border_style="red",
            expand=False,
        )
    )
    options = {
        "d": "assume_done",
        "done": "assume_done",
        "n": "assume_not_done",
        "not done": "assume_not_done",
    }
    options |= {"l": "later", "later": "later"}
    choice = _ask(console, "[bold]d[/]one · [bold]n[/]ot done · [bold]l[/]ater: ", options)
    if choice == "later":
        return False
    try:
        with_busy_retry(lambda: client.resolve_parked(thread_id, effect_key, choice, branch_id=branch_id))  # type: ignore[arg-type]
    except NotParkedError:
        console.print("  already resolved", style="dim")
    return True
