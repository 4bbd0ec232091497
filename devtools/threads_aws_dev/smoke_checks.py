"""The checks of `threads-aws smoke` (smoke.py runs them), in the order a user meets the routes:
the served contract, the key, a run streamed to its approval, the grant, a question answered,
the thread list, the timeline paged, a fork at a snapshot, a steer, a cancel, forged webhooks.

Each check returns its detail line or raises `Failure` (what went wrong, in the user's terms) or
`Skip`; any other exception is explained by `smoke.explain`. `ctx.at(...)` names the stage a
check is in, which is what its line says when the ceiling passes. Runs use the demo model's
commands (README "Try it"): `note:` parks on an approval, `ask:` on a question, `write`/`read`
use the workspace.
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from .smoke import Check, Ctx, Failure, Skip

# What a run outcome most likely means on a fresh stack (RunErrorCode → hint).
RUN_ERROR_HINTS = {
    "model_unavailable": "the agent's model provider could not be used: its API key or secret is "
    "missing or wrong (AnthropicApiKeySecret / OpenAIApiKeySecret), or Bedrock is not allowed "
    "(BedrockModelArns); see README 'Use a real model' (the demo agent needs none)",
}
WALKTHROUGH_OPS = (
    "startRun",
    "subscribeRun",
    "listApprovals",
    "decideApproval",
    "answerQuestion",
    "listThreads",
    "getTimeline",
    "listForkPoints",
    "fork",
    "steer",
    "cancel",
)


# ------------------------------------------------------------------ helpers
def follow(
    ctx: Ctx, thread_id: str, run_id: str, after_seq: int = 0, *, through_parks: bool = False
) -> tuple[dict[str, Any], list[str], int]:
    """Follow the run's SSE stream to its result: (outcome, event types seen, cursor)."""
    types: list[str] = []
    stream = ctx.client.stream(thread_id, run_id, after_seq=after_seq, through_parks=through_parks)
    where = f"waiting on the run's event stream (GET …/runs/{run_id}/events)"
    ctx.at(where + ": no event yet")
    for msg in stream:
        if msg["kind"] == "event":
            ev = msg["event"]
            types.append(ev["type"])
            ctx.at(f"{where}: last event {ev['type']} (seq {ev['seq']}){_stall_hint(ev['type'])}")
    assert stream.result is not None
    return dict(stream.result), types, stream.cursor


def _stall_hint(last: str) -> str:
    if last in ("user_input", "steer", "approval_granted", "input_answered"):
        return " — the run-step worker has not picked it up: see RunStepFunction's logs and RunStepDLQ"
    if last == "model_request":
        return " — the model has not answered: see the worker's logs (provider reachable? its key?)"
    return ""


def expect(outcome: dict[str, Any], status: str, reason: str | None = None) -> None:
    got = outcome.get("status")
    if got == status and (reason is None or outcome.get("reason") == reason):
        return
    if got == "failed":
        err = outcome.get("error") or {}
        code = err.get("code", "?")
        hint = RUN_ERROR_HINTS.get(code, "")
        raise Failure(f"the run failed: {code}: {err.get('message', '')}" + (f" — {hint}" if hint else ""))
    want = status + (f" ({reason})" if reason else "")
    have = str(got) + (f" ({outcome['reason']})" if outcome.get("reason") else "")
    raise Failure(f"the run ended {have}, expected {want}")


def start(ctx: Ctx, text: str, **kw: Any) -> dict[str, Any]:
    ctx.at(f"starting a run (POST /v1/runs, agent {ctx.target.agent})")
    return dict(ctx.client.start_run(ctx.target.agent, text, **kw))


def parked_note(ctx: Ctx, label: str) -> tuple[dict[str, Any], int]:
    """A run of `note: …` followed to its park on the approval: (receipt, cursor)."""
    receipt = start(ctx, f"note: smoke {label} {ctx.nonce}")
    outcome, _, cursor = follow(ctx, receipt["thread_id"], receipt["run_id"])
    expect(outcome, "parked", "awaiting_approval")
    return receipt, cursor


