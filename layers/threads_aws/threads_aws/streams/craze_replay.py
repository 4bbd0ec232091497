"""The replay bracket of a craze stream (craze-mapping.md §1 `replay`): a run that continues a
thread is a resumed session, and a client that connects to its stream with nothing of the run
seen (no cursor, or one before the run) has not got the session's history. Like craze's
provider `session/load`, the stream then opens with that history replayed: `replay{start}`,
the earlier turns as the session's own events with `replayed: true`, the install delta (the
usage the load restores), `replay{end}`; then the run's events as ever.

What a replay carries, as craze's has it: each earlier prompt as `user{replayed}` (a replayed
prompt is a `user` line, not a `turn`), the replies' `text` / `thought`, tool rows, todo lists,
sub-agent rows and the child's prompts, and only the `ended` half of each compaction; nothing
engine- or registry-authored (turns, asks and their endings, `done` / `error`, state deltas),
because those belonged to turns that are over. The install delta carries `usage` (the last
replayed turn's spend and the session's) and the mode when the history showed it.

A protocol cursor resume is not a replay (the mapping's rule): a client whose cursor is inside
the run already had the bracket, and gets only what follows its cursor. The bracket's events
carry no SSE id (they are no log event's group); a resume never repeats them. Bounded: at most
REPLAY_TURNS earlier turns (the most recent), so a long thread's reconnect stays small.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from . import craze_wire as w
from .craze_wire import craze_event
from .frames import JsonObj

REPLAY_TURNS = 20
SESSION_KINDS = frozenset({"text", "thought", "tool", "todos", "user", "subagent", "compaction"})


def history_window(inputs: Sequence[int], start: int) -> int:
    """The seq the replay of a run starting at `start` begins at (0: nothing to replay), from the
    fold's user_input seqs: the last REPLAY_TURNS inputs before the run."""
    earlier = [s for s in inputs if s < start]
    return earlier[-REPLAY_TURNS:][0] if earlier else 0


def replay(history: Iterable[Mapping[str, Any]], session_before: Sequence[int]) -> list[JsonObj]:
    """The bracket for `history` (the thread's known events before the run, from a user_input
    on, oldest first); [] when it holds no turn."""
    from .craze import CrazeMapper  # the replayed events are the mapper's own, re-marked

    mapper = CrazeMapper()
    body: list[JsonObj] = []
    turns = 0
    for ev in history:
        for out in mapper.event(ev):
            d = out.data
            typ = d["type"]
            if typ == "turn" and d["turn"].get("phase") == "started":
                turns += 1
                d = craze_event("user", text=d["turn"].get("text"), at=d.get("at"))
            elif typ not in SESSION_KINDS:
                continue
            elif typ == "compaction" and d["compaction"].get("phase") != "ended":
                continue
            elif typ in ("text", "thought") and not d.get("text"):
                continue  # a commit marker: nothing to show
            body.append(craze_event(d["type"], **{k: v for k, v in d.items() if k != "type"}, replayed=True))
    if turns == 0:
        return []
    usage = {
        "contextTokens": 0,
        "contextWindow": 0,
        "turn": dict(mapper.spend_turn),
        "session": w.spend_of(session_before),
    }
    state: JsonObj = {"mode": mapper.mode} if mapper.mode else {}
    state["usage"] = usage
    return [
        craze_event("replay", replay={"phase": "start"}),
        *body,
        craze_event("meta", state=state),
        craze_event("replay", replay={"phase": "end"}),
    ]
