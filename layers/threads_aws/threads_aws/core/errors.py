"""Typed failures. `LogError` carries a pinned ErrorCode of the log contract plus the seq it
names; the HTTP layer maps codes to statuses, the log never records API-only codes."""

from __future__ import annotations


class LogError(Exception):
    """A failure the contract names: `code` is an ErrorCode, `seq` the line it is about."""

    def __init__(self, code: str, seq: int | None = None, message: str = "") -> None:
        self.code = code
        self.seq = seq
        self.message = message or code
        super().__init__(
            f"{code}" + (f" at seq {seq}" if seq is not None else "") + (f": {message}" if message else "")
        )

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"code": self.code}
        if self.seq is not None:
            out["seq"] = self.seq
        return out


def fail(code: str, seq: int | None = None, message: str = "") -> LogError:
    return LogError(code, seq, message)