def _pages(ctx: Ctx, path: str, params: dict[str, Any], most: int = 1000) -> list[httpx.Response]:
    """The pages of a paged GET (`most` at most), following `Link: rel="next"` (relative to
    the request URL)."""
    http: httpx.Client = ctx.client.http
    url: httpx.URL | None = http.build_request("GET", path, params=params).url
    pages: list[httpx.Response] = []
    while url is not None and len(pages) < most:
        ctx.at(f"reading page {len(pages) + 1} (GET {url.path})")
        resp = http.get(url)
        if resp.status_code != 200:
            from threads_aws_client.errors import make_error

            try:
                err = resp.json()["error"]
            except (ValueError, KeyError, TypeError):
                raise Failure(f"GET {url.path}: HTTP {resp.status_code}: {resp.text[:200]}") from None
            raise make_error(err["code"], err["message"], resp.status_code, None)
        pages.append(resp)
        nxt = resp.links.get("next", {}).get("url")
        url = url.join(nxt) if nxt else None
    return pages


# ------------------------------------------------------------------ the checks
def check_openapi(ctx: Ctx) -> str:
    ctx.at("reading the served contract (GET /openapi.json, public)")
    doc = ctx.client.openapi()
    ops = {
        op.get("operationId")
        for item in doc.get("paths", {}).values()
        if isinstance(item, dict)
        for op in item.values()
        if isinstance(op, dict)
    }
    missing = [op for op in WALKTHROUGH_OPS if op not in ops]
    if missing:
        raise Failure(f"the served contract lacks {', '.join(missing)}: not this host's API?")
    return f"{len(ops)} operations, version {doc.get('info', {}).get('version', '?')}"


def check_auth(ctx: Ctx) -> str:
    ctx.at("calling an authenticated route with the key (GET /v1/threads?limit=1)")
    ctx.client.threads(limit=1)
    return "the authorizer accepts the key"


def check_start(ctx: Ctx) -> str:
    receipt = start(ctx, f"note: smoke {ctx.nonce}")
    ctx.kept["approval_run"] = receipt
    return f"202, thread {receipt['thread_id']} run {receipt['run_id']}"


def check_stream(ctx: Ctx) -> str:
    receipt = ctx.kept["approval_run"]
    outcome, types, cursor = follow(ctx, receipt["thread_id"], receipt["run_id"])
    expect(outcome, "parked", "awaiting_approval")
    if "approval_requested" not in types:
        raise Failure(f"parked without an approval_requested event on the stream: {types}")
    ctx.kept["approval_cursor"] = cursor
    return f"{len(types)} events over SSE, parked awaiting_approval"


def check_approval(ctx: Ctx) -> str:
    receipt = ctx.kept["approval_run"]
    thread = receipt["thread_id"]
    ctx.at("listing the open approvals (GET …/approvals)")
    pending = ctx.client.approvals(thread)
    if len(pending) != 1 or pending[0].get("tool") != "note":
        raise Failure(f"expected one open approval of the note tool, got {pending}")
    ctx.at("granting it (POST …/approvals/{challenge_id})")
    ctx.client.approve(thread, pending[0]["challenge_id"])
    outcome, _, _ = follow(ctx, thread, receipt["run_id"], ctx.kept["approval_cursor"])
    expect(outcome, "completed")
    return f"granted; the run completed: {outcome.get('output')!r}"


def check_question(ctx: Ctx) -> str:
    receipt = start(ctx, "ask: tea or coffee?")
    thread = receipt["thread_id"]
    outcome, _, cursor = follow(ctx, thread, receipt["run_id"])
    expect(outcome, "parked", "awaiting_input")
    call_id = outcome["pending"][0]["id"]
    ctx.at(f"answering the question (POST …/questions/{call_id}/answer)")
    ctx.client.answer(thread, call_id, "tea")
    outcome, _, _ = follow(ctx, thread, receipt["run_id"], cursor)
    expect(outcome, "completed")
    if "tea" not in str(outcome.get("output")):
        raise Failure(f"the answer did not reach the model: output {outcome.get('output')!r}")
    ctx.kept["question_thread"] = thread
    return f"answered; the run completed: {outcome.get('output')!r}"


