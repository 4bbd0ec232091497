"""README's command blocks, run as pasted against `threads-aws dev`, so they stay true.

The README is split into sections (`##`/`###` headings) and code blocks (indented by 4+ spaces,
or fenced). The blocks of the sections in RUN are executed, each in a fresh `bash` (a block sets
its own variables: nothing carries over from another block) or `python`, in a scratch directory
holding a `.venv` link to this venv, against ONE `threads-aws dev --dev-tokens` on 127.0.0.1:8787
started for the module exactly as the README starts it (no port rewriting: the blocks run as
written; if 8787 is taken, e.g. by your own dev server, the module skips and says so). Every
command's exit code is checked (0 unless EXIT says otherwise) and key outputs (OUTPUT).

The few lines that are not executed, and why (SUBSTITUTED):
- the install lines (`python3 -m venv .venv && .venv/bin/pip install ...`): this venv is that
  install; tests/test_dev_pins.py checks it carries the layer's pins;
- `threads-aws dev --dev-tokens` (in the foreground, or `> dev.log 2>&1 &`): the module's server
  is that command, started once, its output in `dev.log` of the scratch directory, as the tour has
  (with THREADS_DEMO_DELTA_MS=0: the demo model's answer at once, not a word per 30 ms);
- `python3 -m webbrowser URL`: runs with BROWSER=true (nothing opens); the test fetches the URL.
Blocks are run with the venv's `bin` first on PATH (what the tour's `export PATH=...` sets).

Sections whose blocks cannot run here are in NOT_RUN with the reason.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
VENV = Path(sys.prefix) if (Path(sys.prefix) / "pyvenv.cfg").exists() else None
PORT = 8787
BASE = f"http://127.0.0.1:{PORT}"
BLOCK_TIMEOUT = 180

# The README's sections whose blocks this test runs (heading prefixes; "" = before the first ##).
RUN = (
    "",
    "Try it",
    "A 5-minute tour",
    "Run limits",
    "Tools",
    "Python client",
    "Run subscriptions",
    "Schedules",
    "Listing threads",
)
NOT_RUN = {
    "Local state": "no command block",
    "Limits": "the paging loop needs a thread longer than a page (tests/test_host_paging.py)",
    "Channels": "a channels file (JSON, not a command) and a Slack app behind a public tunnel",
    "A Slack app": "needs a Slack workspace and a public tunnel",
    "Use a real model": "needs a provider's paid API key",
    "Deploy": "needs an AWS account (its build commands: the deploy work's own test)",
    "sam local": "needs Docker",
    "Conformance": "needs ../shared/conformance/cases (tests/test_conformance.py runs them)",
    "Benchmarks": "benchmarks print figures, minutes each; not tests",
    "Smoke test": "its own test runs `threads-aws smoke` against dev",
}
# Not executed inside a block that runs (a command's substring → why).
SKIP_COMMANDS = {
    "for i in $(seq 16)": "16 runs (~80 s here): compaction is covered by tests/test_compaction.py",
}
# A command's expected exit code where it is not 0 (section prefix, command substring → code).
# Without a terminal (as here) `run` does not ask: a run that would ask is parked, exit 11.
EXIT = {
    ("A 5-minute tour", 'run "note: buy milk"'): 11,
    ("A 5-minute tour", 'run "ask: tea or coffee?"'): 11,
    ("A 5-minute tour", '--json "note: call mum"'): 11,
    ("A 5-minute tour", '"ask: tea or coffee?" '): 11,
    ("A 5-minute tour", '--agent demo-ttl "note: call dad"'): 11,
    ("A 5-minute tour", '--json "spawn: demo: note: buy milk"'): 11,
    ("A 5-minute tour", 'run "handoff: demo"'): 14,
    ("Run limits", '"long: 300"'): 10,
    ("Tools", "lambda: add_expense"): 11,
    ("Tools", "mcp__demo__save_record"): 11,
    ("Tools", "mcp__demo__delete_record"): 11,
}
# What a command's output must contain (section prefix, command substring → substrings).
OUTPUT = {
    ("Try it", '"branch_id":…'): ['"thread_id"', '"run_id"'],
    ("Try it", "| tee events"): ['"status":"parked"', "awaiting_approval"],
    ("Try it", '"decision":"grant"'): ['"event_id"'],
    ("Try it", "Last-Event-ID: $LAST"): ['"type":"approval_granted"', '"status":"completed"'],
    ("A 5-minute tour", "latest activity first"): ["todo: mi"],
    ("Listing threads", "PATCH: title and metadata"): ["Offsite 2027", "quarter=q3", "team=events"],
    ("Listing threads", "filtered reads: metadata pair"): ["Offsite 2027"],
    ("Listing threads", "null removes a key"): ['"metadata":{"team":"events"}', '"title":"Offsite 2027"'],
    ("Listing threads", "metadata%5Bteam%5D=events"): ['"title":"Offsite 2027"'],
    ("Listing threads", "another tenant: not_found"): ['"code":"not_found"'],
    ("A 5-minute tour", '"recall: my colour"'): ["blue", "completed"],
    ("A 5-minute tour", "its timeline"): ["todos: 2 item", "turn completed"],
    ("A 5-minute tour", "approve $T --follow"): ["completed"],
    ("A 5-minute tour", 'answer $T "tea"'): ["completed"],
    ("A 5-minute tour", "the park escalated once"): ["park escalated"],
    ("A 5-minute tour", "log verify t.jsonl"): ["ok"],
    ("A 5-minute tour", "approve $C"): ["granted"],
    ("A 5-minute tour", "the child's answer"): ["Done: Done: stored note", "completed"],
    ("A 5-minute tour", "threads-aws show $T                                   # team"): [
        "team task t3 completed",
        "team message",
        "turn completed",
    ],
    ("A 5-minute tour", '--branch $CHILD "write'): ["completed"],
    ("A 5-minute tour", 'read notes.txt"'): ["the original", "completed"],
    ("A 5-minute tour", "write plan.txt: scratch"): ["completed"],
    ("A 5-minute tour", "write plan.txt: draft 2"): ["merged into your workspace: plan.txt (modified)"],
    ("A 5-minute tour", 'read plan.txt"'): ["draft 2", "completed"],
    ("A 5-minute tour", "-X DELETE"): ["204"],
    ("A 5-minute tour", "as on every route"): ['"not_found"'],
    ("Run limits", '"a city"'): ["completed"],
    ("Run limits", "budget"): ['"run_id"'],
    ("Tools", "lookup_rate"): ["completed"],
    ("Run subscriptions", "events?format=craze"): ['"type"'],
    ("Run subscriptions", "events?format=ag-ui"): ["RUN_STARTED"],
}
INSTALL = re.compile(r"^python3 -m venv \.venv(/sam)? && ")
DEV = re.compile(r"^(\.venv/bin/)?threads-aws dev --dev-tokens( > dev\.log 2>&1 &)?(\s+#.*)?$")
BROWSE = re.compile(r"^python3 -m webbrowser (\S+)")


@dataclass
class Block:
    section: str
    lang: str  # "sh" or "python" (or another fence's language)
    text: str
    line: int


def blocks(markdown: str) -> list[Block]:
    """Indented (4+ spaces after a blank line) and fenced blocks, each with its section."""
    out: list[Block] = []
    section = ""
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        ln = lines[i]
        if ln.startswith("#"):
            section = ln.lstrip("#").strip()
        fence = re.match(r"^```(\w*)\s*$", ln)
        if fence:
            j = i + 1
            while not lines[j].startswith("```"):
                j += 1
            out.append(Block(section, fence[1] or "sh", "\n".join(lines[i + 1 : j]) + "\n", i + 1))
            i = j + 1
            continue
        if ln.startswith("    ") and ln.strip() and (i == 0 or not lines[i - 1].strip()):
            j = i
            while j < len(lines) and (lines[j].startswith("    ") or not lines[j].strip()):
                j += 1
            body = [x for x in lines[i:j]]
            while body and not body[-1].strip():
                body.pop()
            indent = min(len(x) - len(x.lstrip()) for x in body if x.strip())
            out.append(Block(section, "sh", "\n".join(x[indent:] for x in body) + "\n", i + 1))
            i = j
            continue
        i += 1
    return out


def commands(text: str) -> list[str]:
    """A shell block's commands: backslash continuations joined, comment-only lines dropped."""
    out: list[str] = []
    pending = ""
    for ln in text.splitlines():
        if not pending and (not ln.strip() or ln.lstrip().startswith("#")):
            continue
        pending += ln + "\n"
        if not ln.endswith("\\"):
            out.append(pending)
            pending = ""
    if pending:
        out.append(pending)
    return out


