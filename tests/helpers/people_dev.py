"""One `threads-aws dev` subprocess shared by the client, CLI and /docs tests (started on first
use, stopped at exit): starting one takes seconds, and the three only create their own threads.

Its preload makes the run subscription's windows short (SSE_WAIT_MS 300 ms, retry 150 ms; the
live stream's connections end after STREAM_MAX_MS, 1 s, its least), so a run of a few seconds
spans several connections and every follower must resume with Last-Event-ID;
the demo model holds a request whose text contains `[hold]` until the test calls
`release(branch_id)` (or 15 s pass), so a run is reliably still working while a test acts; and
`pick: <question> | a, b` (`picks:` for several) asks a question with options.
"""

from __future__ import annotations

import atexit
import tempfile
from contextlib import ExitStack
from pathlib import Path

from helpers.dev_process import DevProcess, dev_process

WAIT_MS, RETRY_MS, STREAM_MAX_MS = 300, 150, 1000
PRELOAD = f"""\
import os, time
from pathlib import Path

from threads_aws.engine import demo_model, models

# Read by host/sse.py Window.from_env on every subscription (after the template's values).
os.environ["SSE_WAIT_MS"] = "{WAIT_MS}"
os.environ["SSE_POLL_MS"] = "50"
os.environ["SSE_RETRY_MS"] = "{RETRY_MS}"
# Read by host/live.py LiveSettings.from_env (the streaming integration, the template's default).
os.environ["STREAM_MAX_MS"] = "{STREAM_MAX_MS}"
os.environ["STREAM_POLL_MS"] = "50"
os.environ["STREAM_RETRY_MS"] = "{RETRY_MS}"
HOOK_DIR = Path(__file__).parent


class HoldingDemo(demo_model.DemoModel):
    def complete(self, request, *, settings, request_event_id, branch_id, **kw):
        text = request.decode()
        if "[hold]" in text and '"role":"tool"' not in text:
            release = HOOK_DIR / f"release-{{branch_id}}"
            deadline = time.monotonic() + 15
            while not release.exists() and time.monotonic() < deadline:
                time.sleep(0.02)
        return super().complete(
            request, settings=settings, request_event_id=request_event_id, branch_id=branch_id
        )

    @staticmethod
    def _tool_use(text):
        # `pick: <question> | a, b` asks with options; `picks:` lets several be chosen.
        head, sep, rest = text.partition(":")
        if sep and head.strip() in ("pick", "picks") and "|" in rest:
            question, _, options = rest.partition("|")
            args = {{"question": question.strip(), "options": [o.strip() for o in options.split(",")]}}
            if head.strip() == "picks":
                args["multi_select"] = True
            return "ask_user", args
        return demo_model.DemoModel._tool_use(text)


models.register_adapter("demo", HoldingDemo)
"""

_dev: DevProcess | None = None
_dir: Path | None = None
_stack = ExitStack()


def people_dev() -> DevProcess:
    global _dev, _dir
    if _dev is None:
        tmp = _dir = Path(tempfile.mkdtemp(prefix="threads-people-"))
        preload = tmp / "preload.py"
        preload.write_text(PRELOAD)
        _dev = _stack.enter_context(dev_process(tmp, args=["--preload", str(preload)]))
        atexit.register(_stack.close)
    return _dev


def release(branch_id: str) -> None:
    """Let the demo model answer a held (`[hold]`) request on this branch."""
    assert _dir is not None
    (_dir / f"release-{branch_id}").write_text("go")
