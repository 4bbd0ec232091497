"""Hash-chained log builders for the pure core's tests (test_core, test_rules): a LogBuilder that
writes canonical lines with a real chain, and the events most logs start with."""

from __future__ import annotations

from typing import Any

from threads_aws.core.canonical import canonical_bytes, sha256_hex
from threads_aws.core.lines import head_line, header_line

T = "0192a000-0000-7000-8000-000000000001"


B = "0192b000-0000-7000-8000-000000000001"


B2 = "0192b000-0000-7000-8000-000000000002"


ALICE = {"issuer": "api", "subject": "alice", "tenant": "acme"}


def eid(n: int) -> str:
    return f"0192e000-0000-7000-8000-{n:012x}"


class LogBuilder:
    def __init__(self, branch: str = B) -> None:
        self.branch = branch
        self.header = header_line(T, branch, 1)
        self.lines: list[bytes] = [self.header]
        self.prev = sha256_hex(self.header)
        self.seq = 0
        self.n = 0

    def add(
        self,
        type_: str,
        data: dict[str, Any],
        *,
        actor: dict[str, Any] | None = None,
        critical: bool = True,
        epoch: int = 1,
        **over: Any,
    ) -> bytes:
        self.seq += 1
        self.n += 1
        ev = {
            "actor": actor or {"kind": "host"},
            "branch_id": self.branch,
            "critical": critical,
            "data": data,
            "epoch": epoch,
            "event_id": eid(self.n),
            "prev_hash": self.prev,
            "seq": self.seq,
            "thread_id": T,
            "time": 1000 + self.seq,
            "type": type_,
            "type_version": 1,
        }
        ev.update(over)
        raw = canonical_bytes(ev)
        self.lines.append(raw)
        self.prev = sha256_hex(raw)
        return raw

    def export(self, head: bool = True) -> bytes:
        body = b"\n".join(self.lines) + b"\n"
        return body + (head_line(self.branch, self.seq, self.prev) + b"\n" if head else b"")


def started(
    b: LogBuilder, tools: list[dict[str, Any]] | None = None, policy: dict[str, Any] | None = None
) -> None:
    data: dict[str, Any] = {
        "adapter": {"name": "scripted", "settings": {}, "version": "1"},
        "agent_name": "demo",
        "config_hash": "0" * 64,
        "instructions": "Be brief.",
        "model": {"name": "m", "provider": "p"},
        "model_params": {},
        "tools": tools or [],
    }
    if policy is not None:
        data["policy"] = policy
    b.add("thread_started", data)


def turn(b: LogBuilder, text: str = "hi") -> None:
    b.add("user_input", {"source": "api", "text": text}, actor={"kind": "user", "principal": ALICE})


TOOL = {
    "description": "Send.",
    "effect_class": "reconcilable",
    "input_schema": {"type": "object"},
    "name": "send",
}


def call(b: LogBuilder, call_id: str, name: str = "send", decision: str = "allow") -> None:
    b.add("tool_call", {"call_id": call_id, "input": {"x": 1}, "name": name, "request_event_id": eid(1)})
    b.add("permission_decision", {"call_id": call_id, "decision": decision, "source": "policy"})


def snapshot_data(expires: int | None = None) -> dict[str, Any]:
    return {
        "capture_class": "filesystem",
        "expires_at": expires,
        "manifest_hash": "0" * 64,
        "provider": "fake",
        "quiesced": {"excluded": [], "frozen": [], "stopped": []},
        "sandbox_id": "s1",
        "snapshot_id": "snap",
    }
