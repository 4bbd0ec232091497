"""Channel installations as configuration: which tenant and agent a provider installation maps
to, who may press its approval buttons, and where its secrets are.

The file (``$CHANNELS_FILE``, else ``$CHANNELS_S3_URI`` when deployed, else the bundled
``data/channels.json``, which holds disabled examples) is JSON::

    {"installations": [
      {"channel": "slack",               # the /channels/{channel}/events path segment
       "provider": "slack",              # slack | whatsapp (default: the channel name)
       "installation_id": "T024BE7LD",   # Slack team (or enterprise) id; WhatsApp phone_number_id
       "tenant": "acme", "agent": "demo",
       "approvers": ["U0APPROVER"],      # provider user ids whose button presses may decide
       "enabled": true,                  # default true; disabled entries are validated, not served
       "settings": {},                   # provider options (WhatsApp: {"api_version": "v21.0"})
       "secrets": {"signing_secret": {"env": "SLACK_SIGNING_SECRET"},
                   "bot_token": {"secret": "threads-aws/slack/acme", "key": "bot_token"}}}]}

Secret references: ``{"env": NAME}`` (an environment variable), ``{"secret": NAME_OR_ARN,
"key"?: K}`` (Secrets Manager through Powertools Parameters; ``key`` picks a field of a JSON
secret) or ``{"value": "..."}`` (inline, for local use against the fakes only). Required per
provider: Slack ``signing_secret``, ``bot_token``; WhatsApp ``app_secret``, ``verify_token``,
``access_token``. Resolution is lazy (``secrets.SecretResolver``), so loading never reads one.

Identity: the installation's principal issuer is ``<channel>:<installation_id>``; a sender is
``{issuer, tenant, subject: <provider user id>}``. Validation fails with ``ChannelsConfigError``
naming the entry and field.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

DEFAULT_FILE = Path(__file__).resolve().parent.parent / "data" / "channels.json"
NAME = re.compile(r"[a-z][a-z0-9_]{0,63}\Z")
REQUIRED_SECRETS: dict[str, tuple[str, ...]] = {
    "slack": ("signing_secret", "bot_token"),
    "whatsapp": ("app_secret", "verify_token", "access_token"),
}
_FIELDS = {
    "channel",
    "provider",
    "installation_id",
    "tenant",
    "agent",
    "approvers",
    "enabled",
    "settings",
    "secrets",
}
_SETTINGS: dict[str, set[str]] = {"slack": set(), "whatsapp": {"api_version"}}


class ChannelsConfigError(ValueError):
    pass


@dataclass(frozen=True)
class SecretRef:
    source: Literal["env", "secret", "value"]
    name: str = field(repr=False)  # the env var, the secret id, or (value) the secret itself
    key: str | None = None

    def describe(self) -> str:
        if self.source == "env":
            return f"env {self.name}"
        if self.source == "secret":
            return f"secret {self.name}" + (f" key {self.key}" if self.key else "")
        return "inline value"


@dataclass(frozen=True)
class Installation:
    channel: str
    provider: str
    installation_id: str
    tenant: str
    agent: str
    approvers: tuple[str, ...] = ()
    secrets: Mapping[str, SecretRef] = field(default_factory=dict)
    settings: Mapping[str, Any] = field(default_factory=dict)
    enabled: bool = True

    @property
    def issuer(self) -> str:
        return f"{self.channel}:{self.installation_id}"

    def principal(self, sender: str) -> dict[str, str]:
        """The principal of a provider user of this installation."""
        return {"issuer": self.issuer, "subject": sender, "tenant": self.tenant}

    def approver_principals(self) -> list[dict[str, str]]:
        return [self.principal(a) for a in self.approvers]

    def is_approver(self, sender: str) -> bool:
        return sender in self.approvers


class Installations:
    """The enabled installations by (channel, installation_id)."""

    def __init__(self, items: Iterable[Installation]) -> None:
        self.all = tuple(items)
        self._by_key = {(i.channel, i.installation_id): i for i in self.all if i.enabled}
        self._by_channel: dict[str, list[Installation]] = {}
        for i in self._by_key.values():
            self._by_channel.setdefault(i.channel, []).append(i)

    def channels(self) -> list[str]:
        return sorted(self._by_channel)

    def of_channel(self, channel: str) -> list[Installation]:
        return list(self._by_channel.get(channel, ()))

    def provider(self, channel: str) -> str | None:
        insts = self._by_channel.get(channel)
        return insts[0].provider if insts else None

    def get(self, channel: str, installation_id: str) -> Installation | None:
        return self._by_key.get((channel, installation_id))

    def __len__(self) -> int:
        return len(self._by_key)


def _text(raw: Mapping[str, Any], key: str, where: str) -> str:
    v = raw.get(key)
    if not isinstance(v, str) or not v.strip():
        raise ChannelsConfigError(f"{where}.{key}: must be a non-empty string")
    return v


def _secret_ref(raw: Any, where: str) -> SecretRef:
    if not isinstance(raw, dict):
        raise ChannelsConfigError(f'{where}: must be an object {{"env"|"secret"|"value": ...}}')
    sources = [k for k in ("env", "secret", "value") if k in raw]
    extra = set(raw) - {"env", "secret", "value", "key"}
    if len(sources) != 1 or extra:
        raise ChannelsConfigError(f"{where}: exactly one of env, secret, value (and key only with secret)")
    source = sources[0]
    name = raw[source]
    if not isinstance(name, str) or not name:
        raise ChannelsConfigError(f"{where}.{source}: must be a non-empty string")
    key = raw.get("key")
    if key is not None and (source != "secret" or not isinstance(key, str) or not key):
        raise ChannelsConfigError(f"{where}.key: a non-empty string, only with secret")
    return SecretRef(source, name, key)  # type: ignore[arg-type]


def _installation(raw: Any, where: str, agent_names: Collection[str] | None) -> Installation:
    if not isinstance(raw, dict):
        raise ChannelsConfigError(f"{where}: must be an object")
    unknown = sorted(set(raw) - _FIELDS)
    if unknown:
        raise ChannelsConfigError(f"{where}: unknown field(s) {', '.join(unknown)}")
    channel = _text(raw, "channel", where)
    if not NAME.match(channel):
        raise ChannelsConfigError(f"{where}.channel: {channel!r} must match [a-z][a-z0-9_]{{0,63}}")
    provider = raw.get("provider", channel)
    if provider not in REQUIRED_SECRETS:
        raise ChannelsConfigError(
            f"{where}.provider: {provider!r} is not one of {', '.join(sorted(REQUIRED_SECRETS))}"
            + ("" if "provider" in raw else " (set provider when the channel name is not one)")
        )
    agent = _text(raw, "agent", where)
    if agent_names is not None and agent not in agent_names:
        raise ChannelsConfigError(f"{where}.agent: no agent {agent!r} in the agents file")
    approvers = raw.get("approvers", [])
    if not isinstance(approvers, list) or not all(isinstance(a, str) and a for a in approvers):
        raise ChannelsConfigError(f"{where}.approvers: must be a list of provider user ids")
    enabled = raw.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ChannelsConfigError(f"{where}.enabled: must be true or false")
    settings = raw.get("settings", {})
    if not isinstance(settings, dict) or set(settings) - _SETTINGS[provider]:
        allowed = ", ".join(sorted(_SETTINGS[provider])) or "none"
        raise ChannelsConfigError(f"{where}.settings: must be an object with keys among: {allowed}")
    secrets_raw = raw.get("secrets")
    if not isinstance(secrets_raw, dict):
        raise ChannelsConfigError(f"{where}.secrets: must be an object")
    need = REQUIRED_SECRETS[provider]
    missing = [s for s in need if s not in secrets_raw]
    extra = sorted(set(secrets_raw) - set(need))
    if missing or extra:
        raise ChannelsConfigError(
            f"{where}.secrets: {provider} needs exactly {', '.join(need)}"
            + (f"; missing {', '.join(missing)}" if missing else "")
            + (f"; unknown {', '.join(extra)}" if extra else "")
        )
    return Installation(
        channel=channel,
        provider=provider,
        installation_id=_text(raw, "installation_id", where),
        tenant=_text(raw, "tenant", where),
        agent=agent,
        approvers=tuple(approvers),
        secrets={k: _secret_ref(secrets_raw[k], f"{where}.secrets.{k}") for k in need},
        settings=dict(settings),
        enabled=enabled,
    )


def parse_installations(
    raw: Any, *, agent_names: Collection[str] | None = None, source: str = "channels file"
) -> Installations:
    """Validate a channels document. ``agent_names`` (the agents file's keys) checks each
    ``agent``; None skips that check."""
    if (
        not isinstance(raw, dict)
        or set(raw) - {"installations"}
        or not isinstance(raw.get("installations"), list)
    ):
        raise ChannelsConfigError(f'{source}: must be {{"installations": [...]}}')
    items = [
        _installation(r, f"{source}: installations[{i}]", agent_names)
        for i, r in enumerate(raw["installations"])
    ]
    seen: dict[tuple[str, str], int] = {}
    providers: dict[str, str] = {}
    for i, inst in enumerate(items):
        key = (inst.channel, inst.installation_id)
        if key in seen:
            raise ChannelsConfigError(
                f"{source}: installations[{i}]: channel {inst.channel!r} installation "
                f"{inst.installation_id!r} repeats installations[{seen[key]}]"
            )
        seen[key] = i
        if providers.setdefault(inst.channel, inst.provider) != inst.provider:
            raise ChannelsConfigError(
                f"{source}: installations[{i}]: channel {inst.channel!r} mixes providers "
                f"{providers[inst.channel]!r} and {inst.provider!r}"
            )
    return Installations(items)


@lru_cache(maxsize=8)
def _load(path: str, agent_names: tuple[str, ...] | None) -> Installations:
    try:
        raw = json.loads(Path(path).read_text())
    except OSError as e:
        raise ChannelsConfigError(f"{path}: cannot read: {e.strerror or e}") from e
    except ValueError as e:
        raise ChannelsConfigError(f"{path}: not JSON: {e}") from e
    return parse_installations(raw, agent_names=agent_names, source=path)


@lru_cache(maxsize=4)
def _load_s3(uri: str, agent_names: tuple[str, ...] | None) -> Installations:
    import boto3

    from ..store.objects import read_object

    try:
        raw = json.loads(read_object(boto3.session.Session().client("s3"), uri))
    except ValueError as e:
        raise ChannelsConfigError(f"{uri}: not JSON: {e}") from e
    return parse_installations(raw, agent_names=agent_names, source=uri)


def load_installations(
    path: str | os.PathLike[str] | None = None, *, agent_names: Collection[str] | None = None
) -> Installations:
    """``path``, else ``$CHANNELS_FILE``, else ``$CHANNELS_S3_URI`` (a deployment's channels
    file: the template parameter ``ChannelsObject`` sets it, as bucket/key), else the bundled
    file. Loaded once per process (and source)."""
    names = tuple(sorted(agent_names)) if agent_names is not None else None
    uri = os.environ.get("CHANNELS_S3_URI", "")
    if path is None and not os.environ.get("CHANNELS_FILE") and uri:
        return _load_s3(uri if uri.startswith("s3://") else "s3://" + uri, names)
    return _load(str(path or os.environ.get("CHANNELS_FILE") or DEFAULT_FILE), names)
