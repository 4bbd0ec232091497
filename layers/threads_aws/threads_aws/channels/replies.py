"""Reply ops: the pure, deterministic pieces a derived ``channel_send`` call carries.

The log derives replies (semantics.md §5): the last response of each ``end_turn`` turn, each
open ``approval_requested`` and each ``park_escalated`` (its notice, `escalation_op`); op ``i``
of a source becomes call ``send_<source seq>_<i>``. So the split of a long text into ops must
depend on the text and provider alone: ``reply_ops`` is a pure function, and a recomputation
after a crash yields the same ops and the same call ids.

Op shapes (JSON, they go into the call's input):
- ``{"kind": "text", "text": str}``
- ``{"kind": "approval", "challenge_id": str, "text": str}``: the prompt with grant/deny buttons.

Button wire ids are ours and fixed here, parsed back by the webhook adapters: Slack action ids
``threads_grant``/``threads_deny`` with the challenge id as the button ``value``; WhatsApp reply
ids ``threads:grant:<challenge_id>`` / ``threads:deny:<challenge_id>``.
"""

from __future__ import annotations

from typing import Any

from .model import Decision

# Slack truncates text past 40,000 chars and recommends < 4,000; WhatsApp text.body max 4,096.
TEXT_LIMIT = {"slack": 3_900, "whatsapp": 4_096}
# WhatsApp interactive body max 1,024; a Slack section text max 3,000.
PROMPT_LIMIT = {"slack": 3_000, "whatsapp": 1_024}

SLACK_GRANT = "threads_grant"
SLACK_DENY = "threads_deny"
SLACK_ACTIONS_BLOCK = "threads_approval"
WA_PREFIX = "threads:"
# Message metadata that marks our sends so a begun send can be looked up (Slack).
SLACK_METADATA_EVENT = "threads_channel_send"


def split_text(text: str, limit: int) -> list[str]:
    """Cut ``text`` into chunks of at most ``limit`` characters, preferring a paragraph break,
    then a line break, then a space in the second half of the window; never an empty chunk."""
    if limit < 2:
        raise ValueError("limit too small")
    out: list[str] = []
    rest = text
    while len(rest) > limit:
        window = rest[:limit]
        cut = -1
        for sep in ("\n\n", "\n", " "):
            at = window.rfind(sep)
            if at >= limit // 2:
                cut = at + len(sep)
                break
        if cut <= 0:
            cut = limit
        out.append(rest[:cut])
        rest = rest[cut:]
    if rest or not out:
        out.append(rest)
    return out


def reply_ops(provider: str, text: str) -> list[dict[str, Any]]:
    """The text ops of one reply, in send order."""
    return [{"kind": "text", "text": chunk} for chunk in split_text(text, TEXT_LIMIT[provider])]


def approval_op(provider: str, challenge_id: str, tool: str, preview: str = "") -> dict[str, Any]:
    """The approval prompt for one open ``approval_requested``: tool name and an input preview,
    cut to the provider's prompt limit."""
    text = f"Approval needed: {tool}"
    if preview:
        text += f"\n{preview}"
    limit = PROMPT_LIMIT[provider]
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return {"kind": "approval", "challenge_id": challenge_id, "text": text}


def escalation_op(provider: str, kind: str, tool: str, question: str = "") -> dict[str, Any]:
    """The notice of a ``park_escalated`` (its park's TTL passed): an approval that now counts as
    a denial if decided, or a question still waiting for its answer."""
    if kind == "approval":
        text = f"Approval for {tool} expired unanswered: a decision now counts as a denial."
    else:
        text = "Still waiting for your answer" + (f": {question}" if question else ".")
    limit = TEXT_LIMIT[provider]
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return {"kind": "text", "text": text}


def whatsapp_button_id(decision: str, challenge_id: str) -> str:
    return f"{WA_PREFIX}{decision}:{challenge_id}"


def parse_whatsapp_button_id(button_id: str) -> Decision | None:
    """Our reply-button id back to a decision; anything else (another bot's buttons, a template
    quick reply) is not a decision."""
    if not button_id.startswith(WA_PREFIX):
        return None
    decision, sep, challenge_id = button_id[len(WA_PREFIX) :].partition(":")
    if not sep or not challenge_id or decision not in ("grant", "deny"):
        return None
    return Decision(challenge_id=challenge_id, decision=decision)  # type: ignore[arg-type]


def parse_slack_action(action_id: str | None, value: str | None) -> Decision | None:
    if not value:
        return None
    if action_id == SLACK_GRANT:
        return Decision(challenge_id=value, decision="grant")
    if action_id == SLACK_DENY:
        return Decision(challenge_id=value, decision="deny")
    return None


def slack_conversation(channel: str, thread_ts: str | None) -> str:
    """The Slack conversation address: the channel id, plus ``:<thread_ts>`` for a thread."""
    return f"{channel}:{thread_ts}" if thread_ts else channel


def split_slack_conversation(conversation: str) -> tuple[str, str | None]:
    channel, _, thread_ts = conversation.partition(":")
    return channel, thread_ts or None