def check_threads(ctx: Ctx) -> str:
    mine = {ctx.kept["approval_run"]["thread_id"], ctx.kept["question_thread"]}
    pages = _pages(ctx, "/v1/threads", {"limit": 1}, most=3)  # a stack may hold many threads
    ids = [t["thread_id"] for page in pages for t in page.json()["threads"]]
    if len(pages) < 2:
        raise Failure("GET /v1/threads?limit=1 answered no Link rel=next with two threads or more")
    if len(ids) != len(set(ids)):
        raise Failure(f"a thread listed twice across pages: {ids}")
    ctx.at("reading the first page (GET /v1/threads)")
    listed = {t["thread_id"] for t in ctx.client.threads(limit=200)["threads"]}
    if not mine <= listed:
        raise Failure(f"the smoke's threads are not listed: {sorted(mine - listed)}")
    ctx.at("reading one thread (GET /v1/threads/{id})")
    detail = ctx.client.thread(ctx.kept["question_thread"])
    return f"both smoke threads listed; limit=1 pages by Link rel=next; status {detail['status']}"


def check_timeline(ctx: Ctx) -> str:
    thread = ctx.kept["approval_run"]["thread_id"]
    pages = _pages(ctx, f"/v1/threads/{thread}/timeline", {"limit": 4})
    seqs = [e["event"]["seq"] for page in pages for e in page.json()["entries"]]
    ctx.at("reading the whole timeline (GET …/timeline)")
    whole = [e["event"]["seq"] for e in ctx.client.timeline(thread)["entries"]]
    if len(pages) < 2:
        raise Failure(f"limit=4 over {len(whole)} entries answered one page (no Link rel=next)")
    if any(len(p.json()["entries"]) > 4 for p in pages):
        raise Failure("a page holds more entries than limit=4")
    if seqs != whole or seqs != list(range(seqs[0], seqs[0] + len(seqs))):
        raise Failure(f"the pages' seqs {seqs} differ from the whole timeline's {whole}")
    return f"{len(seqs)} entries in {len(pages)} pages of limit=4 (Link rel=next), none lost or repeated"


def check_fork(ctx: Ctx) -> str:
    receipt = start(ctx, f"write smoke.txt: original {ctx.nonce}")
    thread = receipt["thread_id"]
    outcome, _, _ = follow(ctx, thread, receipt["run_id"])
    expect(outcome, "completed")
    ctx.at("waiting for the turn's snapshot (GET …/fork-points): is the worker writing snapshots?")
    points: list[Any] = []
    while not points:
        points = [p for p in ctx.client.fork_points(thread) if p.get("snapshot")]
        if not points:
            time.sleep(0.25)
    point = points[-1]
    ctx.at(f"forking at the snapshot (POST …/forks, event {point['event_id']})")
    child = ctx.client.fork(thread, point["event_id"])
    ctx.at("reading the branches (GET …/branches)")
    branches = {b["branch_id"]: b for b in ctx.client.branches(thread)}
    info = branches.get(child["branch_id"])
    if info is None or info.get("parent_branch_id") != receipt["branch_id"]:
        raise Failure(f"the child branch is not listed under its parent: {list(branches.values())}")
    run = start(ctx, "read smoke.txt", thread_id=thread, branch_id=child["branch_id"])
    outcome, _, _ = follow(ctx, thread, run["run_id"])
    expect(outcome, "completed")
    if ctx.nonce not in str(outcome.get("output")):
        raise Failure(f"the child does not read the parent's file: output {outcome.get('output')!r}")
    return f"child branch at seq {point['seq']} reads the snapshot's file"


