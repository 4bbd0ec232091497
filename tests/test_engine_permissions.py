"""The permission engine: modes, rule grammar, precedence deny > ask > allow, thread rules."""

from __future__ import annotations

import pytest
from threads_aws.config.rules import Rule
from threads_aws.core.errors import LogError
from threads_aws.engine.permissions import PermissionEngine, suggested_rules

POLICY = {"mode": "default", "allow": ["time", "todo_write"], "ask": ["note"], "deny": ["bash(rm:*)"]}


def decide(
    engine: PermissionEngine,
    tool: str,
    args: dict | None = None,
    *,
    category: str = "other",
    mode: str | None = None,
) -> tuple:
    d = engine.decide(tool, args or {}, category=category, mode=mode)
    return (d.decision, d.source, d.rule_id)


def test_rule_grammar() -> None:
    assert Rule.parse("bash(git status)").specifier == "git status"
    assert Rule.parse("mcp__github__*").prefix
    for bad in ("Bash", "bash(", "9x", "", "a b"):
        with pytest.raises(LogError) as info:
            Rule.parse(bad)
        assert info.value.code == "permission_rule_invalid"


def test_matching() -> None:
    assert Rule.parse("mcp__github__*").matches("mcp__github__create_issue", {})
    assert not Rule.parse("mcp__github__*").matches("mcp__gitlab__x", {})
    r = Rule.parse("bash(git log:*)")
    assert r.matches("bash", {"command": "git log --oneline"})
    assert r.matches("bash", {"command": "git log"})
    assert not r.matches("bash", {"command": "git logx"})
    assert Rule.parse("read(/src/*)").matches("read", {"file_path": "/src/a.py"})
    assert Rule.parse("bash(ls)").matches("bash", {"command": "ls"})
    assert not Rule.parse("bash(ls)").matches("bash", {"command": "ls -la"})
    assert not Rule.parse("note(x)").matches("note", {"text": "x"})  # no subject: no match


def test_default_mode() -> None:
    e = PermissionEngine(POLICY)
    assert decide(e, "time", category="read_only") == ("allow", "policy", "time")
    assert decide(e, "note") == ("ask", "policy", "note")
    assert decide(e, "ask_user", category="read_only") == ("allow", "default", None)
    assert decide(e, "web_post") == ("ask", "default", None)
    assert decide(e, "bash", {"command": "rm -rf /"}) == ("deny", "policy", "bash(rm:*)")


def test_precedence_deny_over_ask_over_allow() -> None:
    e = PermissionEngine(
        {"allow": ["bash"], "ask": ["bash(git push:*)"], "deny": ["bash(git push --force:*)"]}
    )
    assert decide(e, "bash", {"command": "git status"}) == ("allow", "policy", "bash")
    assert decide(e, "bash", {"command": "git push origin"}) == ("ask", "policy", "bash(git push:*)")
    assert decide(e, "bash", {"command": "git push --force x"})[0] == "deny"


def test_modes() -> None:
    e = PermissionEngine(POLICY)
    assert decide(e, "note", mode="dont_ask") == ("deny", "mode", "note")
    assert decide(e, "web_post", mode="dont_ask") == ("deny", "mode", None)
    assert decide(e, "time", category="read_only", mode="dont_ask")[0] == "allow"
    assert decide(e, "note", mode="bypass") == ("allow", "mode", None)
    assert decide(e, "bash", {"command": "rm x"}, mode="bypass")[0] == "deny"  # deny still wins
    assert decide(e, "note", mode="plan") == ("deny", "mode", None)
    assert decide(e, "time", category="read_only", mode="plan")[0] == "allow"
    assert decide(e, "write", category="edit", mode="accept_edits") == ("allow", "mode", None)
    assert decide(e, "write", category="edit", mode="default") == ("ask", "default", None)
    d = e.decide("note", {}, category="other", mode="plan")
    assert d.data("c1") == {"call_id": "c1", "decision": "deny", "source": "mode", "mode": "plan"}


def test_thread_rules_answer_asks_but_never_open_denies() -> None:
    e = PermissionEngine(POLICY, [("note", "allow"), ("bash", "allow")])
    assert decide(e, "note") == ("allow", "thread_rule", "note")
    assert decide(e, "bash", {"command": "rm x"})[0:2] == ("deny", "policy")
    e.add_thread_rule("time", "deny")
    assert decide(e, "time", category="read_only") == ("deny", "thread_rule", "time")
    assert decide(e, "note", mode="plan")[0] == "deny"


def test_from_events() -> None:
    evs = [
        {"type": "thread_started", "data": {"policy": {"permissions": POLICY}}},
        {"type": "permission_rule_added", "data": {"rule": "note", "decision": "allow", "challenge_id": "x"}},
    ]
    assert decide(PermissionEngine.from_events(evs), "note")[:2] == ("allow", "thread_rule")


def test_suggested_rules() -> None:
    assert suggested_rules("note", {"text": "x"}) == ["note"]
    assert suggested_rules("bash", {"command": "git push origin main"}) == [
        "bash(git push origin main)",
        "bash(git push:*)",
    ]
    assert suggested_rules("bash", {"command": "ls"}) == ["bash(ls)", "bash(ls:*)"]
    assert suggested_rules("bash", {"command": "echo 'unterminated"}) == ["bash(echo 'unterminated)"]
