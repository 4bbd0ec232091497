"""Provider API keys: the SDK's standard variable locally, Secrets Manager when deployed.

Order: `<P>_API_KEY` (e.g. ANTHROPIC_API_KEY, what the SDKs read) if set and non-empty; else
`<P>_API_KEY_SECRET` names a Secrets Manager secret (the template passes the secret names its
parameters give), read through Powertools Parameters once per container (cached `max_age`,
default 1 h, so a rotated key is picked up without a redeploy). The secret is the key as a plain
SecretString, or JSON with an `api_key` field. Bedrock has no key: IAM signs its requests.

Powertools Parameters (and its boto3 client) is imported on first use only.
"""

from __future__ import annotations

import json
import os

from ..models import ModelError

SECRET_MAX_AGE_S = 3600


def api_key(provider: str, environ: os._Environ[str] | dict[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    prefix = provider.upper()
    direct = env.get(f"{prefix}_API_KEY", "")
    if direct:
        return direct
    secret = env.get(f"{prefix}_API_KEY_SECRET", "")
    if not secret:
        raise ModelError(
            "provider_error",
            outcome="not_sent",
            retryable=False,
            message=f"no {prefix}_API_KEY (local) or {prefix}_API_KEY_SECRET (deployed) for {provider}",
        )
    return _secret_value(secret)


def _secret_value(name: str) -> str:
    from aws_lambda_powertools.utilities import parameters

    try:
        raw = parameters.get_secret(name, max_age=SECRET_MAX_AGE_S)
    except Exception as exc:  # noqa: BLE001 - GetSecretValueError, access denied, throttled: no key
        raise ModelError(
            "provider_error", outcome="not_sent", message=f"secret {name!r} unreadable: {exc}"
        ) from exc
    text = raw.decode() if isinstance(raw, bytes) else str(raw)
    if text.lstrip().startswith("{"):
        try:
            value = json.loads(text).get("api_key")
        except (ValueError, AttributeError):
            value = None
        if isinstance(value, str) and value:
            return value
    return text.strip()
