"""A run's stream as AI SDK UI message stream chunks (the `ai` npm package v5, `useChat`'s
transport: SSE `data: {chunk}` lines, `x-vercel-ai-ui-message-stream: v1`, a final
`data: [DONE]` the host adds — see `DONE`): a pure, stateful mapper on `frames`' framing.

One run is one assistant UI message: its `user_input` → `start {messageId: run_id}`; each model
request a step (`start-step` / `finish-step`); text and readable reasoning → `text-*` /
`reasoning-*` with id = the request's event id (`<id>:reasoning` for reasoning), live deltas
streamed and the committed response sending what they did not cover (as `text`'s `remainders`);
a tool call → `tool-input-available {toolCallId, toolName, input, dynamic: true}` (the tools are
the host's, not typed client-side: a `dynamic-tool` part), its result → `tool-output-available`
(`output` = the result text) or `tool-output-error`. The end: `finish {finishReason: stop}` (end_turn,
handoff), `abort` for a cancel, `error {errorText}` for any other end (as AG-UI's RUN_ERROR).

v5 has no approval chunk, so a park is a tool part whose output waits plus a data part the
client can render and answer: `data-approval` / `data-input` / `data-effect` / … (`id` = the
park id, so a later chunk with the same id updates it in place) with `{status: "open",
toolCallId, toolName, input, message, expiresAt}`; when it resolves the same id comes again with
`status: "resolved"` (and the decision/answer). The client answers through the host's routes
(approvals / answer / resolve), and the same stream goes on. Transient: `data-retry-wait`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import tools as t
from .event_data import as_list, obj, summary
from .frames import JsonObj, Mapper, Out, rfc3339
from .text import Deltas, remainders

DONE = b"data: [DONE]\n\n"
HEADER = ("x-vercel-ai-ui-message-stream", "v1")


class AiSdkMapper(Mapper):
    def __init__(self) -> None:
        super().__init__()
        self.message: str | None = None  # the open UI message (the run's user_input id)
        self.step = False
        self.deltas = Deltas()
        self.open: dict[str, str] = {}  # live-opened part id → "text" | "reasoning"
        self.calls: dict[str, tuple[str, dict[str, Any]]] = {}
        self.challenges: dict[str, JsonObj] = {}
        self.parks: dict[tuple[str, str], JsonObj] = {}

    def _out(self, type: str, *, stable: bool = True, **fields: Any) -> None:
        self._emit({"type": type, **{k: v for k, v in fields.items() if v is not None}}, stable=stable)

    # ------------------------------------------------------------------ framing
    def _on_event(self, ev: Mapping[str, Any]) -> None:
        handler = getattr(self, "_ev_" + str(ev.get("type")), None)
        if handler is not None and (ev.get("type") == "user_input" or self.message is not None):
            handler(ev, obj(ev.get("data")))

    def _end(self, type: str, **fields: Any) -> None:
        self._close_live(stable=False)
        self._finish_step()
        self._out(type, **fields)
        self.message, self.parks = None, {}

    def _finish_step(self) -> None:
        if self.step:
            self._out("finish-step")
            self.step = False

    def _close_live(self, *, stable: bool, rid: str | None = None) -> None:
        for pid, kind in sorted(self.open.items()):
            if rid is None or pid in (rid, f"{rid}:reasoning"):
                self._out(f"{kind}-end", stable=stable, id=pid)
                del self.open[pid]

    def preamble(self, seen: list[Out]) -> list[Out]:
        """A new connection begins a UI message: re-send the open run's `start`, its open step
        and any part a cursor inside a group cut through (the client has its earlier chunks)."""
        start: JsonObj | None = None
        step = False
        parts: dict[str, str] = {}
        for o in seen:
            typ = str(o.data["type"])
            if typ == "start":
                start, step, parts = o.data, False, {}
            elif typ in ("finish", "abort", "error"):
                start = None
            elif typ in ("start-step", "finish-step"):
                step = typ == "start-step"
            elif typ.endswith("-start"):
                parts[str(o.data["id"])] = typ[: -len("-start")]
            elif typ.endswith("-end"):
                parts.pop(str(o.data.get("id")), None)
        if start is None:
            return []
        out = [Out(dict(start))] + ([Out({"type": "start-step"})] if step else [])
        return out + [Out({"type": f"{k}-start", "id": pid}) for pid, k in parts.items()]

    # ------------------------------------------------------------------ transient inputs
    def _on_delta(self, rid: str, text: str, offset: int | None, thinking: bool) -> None:
        if self.message is None:
            return
        chunk = self.deltas.take(rid, text, offset, thinking)
        if not chunk:
            return
        kind, pid = ("reasoning", f"{rid}:reasoning") if thinking else ("text", rid)
        if pid not in self.open:
            self.open[pid] = kind
            self._out(f"{kind}-start", id=pid)
        self._out(f"{kind}-delta", id=pid, delta=chunk)

    def _on_status(self, status: str, until: Any) -> None:
        if status == "retry_wait" and self.message is not None:
            self._out("data-retry-wait", data={"until": rfc3339(until)}, transient=True)

    def _on_result(self, run_id: str, outcome: Mapping[str, Any]) -> None:
        # A run the host failed without a turn_completed (e.g. branch_not_runnable) ends here.
        status = outcome.get("status")
        if self.message is None or status not in ("failed", "cancelled", "budget_exhausted"):
            return
        if status == "cancelled":
            self._end("abort")
        else:
            err = obj(outcome.get("error"))
            self._end("error", errorText=str(err.get("message", err.get("code", status))))

    # ------------------------------------------------------------------ run boundaries
    def _ev_user_input(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        if self.message is not None:
            self._end("abort")
        self.message = str(ev.get("event_id"))
        self._out("start", messageId=self.message)

    def _ev_turn_completed(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        # As AG-UI's `run_end`: end_turn / handoff finish, a cancel aborts, the rest are errors.
        reason = str(d.get("reason"))
        if reason in ("end_turn", "handoff"):
            self._end("finish", finishReason="stop")
        elif reason == "cancelled":
            self._end("abort")
        else:
            code = f" ({d['code']})" if d.get("code") else ""
            self._end("error", errorText=f"turn ended: {reason}{code}")

    # ------------------------------------------------------------------ model
    def _ev_model_request(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        rid = str(ev.get("event_id"))
        held = self.deltas.request(rid, str(d.get("purpose", "turn")))
        if not self.deltas.is_turn(rid):
            return
        self._finish_step()
        self._out("start-step")
        self.step = True
        for text, offset, thinking in held:
            self._on_delta(rid, text, offset, thinking)

    def _ev_model_response(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        rid = str(d.get("request_event_id"))
        shown = self.deltas.close(rid)
        if not self.deltas.is_turn(rid):
            return
        content = [p for p in as_list(d.get("content")) if isinstance(p, dict)]
        reasoning = [s for p in content if p.get("type") == "reasoning" and (s := summary(p))]
        self._part("reasoning", f"{rid}:reasoning", reasoning, shown.thinking)
        texts = [str(p.get("text", "")) for p in content if p.get("type") == "text"]
        self._part("text", rid, [x for x in texts if x], shown.text)
        for part in content:
            if part.get("type") == "tool_use":
                call_id, name = str(part.get("call_id")), str(part.get("name"))
                args = obj(part.get("input"))
                self.calls[call_id] = (name, args)
                self._out("tool-input-available", toolCallId=call_id, toolName=name, input=args, dynamic=True)
        self._close_live(stable=False, rid=rid)
        self._finish_step()

    _ev_model_response_recovered = _ev_model_response

    def _ev_model_attempt_abandoned(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        rid = str(d.get("request_event_id"))
        self.deltas.close(rid)
        self._close_live(stable=False, rid=rid)
        self._finish_step()

    def _part(self, kind: str, pid: str, parts: list[str], shown: str) -> None:
        """A committed text / reasoning part: what the live deltas did not show, then its end.
        Live text that is not a prefix of the committed text is closed and the committed text
        sent whole as its own part (a chunk stream cannot take text back)."""
        if not parts:
            return
        live = pid in self.open
        if live and not "".join(parts).startswith(shown):
            self._out(f"{kind}-end", stable=False, id=pid)
            del self.open[pid]
            pid, live = f"{pid}:final", False
        if not live:
            self._out(f"{kind}-start", stable=False, id=pid)
        rest = "".join(remainders(parts, shown if live else ""))
        if rest:
            self._out(f"{kind}-delta", stable=False, id=pid, delta=rest)
        self.open.pop(pid, None)
        self._out(f"{kind}-end", id=pid)

    # ------------------------------------------------------------------ tools and parks
    def _ev_tool_result(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        if d.get("origin") != "deferred":  # a deferred result waits for its late one
            self._result(d)

    def _ev_tool_result_late(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        self._result(d)

    def _result(self, d: Mapping[str, Any]) -> None:
        call_id = str(d.get("call_id"))
        if d.get("is_error") or d.get("origin") in ("denied", "not_executed"):
            self._out("tool-output-error", toolCallId=call_id, errorText=t.result_text(d), dynamic=True)
        else:
            self._out("tool-output-available", toolCallId=call_id, output=t.result_text(d), dynamic=True)

    def _ev_approval_requested(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        self.challenges[str(d.get("challenge_id"))] = dict(d)

    def _ev_parked(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        addr = obj(d.get("address"))
        kind, pid = str(addr.get("kind")), str(addr.get("id"))
        call_id = {
            "approval": str(self.challenges.get(pid, {}).get("call_id", "")),
            "input": pid,
            "effect": pid.rpartition(":")[2],
        }.get(kind, "")
        name, args = self.calls.get(call_id, ("", {}))
        park: JsonObj = {"status": "open", "kind": kind}
        if call_id:
            park.update(toolCallId=call_id, toolName=name, input=args)
        if kind == "approval":
            park["message"] = f"Allow {t.label_of(name, args)}?"
        elif kind == "input" and args.get("question"):
            park["message"] = str(args["question"])
        expires = rfc3339(d.get("expires_at")) or rfc3339(self.challenges.get(pid, {}).get("expires_at"))
        if expires:
            park["expiresAt"] = expires
        self.parks[(kind, pid)] = park
        self._out(f"data-{kind}", id=pid, data=park)

    def _ev_resumed(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        addr = obj(d.get("address"))
        kind, pid = str(addr.get("kind")), str(addr.get("id"))
        park = self.parks.pop((kind, pid), None)
        if park is not None:
            park = {**park, "status": "resolved"}
            park.update({k: d[k] for k in ("resolution", "decision") if k in d})
            self._out(f"data-{kind}", id=pid, data=park)

    def _ev_approval_granted(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        self._decided(str(d.get("challenge_id")), "grant")

    def _ev_approval_denied(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        self._decided(str(d.get("challenge_id")), "deny")

    def _decided(self, challenge_id: str, decision: str) -> None:
        park = self.parks.get(("approval", challenge_id))
        if park is not None:
            park["decision"] = decision
