"""Principal{issuer, tenant, subject} and its PrincipalKey string (semantics.md §2):
`issuer/tenant/subject`, each part escaping `%` as `%25`, then `/` as `%2F`.

Each part is at most MAX_PART_BYTES of UTF-8: the host spells the tenant into DynamoDB keys
(`RECEIPT#<tenant>#runs#<Idempotency-Key>`, the tenant index `TENANT#<tenant>`), whose partition
keys hold at most 2,048 bytes. 256 bytes, escaped at worst 3x, plus a 255-character key (1,020
bytes) stays under that; `too_long` says which part is over, for the typed refusal."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MAX_PART_BYTES = 256


def _escape(part: str) -> str:
    return part.replace("%", "%25").replace("/", "%2F")


@dataclass(frozen=True, slots=True)
class Principal:
    issuer: str
    tenant: str
    subject: str

    @property
    def key(self) -> str:
        return "/".join(_escape(p) for p in (self.issuer, self.tenant, self.subject))

    def too_long(self) -> str | None:
        """Why this principal cannot be keyed (a part over MAX_PART_BYTES), or None."""
        for name in ("issuer", "tenant", "subject"):
            size = len(getattr(self, name).encode("utf-8", "surrogatepass"))
            if size > MAX_PART_BYTES:
                return (
                    f"the principal's {name} is {size} bytes; this host keys rows by it "
                    f"and takes at most {MAX_PART_BYTES}"
                )
        return None

    def as_dict(self) -> dict[str, str]:
        return {"issuer": self.issuer, "subject": self.subject, "tenant": self.tenant}

    def same(self, other: Mapping[str, Any] | None) -> bool:
        """True if `other` (a principal object from the log or config) is this principal."""
        return (
            isinstance(other, Mapping)
            and other.get("issuer") == self.issuer
            and other.get("tenant") == self.tenant
            and other.get("subject") == self.subject
        )

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any] | None) -> Principal | None:
        if not isinstance(m, Mapping):
            return None
        parts = [m.get("issuer"), m.get("tenant"), m.get("subject")]
        if not all(isinstance(p, str) and p for p in parts):
            return None
        return cls(*parts)  # type: ignore[arg-type]