def check_steer(ctx: Ctx) -> str:
    receipt, cursor = parked_note(ctx, "steer")
    thread = receipt["thread_id"]
    text = f"smoke steer {ctx.nonce}"
    ctx.at("steering the open turn (POST …/steer)")
    ctx.client.steer(thread, text)
    outcome, types, cursor = follow(ctx, thread, receipt["run_id"], cursor)
    expect(outcome, "parked", "awaiting_approval")
    if "steer" not in types:
        raise Failure(f"no steer event on the run's stream after the steer: {types}")
    ctx.kept["parked_run"] = (receipt, cursor)
    return "the steer is in the open turn's log (the run still parked on its approval)"


def check_cancel(ctx: Ctx) -> str:
    receipt, cursor = ctx.kept.get("parked_run") or parked_note(ctx, "cancel")
    thread = receipt["thread_id"]
    ctx.at("cancelling the parked run (POST …/cancel)")
    ctx.client.cancel(thread)
    # Through parks: right after cancel_requested the run is still parked until the worker
    # settles the park and appends `cancelled`; a plain follow may end on that park.
    outcome, _, _ = follow(ctx, thread, receipt["run_id"], cursor, through_parks=True)
    expect(outcome, "cancelled")
    return "the run ended cancelled"


def _forged(ctx: Ctx, provider: str, url: str | None) -> str:
    if not url:
        raise Skip(
            f"the {provider} function URL is unknown: pass --{provider}-url or --stack NAME "
            f"(output {'Slack' if provider == 'slack' else 'WhatsApp'}WebhookUrl)"
        )
    now = str(int(time.time()))
    if provider == "slack":
        body = b'{"type":"event_callback","team_id":"TSMOKEFORGED","event":{"type":"message","text":"x"}}'
        headers = {"X-Slack-Request-Timestamp": now, "X-Slack-Signature": "v0=" + "0" * 64}
    else:
        body = (
            b'{"object":"whatsapp_business_account","entry":[{"id":"0","changes":[{"field":'
            b'"messages","value":{"metadata":{"phone_number_id":"0"}}}]}]}'
        )
        headers = {"X-Hub-Signature-256": "sha256=" + "0" * 64}
    ctx.at(f"posting a forged {provider} webhook (POST {url})")
    resp = httpx.post(url, content=body, headers={**headers, "Content-Type": "application/json"}, timeout=35)
    try:
        err = resp.json().get("error") or {}
    except ValueError:
        err = {}
    if resp.status_code == 401 and err.get("code") == "unverified":
        return "a bad signature is refused: 401 unverified"
    if resp.status_code == 404 and "no channel" in str(err.get("message")):
        raise Skip(f"no enabled {provider} installation in the channels file ({err.get('message')})")
    if resp.status_code == 403:
        raise Failure(
            "403 from Lambda: the function URL refuses every caller (its resource policy lacks the "
            "public lambda:InvokeFunctionUrl permission of AuthType NONE)"
        )
    raise Failure(f"expected 401 unverified, got HTTP {resp.status_code}: {resp.text[:200]}")


def check_slack(ctx: Ctx) -> str:
    return _forged(ctx, "slack", ctx.target.slack_url)


def check_whatsapp(ctx: Ctx) -> str:
    return _forged(ctx, "whatsapp", ctx.target.whatsapp_url)


CHECKS: list[Check] = [
    ("openapi", check_openapi, ()),
    ("auth", check_auth, ("openapi",)),
    ("start", check_start, ("auth",)),
    ("stream", check_stream, ("start",)),
    ("approval", check_approval, ("stream",)),
    ("question", check_question, ("auth",)),
    ("threads", check_threads, ("approval", "question")),
    ("timeline", check_timeline, ("approval",)),
    ("fork", check_fork, ("auth",)),
    ("steer", check_steer, ("auth",)),
    ("cancel", check_cancel, ("auth",)),
    ("webhook-slack", check_slack, ()),
    ("webhook-whatsapp", check_whatsapp, ()),
]
