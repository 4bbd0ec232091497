"""Shared helpers of the host tests: a Host on the moto `aws` fixture, principals, and the
worker's events appended by hand (so parked states don't depend on the engine)."""

from __future__ import annotations

from typing import Any

from threads_aws.core.canonical import canonical_hash, new_uuid7
from threads_aws.host.principal import Principal
from threads_aws.host.service import Host
from threads_aws.store.approvals import ApprovalRow
from threads_aws.writer import Draft

ALICE = Principal("api", "acme", "alice")
BOB = Principal("api", "acme", "bob")
MALLORY = Principal("api", "evil", "mallory")
HOST_ACTOR = {"kind": "host"}
SHA = "0" * 64


def make_host(aws: Any) -> Host:
    host: Host = aws.services().host()
    return host


def start(
    host: Host, who: Principal = ALICE, text: str = "hello", key: str | None = None, **body: Any
) -> dict:
    return host.start_run(who, {"agent": "scripted", "input": text, **body}, key or new_uuid7())


def append(host: Host, branch_id: str, *drafts: tuple[str, dict[str, Any]]) -> list[Any]:
    _, lines = host.writer.append(branch_id, [Draft(t, d, HOST_ACTOR) for t, d in drafts])
    return lines


def tool_turn(
    host: Host, branch_id: str, call_id: str, name: str, input: dict[str, Any], decision: str
) -> None:
    """model_request → model_response(tool_use) → tool_call → permission_decision."""
    (req,) = append(
        host,
        branch_id,
        (
            "model_request",
            {
                "attempt": 1,
                "request_ref": {"bytes": 10, "media_type": "application/x-ndjson", "sha256": SHA},
                "declared_prefix": {"bytes": 5, "sha256": SHA},
            },
        ),
    )
    append(
        host,
        branch_id,
        (
            "model_response",
            {
                "request_event_id": req.event_id,
                "content": [{"type": "tool_use", "call_id": call_id, "name": name, "input": input}],
                "stop_reason": "tool_use",
                "usage": {"input_tokens": 10, "output_tokens": 5},
                "completeness": "complete",
            },
        ),
        ("tool_call", {"call_id": call_id, "name": name, "input": input, "request_event_id": req.event_id}),
        ("permission_decision", {"call_id": call_id, "decision": decision, "source": "policy"}),
    )


def park_on_approval(
    host: Host,
    run: dict,
    *,
    call_id: str = "call_1",
    expires_in: int = 60_000,
    rules: list[str] | None = None,
) -> str:
    """The worker's approval park: ask → approval_requested + parked + the approvals row."""
    bid = run["branch_id"]
    inp = {"text": "remember me"}
    tool_turn(host, bid, call_id, "note", inp, "ask")
    cid = new_uuid7()
    expires = host.clock() + expires_in
    row = ApprovalRow(
        challenge_id=cid,
        tenant="acme",
        thread_id=run["thread_id"],
        branch_id=bid,
        call_id=call_id,
        args_hash=canonical_hash(inp),
        expires_at=expires,
        tool="note",
        input=inp,
        suggested_rules=rules if rules is not None else ["note"],
        created_at=host.clock(),
    )
    requested = {
        "challenge_id": cid,
        "call_id": call_id,
        "args_hash": canonical_hash(inp),
        "expires_at": expires,
    }
    park = {"address": {"kind": "approval", "id": cid}, "reason": "awaiting_approval"}
    host.writer.append(
        bid,
        [Draft("approval_requested", requested, HOST_ACTOR), Draft("parked", park, HOST_ACTOR)],
        companions=lambda _view, _lines: [host.stores.approvals.open(row)],
    )
    return cid


def park_on_question(
    host: Host, run: dict, *, call_id: str = "q_1", options: list[str] | None = None, multi: bool = False
) -> None:
    inp: dict[str, Any] = {"question": "Which color?"}
    if options is not None:
        inp["options"] = options
    if multi:
        inp["multi_select"] = True
    bid = run["branch_id"]
    tool_turn(host, bid, call_id, "ask_user", inp, "allow")
    append(
        host,
        bid,
        (
            "parked",
            {
                "address": {"kind": "input", "id": call_id},
                "reason": "awaiting_input",
                "expires_at": host.clock() + 60_000,
            },
        ),
    )


def park_on_effect(host: Host, run: dict, *, call_id: str = "e_1") -> str:
    bid = run["branch_id"]
    tool_turn(host, bid, call_id, "note", {"text": "x"}, "allow")
    key = f"{bid}:{call_id}"
    append(
        host,
        bid,
        ("effect_begin", {"call_id": call_id, "attempt": 1}),
        ("effect_unknown", {"call_id": call_id, "reason": "timeout"}),
        ("parked", {"address": {"kind": "effect", "id": key}, "reason": "effect_unknown"}),
    )
    return key


def types(host: Host, branch_id: str) -> list[str]:
    return [e["type"] for e in host.writer.load(branch_id).fold.events]
