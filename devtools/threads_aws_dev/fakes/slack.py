"""A local HTTP fake of the Slack Web API (dev and tests only), written from Slack's public
method references; the correctly signed Events API / interactivity requests Slack sends are
built by `slack_events` (re-exported here).

Point the sender at it with ``SLACK_API_URL=http://127.0.0.1:PORT/api/``. Methods:
- ``chat.postMessage``: Bearer token (or ``token`` arg) checked against the fake's tokens
  (``invalid_auth``); ``channel`` required (``channel_not_found`` when the fake lists channels
  and this is not one); ``text`` or ``blocks`` (``no_text``); blocks a list of at most 50 with
  buttons within Block Kit limits (``invalid_blocks``); ``metadata`` ``{event_type,
  event_payload: object}`` (``invalid_metadata_format``). Answers ``{ok, channel, ts, message}``
  with a fresh, increasing ``ts``.
- ``conversations.history`` (top-level messages, newest first) and ``conversations.replies``
  (the parent, then its replies oldest first; ``thread_not_found`` when neither exists), with
  ``oldest``/``latest``/``inclusive``/``limit``/``cursor``; ``metadata`` only with
  ``include_all_metadata``.
- ``auth.test``.
JSON and form bodies are both accepted, as Slack does. Failure injection: ``_channel_http``.

Run alone: ``python -m threads_aws_dev.fakes.slack --port 8790``.
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Iterable
from typing import Any

from ._channel_http import Answer, Failure, FakeServer, Incoming, Signed, json_or_form
from .slack_events import (
    block_actions,
    button_action,
    event_callback,
    message_event,
    sign,
    signed_form,
    signed_json,
    url_verification,
)

__all__ = [
    "DEFAULT_TOKEN",
    "FakeSlack",
    "Signed",
    "block_actions",
    "button_action",
    "event_callback",
    "main",
    "message_event",
    "sign",
    "signed_form",
    "signed_json",
    "url_verification",
]

DEFAULT_TOKEN = "xoxb-fake-token"


def _ts_key(ts: str) -> tuple[int, int]:
    sec, _, frac = ts.partition(".")
    return int(sec), int((frac or "0").ljust(6, "0")[:6])


class FakeSlack(FakeServer):
    def __init__(
        self,
        *,
        tokens: Iterable[str] = (DEFAULT_TOKEN,),
        team_id: str = "T0FAKE",
        bot_user_id: str = "U0BOT",
        bot_id: str = "B0BOT",
        channels: Iterable[str] | None = None,
        history_limit_cap: int = 999,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.tokens = set(tokens)
        self.team_id, self.bot_user_id, self.bot_id = team_id, bot_user_id, bot_id
        self.channels = set(channels) if channels is not None else None
        self.history_limit_cap = history_limit_cap
        self.messages: dict[str, list[dict[str, Any]]] = {}
        self.posted: list[dict[str, Any]] = []  # every accepted chat.postMessage, args as received
        self._last_us = 0
        self._ts_lock = threading.Lock()
        super().__init__(host, port)

    @property
    def url(self) -> str:
        """The ``SLACK_API_URL`` value for this fake."""
        return self.origin + "/api/"

    def reset_state(self) -> None:
        self.messages.clear()
        self.posted.clear()

    def _next_ts(self) -> str:
        with self._ts_lock:
            self._last_us = max(self._last_us + 1, time.time_ns() // 1000)
            return f"{self._last_us // 1_000_000}.{self._last_us % 1_000_000:06d}"

    def add_message(
        self,
        channel: str,
        text: str,
        *,
        user: str = "U0USER",
        ts: str | None = None,
        thread_ts: str | None = None,
    ) -> dict[str, Any]:
        """Seed a user's message (the thread parent a reply goes under)."""
        msg: dict[str, Any] = {"type": "message", "user": user, "text": text, "ts": ts or self._next_ts()}
        if thread_ts:
            msg["thread_ts"] = thread_ts
        with self.lock:
            self.messages.setdefault(channel, []).append(msg)
        return msg

    def bot_messages(self, channel: str | None = None) -> list[dict[str, Any]]:
        """The messages our app posted (all channels, or one), in post order."""
        with self.lock:
            chans = [channel] if channel else list(self.messages)
            return [m for c in chans for m in self.messages.get(c, []) if m.get("bot_id") == self.bot_id]

    # -- HTTP ------------------------------------------------------------------------------------

    def api_method(self, incoming: Incoming) -> str:
        return incoming.path.removeprefix("/api/")

    def handle(self, incoming: Incoming, failure: Failure | None) -> Answer:
        method = self.api_method(incoming)
        if failure is not None:
            early = _failure_answer(failure)
            if early is not None:
                return early
        args = json_or_form(incoming, ("blocks", "metadata", "attachments"))
        auth = incoming.headers.get("authorization", "")
        token = auth.removeprefix("Bearer ").strip() if auth.startswith("Bearer ") else args.get("token")
        if not token:
            return _err("not_authed")
        if token not in self.tokens:
            return _err("invalid_auth")
        handler = {
            "chat.postMessage": self._post,
            "conversations.history": self._history,
            "conversations.replies": self._replies,
            "auth.test": self._auth_test,
        }.get(method)
        if handler is None:
            return _err("unknown_method")
        with self.lock:
            return handler(args)

    def _auth_test(self, args: dict[str, Any]) -> Answer:
        return Answer(
            200,
            {
                "ok": True,
                "url": "https://fake.slack.com/",
                "team": "Fake",
                "user": "threads",
                "team_id": self.team_id,
                "user_id": self.bot_user_id,
                "bot_id": self.bot_id,
            },
        )

    def _post(self, args: dict[str, Any]) -> Answer:
        channel = args.get("channel")
        if not isinstance(channel, str) or not channel:
            return _err("channel_not_found")
        if self.channels is not None and channel not in self.channels:
            return _err("channel_not_found")
        text, blocks, metadata = args.get("text"), args.get("blocks"), args.get("metadata")
        if blocks is not None and not _valid_blocks(blocks):
            return _err("invalid_blocks")
        if not (isinstance(text, str) and text) and not blocks:
            return _err("no_text")
        if isinstance(text, str) and len(text) > 40_000:
            return _err("msg_too_long")
        if metadata is not None and not (
            isinstance(metadata, dict)
            and isinstance(metadata.get("event_type"), str)
            and metadata["event_type"]
            and isinstance(metadata.get("event_payload"), dict)
        ):
            return _err("invalid_metadata_format")
        msg: dict[str, Any] = {
            "type": "message",
            "user": self.bot_user_id,
            "bot_id": self.bot_id,
            "text": text or "",
            "ts": self._next_ts(),
            "team": self.team_id,
        }
        for k in ("thread_ts", "blocks", "metadata"):
            if args.get(k):
                msg[k] = args[k]
        self.messages.setdefault(channel, []).append(msg)
        self.posted.append(dict(args, channel=channel))
        shown = {k: v for k, v in msg.items() if k != "metadata"}
        return Answer(200, {"ok": True, "channel": channel, "ts": msg["ts"], "message": shown})

    def _window(self, msgs: list[dict[str, Any]], args: dict[str, Any]) -> list[dict[str, Any]]:
        inclusive = str(args.get("inclusive", "false")).lower() in ("1", "true")
        out = msgs
        if args.get("oldest"):
            lo = _ts_key(str(args["oldest"]))
            out = [m for m in out if _ts_key(m["ts"]) > lo or (inclusive and _ts_key(m["ts"]) == lo)]
        if args.get("latest"):
            hi = _ts_key(str(args["latest"]))
            out = [m for m in out if _ts_key(m["ts"]) < hi or (inclusive and _ts_key(m["ts"]) == hi)]
        return out

    def _page(self, msgs: list[dict[str, Any]], args: dict[str, Any]) -> Answer:
        limit = min(int(args.get("limit") or 100), self.history_limit_cap)
        start = int(args.get("cursor") or 0)
        page = msgs[start : start + limit]
        with_md = str(args.get("include_all_metadata", "false")).lower() in ("1", "true")
        shown = [m if with_md else {k: v for k, v in m.items() if k != "metadata"} for m in page]
        more = start + limit < len(msgs)
        return Answer(
            200,
            {
                "ok": True,
                "messages": shown,
                "has_more": more,
                "response_metadata": {"next_cursor": str(start + limit) if more else ""},
            },
        )

    def _history(self, args: dict[str, Any]) -> Answer:
        channel = args.get("channel")
        if not isinstance(channel, str) or (self.channels is not None and channel not in self.channels):
            return _err("channel_not_found")
        top = [m for m in self.messages.get(channel, []) if m.get("thread_ts") in (None, m["ts"])]
        ordered = sorted(self._window(top, args), key=lambda m: _ts_key(m["ts"]), reverse=True)
        return self._page(ordered, args)

    def _replies(self, args: dict[str, Any]) -> Answer:
        channel, ts = args.get("channel"), args.get("ts")
        if not isinstance(channel, str) or (self.channels is not None and channel not in self.channels):
            return _err("channel_not_found")
        msgs = self.messages.get(channel, [])
        parent = [m for m in msgs if m["ts"] == ts]
        replies = [m for m in msgs if m.get("thread_ts") == ts and m["ts"] != ts]
        if not parent and not replies:
            return _err("thread_not_found")
        ordered = parent + sorted(self._window(replies, args), key=lambda m: _ts_key(m["ts"]))
        return self._page(ordered, args)


