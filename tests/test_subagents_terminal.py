"""The CLI on a subagent run (through `threads-aws dev`): the parent parks on its child, the
prompt asks for the CHILD's approval (found through the parent's pending child), granting it
finishes the run; with --no-input the hint names the child thread to approve."""

from __future__ import annotations

from test_terminal import EXIT_PARKED, cli, env, finish, spawn  # noqa: F401 - env is a fixture


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
