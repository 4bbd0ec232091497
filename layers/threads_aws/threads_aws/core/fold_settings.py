"""The fold's rules for the thread's configuration: the pinned agent config (thread_started), the
tool set (rule 17), settings epochs and fallbacks (rule 18), permission rules and modes (rule 27)."""

from __future__ import annotations

from typing import Any

from .canonical import canonical_hash
from .fold_state import FoldState, epoch_settings


class SettingsRules(FoldState):
    """Agent config, tools, settings epochs, permission rules and modes."""

    __slots__ = ()

    def _on_thread_started(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self.started = d
        self.settings = epoch_settings(ev)
        self.thread_rules = []
        self.tools = {t["name"]: t for t in d["tools"]}
        self.policy = d.get("policy") or {}
        # Without policy.permissions the mode is `default` (inferred).
        self.mode = self.policy.get("permissions", {}).get("mode", "default")

    def _on_tools_changed(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        if canonical_hash(d["tools"]) != d["tools_hash"]:
            raise self._bad(seq, "tools_hash is not sha256(JCS(tools))")  # rule 17
        self.tools = {t["name"]: t for t in d["tools"]}

    def _on_settings_changed(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        if self.awaiting:
            raise self._bad(seq, "settings_changed while an attempt awaits its response")  # rule 18
        models = self.policy.get("models")
        if models is not None:
            m = d["settings"]["model"]
            if not any(x["provider"] == m["provider"] and x["name"] == m["name"] for x in models):
                raise self._bad(seq, "model is not in policy.models")  # rule 18
        if d["reason"] == "fallback" and self.fallback_from is None:
            self.fallback_from = self.settings
            self.fallback_event_id = ev["event_id"]
            self.fallback_turn = self.turns_completed
        elif d["reason"] in ("user", "revert"):
            self.fallback_from = self.fallback_event_id = None
        self.settings = epoch_settings(ev)
        t = self.turn
        t.failures = t.retries = t.crashes = 0
        t.retry = None
        t.epoch_seq = seq

    def _on_permission_rule_added(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        self.thread_rules.append((d["rule"], d["decision"]))

    def _on_mode_changed(self, ev: dict[str, Any], seq: int, d: dict[str, Any]) -> None:
        if d["from"] != self.mode:
            raise self._bad(seq, "mode_changed.from is not the current mode")  # rule 27
        if d["to"] == "bypass" and not self.policy.get("permissions", {}).get("allow_bypass", False):
            raise self._bad(seq, "bypass needs policy.permissions.allow_bypass")  # rule 27
        self.mode = d["to"]
