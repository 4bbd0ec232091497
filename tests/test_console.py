"""The web console (GET /console) in a real browser: Debian's Chromium, headless, driven by
Playwright's Python package pointed at the system browser (no browser download). Against the
shared `threads-aws dev` (tests/helpers/people_dev.py): sign in with a dev key, start a demo
`note:` run, approve it in the page, see the result; answer a question; screenshots at a desktop
and a phone width are kept under artifacts/console/ (or $THREADS_ARTIFACTS)."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.people_dev import people_dev, release

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = Path(os.environ.get("THREADS_ARTIFACTS", REPO / "artifacts")) / "console"
KEY = "dev:api:local:alice"
WIDTHS = {"desktop": (1280, 900), "phone": (390, 844)}

# In CI (.ci/run installs chromium) a missing browser fails the tests instead of skipping them.
pytestmark = pytest.mark.skipif(
    not os.environ.get("CI") and (CHROMIUM is None or importlib.util.find_spec("playwright") is None),
    reason="needs Debian's chromium (apt-get install chromium) and playwright (the dev extra)",
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        assert CHROMIUM is not None, "no chromium on PATH (apt-get install chromium)"
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    pg.set_default_timeout(30_000)
    yield pg
    ctx.close()
    # no script error and no CSP violation (Chromium reports those on the console)
    assert not [e for e in errors if "Failed to load resource" not in e], errors


def expect(locator: Any) -> Any:
    from playwright.sync_api import expect as pw_expect

    pw_expect.set_options(timeout=30_000)  # two cores shared with the rest of the suite
    return pw_expect(locator)


def sign_in(page: Any) -> None:
    page.goto(people_dev().url + "/console")
    page.get_by_label("API key").fill(KEY)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("heading", name="Threads", exact=True).wait_for()


def start(page: Any, prompt: str) -> None:
    page.get_by_label("Prompt").fill(prompt)
    page.get_by_role("button", name="Start").click()


def shoot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for label, (w, h) in WIDTHS.items():
        page.set_viewport_size({"width": w, "height": h})
        page.wait_for_timeout(100)
        path = ARTIFACTS / f"{name}-{label}.png"
        page.screenshot(path=str(path), full_page=True)
        assert path.stat().st_size > 5_000  # a picture, not a blank
        # nothing wider than the screen: the page reflows at a phone's width
        assert page.evaluate("document.documentElement.scrollWidth") <= w
    page.set_viewport_size({"width": 1280, "height": 900})


def test_sign_in_start_a_note_run_approve_it_and_see_the_result(page: Any):
    sign_in(page)
    tag = uuid.uuid4().hex[:8]
    start(page, f"note: console {tag}")
    waiting = page.get_by_role("region", name="Waiting for you")
    approve = waiting.get_by_role("button", name="Approve")
    approve.wait_for()
    live = page.get_by_role("region", name="Live run")
    expect(live.get_by_role("list", name="Tools")).to_contain_text("note")
    expect(live.get_by_role("status")).to_contain_text("waiting")
    shoot(page, "approval")
    approve.click()
    page.get_by_text("finished: idle").wait_for()
    expect(live).to_contain_text("Done: stored note")  # the demo model's reply after the tool
    # every craze event rendered: a text event without text (a commit marker) adds nothing
    expect(live).not_to_contain_text("undefined")
    expect(live).not_to_contain_text("[object Object]")
    expect(waiting).to_be_hidden()
    shoot(page, "finished")
    # the thread is in the list, newest first, with its title and status
    page.get_by_role("link", name="Threads").first.click()
    first = page.get_by_role("list", name="Threads, newest first").get_by_role("listitem").first
    expect(first).to_contain_text(f"note: console {tag}")
    expect(first).to_contain_text("idle")
    shoot(page, "threads")


def test_a_question_answered_in_the_page_and_keyboard_only_sign_in(page: Any):
    page.goto(people_dev().url + "/console")
    page.get_by_label("API key").focus()
    page.keyboard.type(KEY)
    page.keyboard.press("Enter")  # the form submits from the keyboard
    page.get_by_role("heading", name="Threads", exact=True).wait_for()
    start(page, "ask: tea or coffee?")
    answer = page.get_by_role("textbox", name="tea or coffee?")
    answer.wait_for()
    answer.fill("tea, please")
    page.get_by_role("button", name="Answer").click()
    page.get_by_text("finished: idle").wait_for()
    expect(page.get_by_role("list", name="Timeline")).to_contain_text("tea, please")
    live = page.get_by_role("region", name="Live run")
    expect(live.locator(".reply").last).not_to_be_empty()  # the reply after the answer
    expect(live).not_to_contain_text("undefined")  # was "…tea, pleaseundefined" (a commit marker)
    expect(live).not_to_contain_text("[object Object]")


def test_deny_and_cancel_from_the_page(page: Any):
    sign_in(page)
    start(page, "note: not this one")
    page.get_by_role("button", name="Deny").click()
    page.get_by_text("finished: idle").wait_for()
    expect(page.get_by_role("list", name="Timeline")).to_contain_text("approval_denied")


def test_the_page_and_assets_are_served_and_nothing_else():
    import httpx

    url = people_dev().url
    page = httpx.get(url + "/console")
    assert page.status_code == 200 and "script-src 'self'" in page.headers["content-security-policy"]
    for name, kind in (("console.js", "javascript"), ("console.css", "text/css")):
        r = httpx.get(f"{url}/console/{name}")
        assert r.status_code == 200 and kind in r.headers["content-type"]
    missing = httpx.get(url + "/console/app.py")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"


def test_fork_from_a_fork_point_opens_the_new_branch(page: Any):
    sign_in(page)
    start(page, "write notes.txt: from the console")
    approve = page.get_by_role("button", name="Approve")
    finished = page.get_by_text("finished: idle")
    expect(approve.or_(finished)).to_be_visible()
    if approve.is_visible():
        approve.click()
    finished.wait_for()
    fork = page.get_by_role("button", name=re.compile(r"^Fork at \d+$")).last
    fork.click()  # the snapshot at the turn's end is a fork point
    expect(page).to_have_url(re.compile(r"#/t/[^/]+/b/[^/]+$"))
    branches = page.get_by_role("navigation", name="Branches")
    expect(branches.get_by_role("link")).to_have_count(2)
    expect(branches.locator("[aria-current=page]")).to_contain_text("fork at")


def test_cancel_a_working_run_from_the_page(page: Any):
    sign_in(page)
    start(page, "[hold] take your time")
    cancel = page.get_by_role("button", name="Cancel run")
    cancel.wait_for()
    branch = re.search(r"/b/([^/]+)/r/", page.url)
    assert branch
    cancel.click()
    # The cancel must land while the run works: a cancel after the run ended is a no-op answer.
    expect(page.get_by_text("Cancel requested.")).to_be_visible()
    release(branch.group(1))  # the demo model answers; the worker then finds the cancel
    expect(page.get_by_text(re.compile(r"^finished: "))).to_be_visible(timeout=30_000)
    expect(page.get_by_role("list", name="Timeline")).to_contain_text("cancelled")


# One event of every craze kind, in the shapes the host emits (zero values omitted: a `text`
# without `text` is a response's commit marker after its deltas), each checked against the seed
# schema before the page renders it.
AT = "2026-01-01T00:00:00Z"
EVERY_KIND: list[dict[str, Any]] = [
    {"type": "replay", "replay": {"phase": "start"}},
    {"type": "user", "text": "an earlier prompt", "replayed": True, "at": AT},
    {"type": "text", "text": "an earlier reply", "replayed": True, "at": AT},
    {
        "type": "meta",
        "state": {
            "usage": {
                "contextTokens": 0,
                "contextWindow": 0,
                "turn": {
                    "input": 1,
                    "output": 2,
                    "reasoning": 0,
                    "cacheRead": 0,
                    "cacheCreation": 0,
                    "costPicoUsd": 0,
                    "unpriced": True,
                },
                "session": {
                    "input": 3,
                    "output": 4,
                    "reasoning": 0,
                    "cacheRead": 0,
                    "cacheCreation": 0,
                    "costPicoUsd": 0,
                    "unpriced": True,
                },
            }
        },
    },
    {"type": "replay", "replay": {"phase": "end"}},
    {
        "type": "turn",
        "turn": {"id": "turn-1", "phase": "started", "text": "go", "origin": "submit"},
        "at": AT,
    },
    {"type": "command", "command": {"pluginCommand": {"display": "/plan"}, "text": "make a plan"}},
    {"type": "thought", "text": "thinking it over", "at": AT},
    {"type": "text", "text": "Hello", "at": AT},
    {"type": "text", "at": AT},  # the commit marker: printed "undefined" before
    {"type": "todos", "todos": [{"id": "t1", "content": "wash", "status": "pending"}], "at": AT},
    {
        "type": "plan",
        "plan": {
            "id": "plan-5",
            "name": "Laundry",
            "plan": "- [ ] wash",
            "todos": [{"id": "t1", "content": "wash", "status": "pending"}],
        },
        "at": AT,
    },
    {
        "type": "ask",
        "ask": {"id": "plan-5", "kind": "plan", "outcome": "answered", "by": "client", "accepted": True},
        "at": AT,
    },
    {"type": "tool", "tool": {"id": "c1", "name": "note", "status": "pending", "toolName": "note"}, "at": AT},
    {
        "type": "permission",
        "permission": {
            "id": "ch1",
            "tool": "note: x",
            "options": [{"optionId": "grant", "name": "Allow", "kind": "allow_once"}],
        },
        "at": AT,
    },
    {
        "type": "ask",
        "ask": {
            "id": "ch1",
            "kind": "permission",
            "outcome": "answered",
            "by": "client",
            "optionId": "grant",
            "label": "Allow",
        },
        "at": AT,
    },
    {"type": "question", "question": {"id": "q", "questions": [{"id": "q1", "prompt": "why?"}]}, "at": AT},
    {
        "type": "ask",
        "ask": {
            "id": "q",
            "kind": "question",
            "outcome": "answered",
            "by": "client",
            "answers": {"q1": ["because"]},
        },
        "at": AT,
    },
    {"type": "user", "text": "be quick", "interjection": True, "at": AT},
    {
        "type": "subagent",
        "subagent": {"id": "kid", "toolCallId": "c2", "subagentType": "demo", "status": "running"},
        "subagentChange": "spawned",
        "at": AT,
    },
    {"type": "user", "text": "the child's task", "agent": "kid", "at": AT},
    {"type": "text", "text": "the child's own reply", "agent": "kid", "at": AT},
    {"type": "compaction", "compaction": {"phase": "started", "reason": "auto"}, "at": AT},
    {"type": "compaction", "compaction": {"phase": "ended", "reason": "auto"}, "at": AT},
    {"type": "queue", "queue": {"id": "q1", "text": "later"}, "queueChange": "queued", "at": AT},
    {"type": "foreign_turn", "foreignTurn": {"id": "f1", "text": "a wake", "running": True}, "at": AT},
    {"type": "foreign_turn", "foreignTurn": {"id": "f1"}, "at": AT},
    {"type": "meta", "state": {"reason": "retry_wait", "detail": "retrying at noon"}},
    {"type": "meta", "mode": "default", "state": {"mode": "default"}, "at": AT},
    {"type": "error", "err": {"message": "the model failed", "class": "provider", "code": 529}, "at": AT},
    {"type": "done", "stopReason": "end_turn", "at": AT},
    {"type": "turn", "turn": {"id": "turn-1", "phase": "ended", "stopReason": "end_turn"}, "at": AT},
]


def test_every_craze_kind_renders_without_undefined(page: Any):
    from helpers.streams import craze_validator

    v = craze_validator()
    kinds = {d["type"] for d in EVERY_KIND}
    assert kinds == set(v.schema["properties"]["type"]["enum"])  # every kind the schema has
    for d in EVERY_KIND:
        assert not [e.message for e in v.iter_errors(d)], d
    sign_in(page)
    text = page.evaluate(
        """(events) => {
            const live = document.createElement("section");
            document.body.append(live);
            const view = runView(live);
            for (const ev of events) applyCraze(view, ev);
            return live.textContent;
        }""",
        EVERY_KIND,
    )
    assert "undefined" not in text and "[object Object]" not in text and "null" not in text
    for shown in (
        "an earlier reply",
        "Hello",
        "thinking it over",
        "Laundry",
        "Plan accepted.",
        "be quick",
        "the child's task",
        "Context compacted.",
        "later",
        "a wake",
        "error: the model failed",
        "session: 3 tokens in, 4 out",
        "/plan make a plan",
    ):
        assert shown in text, shown
    assert "the child's own reply" not in text  # a sub-agent's transcript is its own
    assert "Hellothe" not in text and "Helloundefined" not in text
