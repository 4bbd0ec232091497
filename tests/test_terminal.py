"""The CLI for people under a pseudo-terminal (pexpect) against a real `threads-aws dev`: a run
that asks for approval is approved at the prompt, one that asks a question is answered at the
prompt, Ctrl-C offers to cancel, each followed to its end with the exit code of its outcome;
and the script forms (--json, approve/answer/follow, show, export → log verify) without one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pexpect
import pytest
from helpers.people_dev import people_dev, release
from threads_aws_client import Client
from threads_aws_dev.terminal import EXIT_CANCELLED, EXIT_INTERRUPTED, EXIT_PARKED

EXE = str(Path(sys.executable).with_name("threads-aws"))
TIMEOUT = 60


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    dev = people_dev()
    out = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "THREADS_"))}
    out.update(THREADS_URL=dev.url, THREADS_TOKEN="dev:api:local:alice", TERM="xterm-256color")
    return out


def spawn(env: dict[str, str], *args: str) -> pexpect.spawn:
    child = pexpect.spawn(EXE, list(args), env=env, encoding="utf-8", timeout=TIMEOUT, dimensions=(40, 140))
    child.logfile_read = open(os.devnull, "w")  # noqa: SIM115 - closed with the child
    return child


def finish(child: pexpect.spawn) -> tuple[int, str]:
    child.expect(pexpect.EOF)
    text = child.before or ""
    child.close()
    return int(child.exitstatus if child.exitstatus is not None else 128 + (child.signalstatus or 0)), text


def cli(
    env: dict[str, str], *args: str, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [EXE, *args],
        env={**env, **(extra_env or {})},
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
    )


def thread_of(text: str) -> str:
    line = next(ln for ln in text.splitlines() if ln.lstrip().startswith("thread "))
    return line.split()[1]


def test_run_asks_for_approval_and_grant_at_the_prompt_completes(env):
    child = spawn(env, "run", "note: buy milk")
    child.expect("approval needed")
    child.expect('note\\(text="buy milk"\\)')
    child.expect("ater: ")
    child.sendline("g")
    code, text = finish(child)
    assert code == 0
    assert "granted" in text and "✓" in text and "Done: stored note" in text and "completed" in text


def test_run_asks_a_question_answered_at_the_prompt(env):
    child = spawn(env, "run", "ask: tea or coffee?")
    child.expect("question")
    child.expect("tea or coffee\\?")
    child.expect("your answer")
    child.sendline("tea")
    code, text = finish(child)
    assert code == 0 and "Done: tea" in text


def test_a_question_with_options_is_answered_by_number(env):
    child = spawn(env, "run", "pick: tea or coffee? | Tea, Coffee")
    child.expect("\\) Tea")
    child.expect("\\) Coffee")
    child.expect("a number")
    child.sendline("3")  # not offered: asked again
    child.expect("pick from 1..2")
    child.sendline("2")
    code, text = finish(child)
    assert code == 0 and "Done: Coffee" in text


def test_a_multi_select_question_takes_several(env):
    child = spawn(env, "run", "picks: which days? | mon, tue, wed")
    child.expect("comma-separated")
    child.sendline("1, wed")
    code, text = finish(child)
    assert code == 0 and "Done: mon" in text


def test_remember_keeps_the_rule_and_the_next_run_needs_no_approval(env):
    child = spawn(env, "run", "note: first")
    child.expect("thread ([0-9a-f-]{36}) · run")
    thread = child.match.group(1)
    child.expect("ater: ")
    child.sendline("r")
    code, text = finish(child)
    assert code == 0 and "rule kept" in text
    child = spawn(env, "run", "--thread", thread, "note: second")
    idx = child.expect(["ater: ", pexpect.EOF])
    assert idx == 1, "asked again although the rule was kept"
    child.close()
    assert child.exitstatus == 0 and "Done: stored note" in (child.before or "")


def test_later_leaves_it_parked_then_approve_and_follow(env):
    child = spawn(env, "run", "note: later")
    child.expect("thread ([0-9a-f-]{36}) · run")
    thread = child.match.group(1)
    child.expect("ater: ")
    child.sendline("l")
    code, text = finish(child)
    assert code == EXIT_PARKED and "parked: awaiting_approval" in text and "threads-aws approve" in text
    done = cli(env, "approve", thread, "--json")
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert body["decision"] == "grant" and body["event_id"]
    followed = cli(env, "follow", thread)
    assert followed.returncode == 0 and "Done: stored note" in followed.stdout


def test_ctrl_c_at_the_prompt_offers_cancel(env):
    child = spawn(env, "run", "note: never")
    child.expect("ater: ")
    child.sendintr()
    child.expect("Cancel the run\\?")
    child.sendline("y")
    code, text = finish(child)
    assert code == EXIT_CANCELLED and "cancel requested" in text and "cancelled" in text


def test_ctrl_c_while_the_model_works_can_leave_the_run_going(env):
    child = spawn(env, "run", "[hold] hello")
    child.expect("thread ([0-9a-f-]{36}) · run ([0-9a-f-]{36})")
    thread, run = child.match.group(1), child.match.group(2)
    child.expect("model is working")  # the spinner row
    child.sendintr()
    child.expect("Cancel the run\\?")
    child.sendline("n")
    code, text = finish(child)
    assert code == EXIT_INTERRUPTED and f"threads-aws follow {thread} {run}" in text
    with Client(env["THREADS_URL"], env["THREADS_TOKEN"]) as c:
        release(c.branches(thread)[0]["branch_id"])
    followed = cli(env, "follow", thread, run)
    assert followed.returncode == 0 and 'You said: "[hold] hello"' in followed.stdout


# ------------------------------------------------------------------ without a terminal
def test_json_run_is_one_message_per_line_ending_with_the_result(env):
    out = cli(env, "run", "--json", "todo: milk; bread")
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert [m["kind"] for m in lines][-1] == "result" and lines[-1]["result"]["status"] == "completed"
    assert all(m["kind"] == "event" for m in lines[:-1])
    seqs = [m["event"]["seq"] for m in lines[:-1]]
    assert seqs == sorted(set(seqs))  # each event once, in order, across the short windows
    assert "todos_updated" in [m["event"]["type"] for m in lines[:-1]]


def test_parked_without_a_terminal_exits_parked_then_deny_and_answer(env):
    out = cli(env, "run", "note: no tty")
    assert out.returncode == EXIT_PARKED and "parked" in out.stdout
    thread = thread_of(out.stdout)
    denied = cli(env, "deny", thread, "--reason", "not today", "--follow")
    assert denied.returncode == 0, denied.stderr
    assert "denied" in denied.stdout
    again = cli(env, "deny", thread)
    assert again.returncode == 1 and "nothing to deny" in again.stderr

    asked = cli(env, "run", "--json", "ask: which day?")
    assert asked.returncode == EXIT_PARKED
    thread = json.loads(asked.stdout.splitlines()[-1])["result"]["thread_id"]
    answered = cli(env, "answer", thread, "monday", "--follow")
    assert answered.returncode == 0 and "Done: monday" in answered.stdout
    none_open = cli(env, "answer", thread, "tuesday")
    assert none_open.returncode == 1 and "nothing to answer" in none_open.stderr


def test_show_cancel_fork_and_export_verified(env, tmp_path):
    out = cli(env, "run", "note: exported")
    thread = thread_of(out.stdout)
    shown = cli(env, "show", thread)
    assert shown.returncode == 0
    for word in ("thread started", "note: exported", "approval requested", "parked: awaiting_approval"):
        assert word in shown.stdout, word
    timeline = json.loads(cli(env, "show", thread, "--json").stdout)
    assert timeline["thread_id"] == thread and timeline["entries"][0]["event"]["seq"] == 1
    cancelled = cli(env, "cancel", thread, "--json")
    assert cancelled.returncode == 0 and json.loads(cancelled.stdout)["event_id"]
    fork = cli(env, "fork", thread)
    assert fork.returncode == 1 and "no fork point" in fork.stderr

    store_env = people_dev().env
    target = tmp_path / "thread.jsonl"
    exported = cli(env, "export", thread, "-o", str(target), "--json", extra_env=store_env)
    assert exported.returncode == 0, exported.stderr
    summary = json.loads(exported.stdout)
    assert summary["thread_id"] == thread and summary["bytes"] == target.stat().st_size > 0
    verified = cli(env, "log", "verify", str(target))
    assert verified.returncode == 0 and verified.stdout.startswith("ok "), verified.stderr
    last_seq = timeline["entries"][-1]["event"]["seq"]
    assert int(verified.stdout.split("head seq ")[1].split()[0]) >= last_seq
    no_store = cli(env, "export", thread)
    assert no_store.returncode == 2 and "store" in no_store.stderr


def test_exit_codes_of_host_failures(env):
    bad_page = cli(env, "threads", "--limit", "0")
    assert bad_page.returncode == 1 and "error invalid_request" in bad_page.stderr
    bad = cli(env, "show", "00000000-0000-7000-8000-000000000000", extra_env={"THREADS_TOKEN": "nope"})
    assert bad.returncode == 1 and "error unauthenticated" in bad.stderr
    missing = cli(env, "show", "00000000-0000-7000-8000-000000000000")
    assert missing.returncode == 1 and "error not_found" in missing.stderr
    down = cli(env, "show", "x", extra_env={"THREADS_URL": "http://127.0.0.1:9"})
    assert down.returncode == 4 and "cannot reach" in down.stderr


def test_people_commands_start_fast_without_the_client_loaded(env):
    probe = (
        "import sys, threads_aws_dev.cli as c; c.build_parser(); "
        "print([m for m in sys.modules if m.startswith(('httpx', 'rich', 'threads_aws_client', 'boto3'))])"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ------------------------------------------------------------------ the live view, message by message
def test_run_view_streams_text_and_tracks_tool_rows():
    from rich.console import Console
    from threads_aws_dev.terminal.live import RunView

    view = RunView()

    def ev(type_: str, **data: Any) -> dict[str, Any]:
        return {"kind": "event", "event": {"type": type_, "branch_id": "b", "data": data}}

    def text(lines: list[Any]) -> str:
        console = Console(width=100, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
        for line in lines:
            console.print(line)
        return console.export_text()

    assert "hi there" in text(view.apply(ev("user_input", text="hi there")))
    view.apply(ev("model_request", attempt=2))
    assert view.phase == "model is working (attempt 2)"
    view.apply({"kind": "delta", "request_event_id": "q", "text": "Hel"})
    view.apply({"kind": "delta", "request_event_id": "q", "text": "lo"})
    assert view.buffer == "Hello" and "Hello" in text([view])
    out = view.apply(ev("model_response", content=[{"type": "text", "text": "Hello!"}]))
    assert view.buffer == "" and view.phase is None and text(out).strip() == "Hello!"
    view.apply(ev("tool_call", call_id="c1", name="note", input={"text": "milk"}))
    view.apply(ev("permission_decision", call_id="c1", decision="ask", source="policy"))
    view.apply(ev("approval_requested", call_id="c1"))
    assert 'note(text="milk")  waiting for approval' in text([view])
    view.apply(ev("approval_granted", call_id="c1"))
    view.apply(ev("effect_begin", call_id="c1"))
    assert view.rows["c1"].status == "running"
    done = view.apply(ev("tool_result", call_id="c1", is_error=False, preview="stored note 1"))
    assert "c1" not in view.rows and '✓ note(text="milk")  stored note 1' in text(done)
    todos = view.apply(
        ev("todos_updated", call_id="c2", todos=[{"id": "1", "content": "a", "status": "completed"}])
    )
    assert "☑ a" in text(todos)
    view.apply({"kind": "status", "status": "retry_wait", "until": 1})
    assert view.phase and "retry" in view.phase


def test_threads_lists_the_newest_first_with_title_and_status(env):
    tag = uuid.uuid4().hex[:8]
    done = cli(env, "run", "--json", f"{tag} first")
    assert done.returncode == 0, done.stderr
    # rich fits the table to the terminal: other tests' longer agent names on the shared dev
    # server would squeeze the title column to an ellipsis at the default 80 columns
    listing = cli(env, "threads", "--limit", "200", extra_env={"COLUMNS": "200"})
    assert listing.returncode == 0, listing.stderr
    line = next(ln for ln in listing.stdout.splitlines() if tag in ln)
    assert "demo" in line and "idle" in line
    as_json = json.loads(cli(env, "threads", "--all", "--json").stdout)
    mine = [t for t in as_json["threads"] if t.get("title", "").startswith(tag)]
    assert len(mine) == 1 and mine[0]["status"] == "idle"