def owned(section: str) -> bool:
    return any(section.startswith(p) for p in RUN if p) or section == "threads-aws"


# ------------------------------------------------------------------ the server
def port_free() -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", PORT))
        except OSError:
            return False
    return True


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    if VENV is None:
        pytest.skip("not run from a venv: the README's blocks call .venv/bin/...")
    if shutil.which("jq") is None:
        pytest.skip("the README's blocks use jq (apt-get install jq)")
    if not port_free():
        pytest.skip(f"port {PORT} is in use (your own `threads-aws dev`?): the README's blocks use it")
    work = tmp_path_factory.mktemp("readme")
    (work / ".venv").symlink_to(VENV)
    log = (work / "dev.log").open("w")
    dev = subprocess.Popen(
        [str(work / ".venv" / "bin" / "threads-aws"), "dev", "--dev-tokens"],  # .venv/bin/threads-aws
        cwd=work,
        env={**clean_env(work), "THREADS_DEMO_DELTA_MS": "0"},  # the demo's words at once: a faster test
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while "\nready " not in "\n" + (work / "dev.log").read_text():
            assert dev.poll() is None, (work / "dev.log").read_text()
            assert time.monotonic() < deadline, "dev did not print ready"
            time.sleep(0.2)
        yield work
    finally:
        dev.send_signal(signal.SIGINT)  # Ctrl-C, as in the terminal the README starts it in
        try:
            dev.wait(30)
        except subprocess.TimeoutExpired:
            dev.kill()
            dev.wait()
        log.close()


def clean_env(work: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "THREADS_"))}
    env["PATH"] = f"{work / '.venv' / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
    env["BROWSER"] = "true"
    env["TERM"] = "dumb"
    # One width whatever the caller's terminal: rich fits the listing's columns to it, and an
    # earlier section's longer agent names (demo-structured) would otherwise squeeze the titles.
    env["COLUMNS"] = "160"
    return env


