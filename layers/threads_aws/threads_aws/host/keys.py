"""API keys: a token (`thr_` + 32 random bytes, printed once by `threads-aws keys create`) and
the principal it authenticates as. Only the token's sha256 is stored, as the key id
(`store.api_keys`)."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from ..store.api_keys import ApiKeyRow
from ..store.protocol import ApiKeyStore
from ..store.records import wall_ms
from .principal import Principal

TOKEN_PREFIX = "thr_"


def key_id(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Minted:
    token: str
    key_id: str
    principal: Principal


class ApiKeys:
    def __init__(self, rows: ApiKeyStore, *, clock: Callable[[], int] = wall_ms) -> None:
        self.rows = rows
        self.clock = clock

    def create(self, tenant: str, subject: str, issuer: str = "api") -> Minted:
        principal = Principal(issuer, tenant, subject)
        why = principal.too_long()
        if why is not None:
            raise ValueError(why)
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        kid = key_id(token)
        self.rows.create(kid, ApiKeyRow(issuer, tenant, subject), self.clock())
        return Minted(token, kid, principal)

    def revoke(self, token_or_id: str) -> bool:
        """Revoke by token or key id; False if no such key (or already revoked)."""
        kid = token_or_id if _is_hex64(token_or_id) else key_id(token_or_id)
        return self.rows.revoke(kid, self.clock())

    def lookup(self, token: str) -> Principal | None:
        """The principal of a live key, else None (unknown or revoked)."""
        row = self.rows.live(key_id(token))
        return None if row is None else Principal(row.issuer, row.tenant, row.subject)


def _is_hex64(s: str) -> bool:
    return len(s) == 64 and all(c in "0123456789abcdef" for c in s)