def _err(code: str, status: int = 200, headers: dict[str, str] | None = None) -> Answer:
    return Answer(status, {"ok": False, "error": code}, headers or {})


def _failure_answer(f: Failure) -> Answer | None:
    """Failures that refuse before acting; ``hang``/``drop`` act first (handled by the server)."""
    if f.mode == "ratelimited":
        return _err("ratelimited", 429, {"Retry-After": str(int(f.retry_after_s))})
    if f.mode.startswith("error:"):
        return _err(f.mode.removeprefix("error:"))
    if f.mode.startswith("status:"):
        return Answer(int(f.mode.removeprefix("status:")), {"ok": False, "error": "fake_http_error"})
    return None


def _valid_blocks(blocks: Any) -> bool:
    if not isinstance(blocks, list) or not blocks or len(blocks) > 50:
        return False
    for b in blocks:
        if not isinstance(b, dict) or not isinstance(b.get("type"), str):
            return False
        if b["type"] == "section":
            t = b.get("text")
            if not isinstance(t, dict) or not isinstance(t.get("text"), str) or len(t["text"]) > 3000:
                return False
        if b["type"] == "actions":
            els = b.get("elements")
            if not isinstance(els, list) or not 1 <= len(els) <= 25:
                return False
            if len(str(b.get("block_id", ""))) > 255:
                return False
            ids = [e.get("action_id") for e in els if isinstance(e, dict)]
            if len(ids) != len(els) or len(set(ids)) != len(ids):
                return False
            for e in els:
                if e.get("type") == "button" and not _valid_button(e):
                    return False
    return True


def _valid_button(e: dict[str, Any]) -> bool:
    text = e.get("text")
    return (
        isinstance(text, dict)
        and text.get("type") == "plain_text"
        and isinstance(text.get("text"), str)
        and 1 <= len(text["text"]) <= 75
        and isinstance(e.get("action_id"), str)
        and len(e["action_id"]) <= 255
        and len(str(e.get("value", ""))) <= 2000
        and e.get("style") in (None, "primary", "danger")
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="A local fake of the Slack Web API")
    ap.add_argument("--port", type=int, default=8790)
    ap.add_argument("--token", action="append", default=None)
    args = ap.parse_args(argv)
    fake = FakeSlack(tokens=args.token or [DEFAULT_TOKEN], port=args.port)
    print(f"fake slack: SLACK_API_URL={fake.url}", flush=True)
    fake.serve_forever()


if __name__ == "__main__":
    main()
