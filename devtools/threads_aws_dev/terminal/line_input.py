"""One line from the person at the terminal, with Ctrl-C never lost.

`input()` blocks in read(2) with the GIL released. A SIGINT delivered after the prompt is
written but before that read starts only sets Python's pending flag: it interrupts no system
call, so KeyboardInterrupt waits for the next line the person types, and a Ctrl-C pressed as the
prompt appears seems to do nothing (seen in CI, where the test presses it at once). Waiting in
select(2) with a short timeout comes back to the interpreter, which raises the pending
KeyboardInterrupt within that timeout.
"""

from __future__ import annotations

import os
import select
import sys

from rich.console import Console

POLL_S = 0.1


def read_line(console: Console, prompt: str) -> str:
    """`console.input(prompt)`; EOFError on Ctrl-D, KeyboardInterrupt on Ctrl-C."""
    stdin = sys.stdin
    if stdin is None or not stdin.isatty():
        return console.input(prompt)
    console.print(prompt, end="")
    fd = stdin.fileno()
    while not select.select([fd], [], [], POLL_S)[0]:
        pass
    # A terminal in canonical mode hands over one line per read, so nothing is left in a Python
    # buffer that select would not see on the next prompt.
    raw = os.read(fd, 65536)
    if not raw:
        raise EOFError
    return raw.decode(stdin.encoding or "utf-8", errors="replace").rstrip("\r\n")
