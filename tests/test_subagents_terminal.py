"""The CLI on a subagent run (through `threads-aws dev`): the parent parks on its child, the
prompt asks for the CHILD's approval (found through the parent's pending child), granting it
finishes the run; with --no-input the hint names the child thread to approve."""

from __future__ import annotations

from test_terminal import EXIT_PARKED, cli, env, finish, spawn  # noqa: F401 - env is a fixture
from threads_aws_client import Client


def test_run_prompts_for_the_childs_approval_and_completes(env: dict[str, str]) -> None:  # noqa: F811
    child = spawn(env, "run", "spawn: demo: note: from the child")
    child.expect("approval needed")
    child.expect('note\\(text="from the child"\\)')
    child.expect("ater: ")
    child.sendline("g")
    code, text = finish(child)
    assert code == 0, text
    assert "completed" in text and "Done: Done: " in text


def test_no_input_names_the_child_thread_to_approve(env: dict[str, str]) -> None:  # noqa: F811
    out = cli(env, "run", "--no-input", "spawn: demo: note: later")
    assert out.returncode == EXIT_PARKED, out.stderr
    hint = next(ln for ln in out.stdout.splitlines() if "next:" in ln)
    child = hint.split("threads-aws approve ")[1].split()[0]
    done = cli(env, "approve", child, "--follow")
    assert done.returncode == 0, done.stdout + done.stderr


def test_follow_after_the_childs_approval_shows_the_resumed_run(env: dict[str, str]) -> None:  # noqa: F811
    """README's `approve C` then `follow $T`: the parent is still parked on its child for a moment
    after the grant; `follow` must wait for it to resume, not print that stale park."""
    out = cli(env, "run", "--no-input", "spawn: demo: note: approve then follow")
    assert out.returncode == EXIT_PARKED, out.stderr
    thread = out.stdout.split("thread ", 1)[1].split()[0]
    hint = next(ln for ln in out.stdout.splitlines() if "next:" in ln)
    child = hint.split("threads-aws approve ")[1].split()[0]
    with Client(env["THREADS_URL"], env["THREADS_TOKEN"]) as client:  # quicker than a CLI process
        (approval,) = client.approvals(child)
        client.approve(child, approval["challenge_id"])
    done = cli(env, "follow", thread)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "completed" in done.stdout and "parked" not in done.stdout
