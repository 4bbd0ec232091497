"""Resolve an installation's secret references, lazily and cached.

``env`` refs read the environment, ``value`` refs are inline, ``secret`` refs go to Secrets
Manager through Powertools Parameters (``get_secret``, cached ``max_age`` seconds, so a warm
Lambda fetches each secret once per window; the import is deferred to the first ``secret`` ref,
keeping webhook cold starts free of it when the refs are env). A JSON secret with ``key`` yields
that field; one secret can so hold all of an installation's values.

A reference that cannot be resolved raises ``SecretUnavailable``: a deployment fault, not the
caller's, so the route answers 5xx and the provider redelivers later (nothing is lost).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from typing import Any

from .installations import Installation, SecretRef
from .model import ChannelSecrets


class SecretUnavailable(Exception):
    pass


def _powertools_fetch(name: str, max_age_s: int) -> Any:
    from aws_lambda_powertools.utilities import parameters

    return parameters.get_secret(name, max_age=max_age_s)


class SecretResolver:
    def __init__(
        self,
        *,
        env: Mapping[str, str] | None = None,
        fetch: Callable[[str, int], Any] | None = None,
        max_age_s: int = 300,
    ) -> None:
        self._env = env
        self._fetch = fetch or _powertools_fetch
        self.max_age_s = max_age_s

    def resolve(self, ref: SecretRef, *, where: str = "secret") -> str:
        if ref.source == "value":
            return ref.name
        if ref.source == "env":
            env = self._env if self._env is not None else os.environ
            value = env.get(ref.name)
            if not value:
                raise SecretUnavailable(f"{where}: environment variable {ref.name} is not set")
            return value
        try:
            raw = self._fetch(ref.name, self.max_age_s)
        except Exception as e:  # botocore ClientError, GetParameterError, no credentials
            raise SecretUnavailable(f"{where}: {ref.describe()}: {type(e).__name__}") from e
        if isinstance(raw, bytes):
            raw = raw.decode()
        if ref.key is None:
            if not isinstance(raw, str) or not raw:
                raise SecretUnavailable(f"{where}: {ref.describe()} is empty")
            return raw
        try:
            doc = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError as e:
            raise SecretUnavailable(f"{where}: {ref.describe()}: not a JSON secret") from e
        value = doc.get(ref.key) if isinstance(doc, dict) else None
        if not isinstance(value, str) or not value:
            raise SecretUnavailable(f"{where}: {ref.describe()}: no string field {ref.key!r}")
        return value

    def secrets_for(self, inst: Installation, names: tuple[str, ...] | None = None) -> ChannelSecrets:
        """The installation's secrets (only ``names`` when given: the webhook needs the signing
        secret, not the bot token)."""
        wanted = names if names is not None else tuple(inst.secrets)
        values = {
            n: self.resolve(inst.secrets[n], where=f"{inst.channel}/{inst.installation_id} {n}")
            for n in wanted
            if n in inst.secrets
        }
        return ChannelSecrets(**values)