# ------------------------------------------------------------------ running a block
def run_shell(work: Path, block: Block) -> list[tuple[str, int, str]]:
    """(command, exit code, output) for each command of the block, run in one bash."""
    script, cmds = [], []
    for cmd in commands(block.text):
        head = cmd.strip()
        if INSTALL.match(head) or DEV.match(head):
            continue
        if any(k in head for k in SKIP_COMMANDS):
            continue
        cmds.append(cmd)
        n = len(cmds) - 1
        script.append(f"echo '@@start {n}'\n{cmd}echo \"@@end {n} $?\"\n")
    path = work / f"block-{block.line}.sh"
    path.write_text("".join(script))
    out = subprocess.run(  # stdin is not the script: a command reading stdin must not eat it
        ["bash", "--noprofile", "--norc", str(path)],
        cwd=work,
        env=clean_env(work),
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    text = out.stdout + out.stderr
    results = []
    for n, cmd in enumerate(cmds):
        m = re.search(rf"@@start {n}\n(.*?)@@end {n} (\d+)\n", out.stdout, re.S)
        assert m, f"README line {block.line}: `{cmd.strip()}` did not finish:\n{text[-3000:]}"
        results.append((cmd, int(m[2]), m[1]))
    return results


def expected(table: dict[tuple[str, str], object], section: str, cmd: str, default: object) -> object:
    for (prefix, needle), value in table.items():
        if section.startswith(prefix) and needle in cmd:
            return value
    return default


def owned_blocks() -> list[Block]:
    return [b for b in blocks(README.read_text()) if owned(b.section)]


def test_every_section_with_blocks_is_run_or_listed():
    """The sections listed here exist, and each owned section has blocks to run."""
    found = {b.section for b in blocks(README.read_text())}
    for prefix in RUN[1:]:
        assert any(s.startswith(prefix) for s in found), f"README has no blocks under {prefix!r}"
    assert "threads-aws" in found  # the first lines


def test_the_install_lines_it_does_not_run_use_the_layers_pins():
    """The substituted install lines (README's own, in the sections run here) and .ci/run's install
    of this venv all pass the layer's constraints (tests/test_dev_pins.py checks the result)."""
    lines = [
        c.strip()
        for b in owned_blocks()
        for c in commands(b.text)
        if INSTALL.match(c.strip()) and not c.strip().startswith("python3 -m venv .venv/sam")
    ]
    assert len(lines) >= 3, lines
    for line in lines:
        assert ".venv/bin/pip install -c layers/threads_aws/constraints.txt -e clients/python -e '.[" in line
    ci = (REPO / ".ci" / "run").read_text()
    assert "pip install --quiet -c layers/threads_aws/constraints.txt -e clients/python -e '.[dev]'" in ci


@pytest.mark.parametrize("section", [p or "threads-aws" for p in RUN])
def test_the_readme_blocks_of(section: str, workdir: Path) -> None:
    mine = [b for b in owned_blocks() if b.section.startswith(section) or b.section == section]
    assert mine, section
    for block in mine:
        if block.lang == "python":
            run_python(workdir, block)
            continue
        if block.lang not in ("sh", "bash", "shell"):
            continue
        if not block.text.strip() or block.text.lstrip().startswith(("POST ", "GET ", "{")):
            continue  # an HTTP synopsis or a JSON example, not commands
        for cmd, code, output in run_shell(workdir, block):
            where = f"README line {block.line}, `{cmd.strip()}`"
            want = expected(EXIT, block.section, cmd, 0)
            assert code == want, f"{where}: exit {code}, expected {want}:\n{output[-3000:]}"
            for needle in expected(OUTPUT, block.section, cmd, []):  # type: ignore[union-attr]
                assert needle in output, f"{where}: {needle!r} not in:\n{output[-3000:]}"
            browse = BROWSE.match(cmd.strip())
            if browse:
                with urllib.request.urlopen(browse[1], timeout=60) as r:
                    assert r.status == 200 and r.headers["Content-Type"].startswith("text/html")


def run_python(work: Path, block: Block) -> None:
    out = subprocess.run(
        [str(work / ".venv" / "bin" / "python"), "-c", block.text],
        cwd=work,
        env=clean_env(work),
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT,
    )
    assert out.returncode == 0, f"README line {block.line} (python):\n{out.stdout}\n{out.stderr}"


def test_not_run_sections_are_named_with_a_reason():
    assert all(reason for reason in NOT_RUN.values())
    assert not set(NOT_RUN) & {p for p in RUN if p}
    json.dumps(NOT_RUN)  # plain data: the reasons are the documentation
