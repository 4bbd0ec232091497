"""A run's stream as AG-UI protocol events (ag-ui-protocol 1.0 wire shape: camelCase dicts,
`timestamp` = the log event's `time` in ms): a pure, stateful mapper (see `frames` for ordering,
ids and resume; `agui_wire` for the events' shapes; `agui_interrupts` for its park/resume half).

Runs. The threads run is one AG-UI run (`runId` = our run_id, `threadId` = the thread): its
`user_input` → RUN_STARTED (the prompt echoed as `input.messages[0]`) + STATE_SNAPSHOT; its
`turn_completed` → RUN_FINISHED (`success` with the run's output as `result`, or `cancelled`) or
RUN_ERROR (`code` = our RunErrorCode, or `budget_exhausted`), with the run's token `usage`.
A park is AG-UI's interrupt: the event group that leaves a park open ends the AG-UI run with
RUN_FINISHED{outcome: interrupt} — one Interrupt per open park (`id` = challenge id, ask_user call
id or effect key; `reason` approval | input | effect_unknown | child | resource; `toolCallId`;
`expiresAt`; `responseSchema` = the body our route takes to answer it). What the resolution
appends then starts a continuation run (`runId` = `<run_id>:<seq>`) whose
`input.resume` answers those interrupts (`resolved` with the decision / answer / resolution as
`payload`, or `cancelled` under a cancel), followed by a STATE_SNAPSHOT. A change made while
parked (mode, model) is shown in a continuation that ends with the still-open interrupts again.
After a run ends nothing more is sent (the protocol allows only a new RUN_STARTED).

Inside a run:
- each model request is a step (STEP_STARTED / STEP_FINISHED, `model_request` or `compaction`);
- text: TEXT_MESSAGE_START / CONTENT / END, one assistant message per response (`messageId` =
  the request's event id, so live deltas and the committed response are one message); deltas
  stream CONTENT live; the committed response sends what they did not cover and ENDs it;
- reasoning summaries and thinking deltas: REASONING_START / REASONING_MESSAGE_START / CONTENT /
  END / REASONING_END (`<request id>:reasoning`); opaque reasoning refs are never shown;
- tool calls: TOOL_CALL_START / ARGS (the whole arguments JSON) / END when the response commits
  (`parentMessageId` = the response's message), TOOL_CALL_RESULT from `tool_result` /
  `tool_result_late` (a deferred result waits for the late one);
- state (STATE_DELTA, RFC 6902 `add`): `/todos` (todos_updated), `/mode` (mode_changed), `/model`
  (settings_changed: provider, name, params);
- subagents: SUBAGENT_STARTED / SUBAGENT_FINISHED / SUBAGENT_ERROR (`subagentRunId` = the child
  thread id, `parentToolCallId` = the spawn call);
- a steer is a user TEXT_MESSAGE; CUSTOM events carry what AG-UI has no slot for:
  `threads.attempt_abandoned`, `threads.compacted`, `threads.compaction_failed`,
  `threads.hosted_tool`, `threads.retry_wait` (transient).

Resume (see `frames`): a new connection must begin with RUN_STARTED, so `preamble` re-sends the
open run's RUN_STARTED and a STATE_SNAPSHOT, and re-opens an open step, before what follows the
cursor.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import agui_wire as w
from .agui_interrupts import Interrupts
from .event_data import as_list, input_text, obj, summary
from .frames import JsonObj, Mapper, Out, rfc3339
from .text import Deltas, remainders

#: The AG-UI protocol version RUN_STARTED announces (ag-ui-protocol's PROTOCOL_VERSION).
PROTOCOL_VERSION = "1.0"


class AgUiMapper(Interrupts, Mapper):
    def __init__(self, *, suggested_rules: Any = None) -> None:
        super().__init__()
        self._rules = suggested_rules
        self.thread_id = ""
        self.run_id: str | None = None  # the threads run this stream follows (its user_input)
        self.ag_run: JsonObj | None = None  # the open AG-UI run's RUN_STARTED
        self.suspended = False
        self.parks: dict[tuple[str, str], JsonObj] = {}  # open park → its Interrupt
        self.resume: list[JsonObj] = []  # answers since the run suspended
        self.cancelling = False
        self.state: JsonObj = {"todos": []}
        self.step: str | None = None
        self.deltas = Deltas()
        self.open_text: set[str] = set()  # messages the deltas opened
        self.open_reasoning: set[str] = set()
        self.calls: dict[str, tuple[str, dict[str, Any]]] = {}  # call id → (tool, args)
        self.challenges: dict[str, JsonObj] = {}  # challenge id → approval_requested data
        self.usage: JsonObj = {}
        self.output: tuple[bool, Any] = (False, None)  # (accepted structured output?, value)
        self.last_text = ""
        self.budget: Mapping[str, Any] | None = None
        self._ts: int | None = None

    # ------------------------------------------------------------------ emit helpers
    def _out(self, type: str, *, stable: bool = True, **fields: Any) -> None:
        data: JsonObj = {"type": type}
        data.update({k: v for k, v in fields.items() if v is not None})
        if self._ts is not None:
            data["timestamp"] = self._ts
        self._emit(data, stable=stable)

    def _start(self, run_id: str, input: JsonObj) -> None:
        self.ag_run = {"threadId": self.thread_id, "runId": run_id}
        self._out(
            "RUN_STARTED",
            **self.ag_run,
            protocolVersion=PROTOCOL_VERSION,
            input={k: v for k, v in input.items() if v is not None},
        )
        self._out("STATE_SNAPSHOT", snapshot=w.copy(self.state))

    def _finish(self, type: str, **fields: Any) -> None:
        assert self.ag_run is not None
        self._close_live(stable=False)
        if self.step is not None:
            self._out("STEP_FINISHED", stepName=self.step)
            self.step = None
        usage, self.usage = w.usage_list(self.usage), {}
        if type == "RUN_ERROR":
            self._out("RUN_ERROR", usage=usage, **fields)
        else:
            self._out("RUN_FINISHED", **self.ag_run, usage=usage, **fields)
        self.ag_run = None

    def _close_live(self, *, stable: bool, rid: str | None = None) -> None:
        for mid in sorted(m for m in self.open_reasoning if rid is None or m == f"{rid}:reasoning"):
            self._out("REASONING_MESSAGE_END", stable=stable, messageId=mid)
            self._out("REASONING_END", stable=stable, messageId=mid)
            self.open_reasoning.discard(mid)
        for mid in sorted(m for m in self.open_text if rid is None or m == rid):
            self._out("TEXT_MESSAGE_END", stable=stable, messageId=mid)
            self.open_text.discard(mid)

    # ------------------------------------------------------------------ inputs
    def _on_event(self, ev: Mapping[str, Any]) -> None:
        typ = str(ev.get("type"))
        data = obj(ev.get("data"))
        self._ts = ev.get("time") if isinstance(ev.get("time"), int) else None
        self.thread_id = str(ev.get("thread_id", self.thread_id))
        handler = getattr(self, "_ev_" + typ, None)
        if handler is not None:
            handler(ev, data)
        if self.ag_run is not None and self.parks and not self.cancelling:
            interrupts = list(self.parks.values())
            self._finish("RUN_FINISHED", outcome={"type": "interrupt", "interrupts": interrupts})
            self.suspended = True

    def _on_delta(self, rid: str, text: str, offset: int | None, thinking: bool) -> None:
        if self.ag_run is None:
            return
        # A live delta is stamped when it was read (the subscription's `time`), not with the
        # last committed event's time: otherwise every delta of a response shares one stamp.
        self._ts = self._delta_time if self._delta_time is not None else self._ts
        chunk = self.deltas.take(rid, text, offset, thinking)
        if not chunk:
            return
        if thinking:
            mid = f"{rid}:reasoning"
            if mid not in self.open_reasoning:
                self.open_reasoning.add(mid)
                self._out("REASONING_START", messageId=mid)
                self._out("REASONING_MESSAGE_START", messageId=mid, role="reasoning")
            self._out("REASONING_MESSAGE_CONTENT", messageId=mid, delta=chunk)
        else:
            if rid not in self.open_text:
                self.open_text.add(rid)
                self._out("TEXT_MESSAGE_START", messageId=rid, role="assistant")
            self._out("TEXT_MESSAGE_CONTENT", messageId=rid, delta=chunk)

    def _on_status(self, status: str, until: Any) -> None:
        if status == "retry_wait" and self.ag_run is not None:
            self._out("CUSTOM", name="threads.retry_wait", value={"until": rfc3339(until)})

    def _on_result(self, run_id: str, outcome: Mapping[str, Any]) -> None:
        # A run the host failed without a turn_completed (e.g. branch_not_runnable) ends here.
        if self.ag_run is None or outcome.get("status") not in ("failed", "cancelled", "budget_exhausted"):
            return
        self._ts = None
        if outcome.get("status") == "cancelled":
            self._finish("RUN_FINISHED", outcome={"type": "cancelled"})
        else:
            err = obj(outcome.get("error"))
            code = str(err.get("code", outcome.get("status")))
            self._finish("RUN_ERROR", message=str(err.get("message", code)), code=code)

    def preamble(self, seen: list[Out]) -> list[Out]:
        """Reopen, for a new connection, what the outputs the client already has left open: the
        run, its step, and a message or tool call a cursor inside a group cut through."""
        return w.reopen(seen, self.state)

    # ------------------------------------------------------------------ run boundaries (parks: Interrupts)
    def _ev_user_input(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        if self.ag_run is not None:
            self._finish("RUN_FINISHED", outcome={"type": "cancelled"})
        self.run_id = str(ev.get("event_id"))
        self.suspended, self.parks, self.resume, self.cancelling = False, {}, [], False
        self.output, self.last_text, self.budget = (False, None), "", None
        message = {"id": self.run_id, "role": "user", "content": input_text(d)}
        self._start(self.run_id, {"threadId": self.thread_id, "runId": self.run_id, "messages": [message]})

    def _ev_turn_completed(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        if not self._active():
            return
        self.parks = {}
        typ, fields = w.run_end(str(d.get("reason")), d, self.output, self.last_text, self.budget)
        self._finish(typ, **fields)
        self.suspended = False

    # ------------------------------------------------------------------ model
    def _ev_model_request(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        rid = str(ev.get("event_id"))
        held = self.deltas.request(rid, str(d.get("purpose", "turn")))
        if not self._active():
            return
        if self.step is not None:
            self._out("STEP_FINISHED", stepName=self.step)
        self.step = "model_request" if self.deltas.is_turn(rid) else "compaction"
        self._out("STEP_STARTED", stepName=self.step)
        for text, offset, thinking in held:
            self._on_delta(rid, text, offset, thinking)

    def _ev_model_response(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        rid = str(d.get("request_event_id"))
        shown = self.deltas.close(rid)
        if not self._active():
            return
        content = [p for p in as_list(d.get("content")) if isinstance(p, dict)]
        if self.deltas.is_turn(rid):
            self._reasoning(
                rid,
                [s for p in content if p.get("type") == "reasoning" and (s := summary(p))],
                shown.thinking,
            )
            texts = [str(p.get("text", "")) for p in content if p.get("type") == "text"]
            self._text(rid, [x for x in texts if x], shown.text)
            if any(texts):
                self.last_text = "".join(texts)
            for i, part in enumerate(content):
                if part.get("type") == "tool_use":
                    self._tool_call(
                        rid, str(part.get("call_id")), str(part.get("name")), part.get("input") or {}
                    )
                elif part.get("type") == "hosted_tool":
                    value = {"id": f"{rid}#{i}", "name": part.get("name"), "provider": part.get("provider")}
                    self._out("CUSTOM", name="threads.hosted_tool", value=value)
        self._close_live(stable=False, rid=rid)
        w.add_usage(self.usage, d.get("usage"))
        if self.step is not None:
            self._out("STEP_FINISHED", stepName=self.step)
            self.step = None

    _ev_model_response_recovered = _ev_model_response

    def _reasoning(self, rid: str, parts: list[str], shown: str) -> None:
        if not parts:
            return
        mid = f"{rid}:reasoning"
        live = mid in self.open_reasoning
        if live and not "".join(parts).startswith(shown):
            self._out("REASONING_MESSAGE_END", stable=False, messageId=mid)
            self._out("REASONING_END", stable=False, messageId=mid)
            self.open_reasoning.discard(mid)
            mid, live = f"{rid}:reasoning:final", False
        if not live:
            self._out("REASONING_START", stable=False, messageId=mid)
            self._out("REASONING_MESSAGE_START", stable=False, messageId=mid, role="reasoning")
        rest = "".join(remainders(parts, shown if live else ""))
        if rest:
            self._out("REASONING_MESSAGE_CONTENT", stable=False, messageId=mid, delta=rest)
        self.open_reasoning.discard(mid)
        self._out("REASONING_MESSAGE_END", messageId=mid)
        self._out("REASONING_END", messageId=mid)

    def _text(self, rid: str, parts: list[str], shown: str) -> None:
        if not parts:
            return
        mid, live = rid, rid in self.open_text
        if live and not "".join(parts).startswith(shown):
            # The live text is not a prefix of the committed one (a lost delta): close it and
            # send the committed text as its own message rather than garble the live one.
            self._out("TEXT_MESSAGE_END", stable=False, messageId=rid)
            self.open_text.discard(rid)
            mid, live = f"{rid}:text", False
        if not live:
            self._out("TEXT_MESSAGE_START", stable=False, messageId=mid, role="assistant")
        rest = "".join(remainders(parts, shown if live else ""))
        if rest:
            self._out("TEXT_MESSAGE_CONTENT", stable=False, messageId=mid, delta=rest)
        self.open_text.discard(mid)
        self._out("TEXT_MESSAGE_END", messageId=mid)

    def _tool_call(self, rid: str, call_id: str, name: str, args: Any) -> None:
        args = args if isinstance(args, dict) else {}
        self.calls[call_id] = (name, args)
        self._out("TOOL_CALL_START", toolCallId=call_id, toolCallName=name, parentMessageId=rid)
        self._out("TOOL_CALL_ARGS", toolCallId=call_id, delta=w.args_json(args))
        self._out("TOOL_CALL_END", toolCallId=call_id)

    def _ev_model_attempt_abandoned(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        rid = str(d.get("request_event_id"))
        self.deltas.close(rid)
        if not self._active():
            return
        self._close_live(stable=False, rid=rid)
        value = {k: d[k] for k in ("request_event_id", "reason", "provider_outcome", "http_status") if k in d}
        self._out("CUSTOM", name="threads.attempt_abandoned", value=value)
        if self.step is not None:
            self._out("STEP_FINISHED", stepName=self.step)
            self.step = None

    def _ev_steer(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        if not self._active():
            return
        mid = str(ev.get("event_id"))
        self._out("TEXT_MESSAGE_START", messageId=mid, role="user")
        text = input_text(d)
        if text:
            self._out("TEXT_MESSAGE_CONTENT", messageId=mid, delta=text)
        self._out("TEXT_MESSAGE_END", messageId=mid)

    # ------------------------------------------------------------------ tools and state
    def _ev_tool_result(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        call_id = str(d.get("call_id"))
        if d.get("origin") == "answered":
            self._answered(call_id, {"answer": d.get("preview", "")})
        if d.get("origin") == "deferred" or not self._active():
            return
        self._out("TOOL_CALL_RESULT", **w.tool_result(call_id, d))

    def _ev_tool_result_late(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        if self._active():
            self._out("TOOL_CALL_RESULT", **w.tool_result(str(d.get("call_id")), d))

    def _set(self, key: str, value: Any) -> None:
        self.state[key] = value
        if self._active():
            self._out("STATE_DELTA", delta=[{"op": "add", "path": f"/{key}", "value": w.copy(value)}])

    def _ev_todos_updated(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        todos = [
            {k: x[k] for k in ("id", "content", "status") if k in x}
            for x in as_list(d.get("todos"))
            if isinstance(x, dict)
        ]
        self._set("todos", todos)

    def _ev_mode_changed(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        self._set("mode", d.get("to"))

    def _ev_settings_changed(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        s = obj(d.get("settings"))
        model = obj(s.get("model"))
        self._set(
            "model",
            {
                "provider": model.get("provider"),
                "name": model.get("name"),
                "params": s.get("model_params", {}),
            },
        )

    def _ev_output_validated(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        if d.get("outcome") == "accepted":
            self.output = (True, d.get("value"))

    def _ev_budget_exceeded(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        self.budget = d

    def _ev_agent_spawned(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        if self._active():
            self._out(
                "SUBAGENT_STARTED",
                subagentRunId=str(d.get("child_thread_id")),
                name=str(d.get("agent_name")),
                parentToolCallId=str(d.get("call_id")),
            )

    def _ev_agent_finished(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        if not self._active():
            return
        child, status = str(d.get("child_thread_id")), str(d.get("status"))
        if status == "completed":
            self._out("SUBAGENT_FINISHED", subagentRunId=child, outcome={"type": "success"})
        else:
            self._out("SUBAGENT_ERROR", subagentRunId=child, message=f"subagent {status}", code=status)

    def _ev_compacted(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        if self._active():
            value = {k: d[k] for k in ("trigger", "from_seq", "to_seq") if k in d}
            self._out("CUSTOM", name="threads.compacted", value=value)

    def _ev_compaction_failed(self, ev: Mapping[str, Any], d: Mapping[str, Any]) -> None:
        if self._active():
            self._out(
                "CUSTOM",
                name="threads.compaction_failed",
                value={"stage": d.get("stage"), "reason": d.get("reason")},
            )
