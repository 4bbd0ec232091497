"""Whether this deployment's configuration can reach an agent's models, known before a run
starts: `POST /v1/runs` refuses an agent none of whose models (its model, then its fallbacks)
can be reached, naming what to set (`host.runs`); a run accepted anyway (a key that turns out
wrong) fails in its result as before.

Only what the environment *declares* is judged: a key provider is unreachable when neither
`<P>_API_KEY` nor `<P>_API_KEY_SECRET` has a value and the latter is declared (template.yaml's
Globals declare it, empty without the stack parameter; `threads-aws dev` resolves the same
environment); an environment without the variable at all (a test's, a hand-made one) is not
judged. Bedrock is unreachable only where `$THREADS_BEDROCK_UNAVAILABLE` says so (dev without a
Bedrock endpoint, `engine.providers.bedrock`); deployed, a missing BedrockModelArns grant shows
in the run's result (AccessDeniedException naming the model).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

# provider -> the stack parameter that names its Secrets Manager secret
KEY_PARAMETERS = {"anthropic": "AnthropicApiKeySecret", "openai": "OpenAIApiKeySecret"}
BEDROCK_UNAVAILABLE = "THREADS_BEDROCK_UNAVAILABLE"
BEDROCK_ENDPOINT = "AWS_ENDPOINT_URL_BEDROCK_RUNTIME"


def missing(provider: str, env: Mapping[str, str] | None = None) -> str | None:
    """What `provider` lacks here, in words naming the variable/parameter; None if it may work."""
    env = os.environ if env is None else env
    if provider in KEY_PARAMETERS:
        p = provider.upper()
        secret_var = f"{p}_API_KEY_SECRET"
        if env.get(f"{p}_API_KEY") or env.get(secret_var) or secret_var not in env:
            return None
        param = KEY_PARAMETERS[provider]
        return f"{p}_API_KEY (locally) or the {param} stack parameter (deployed: {secret_var})"
    if provider == "bedrock" and env.get(BEDROCK_UNAVAILABLE) and not env.get(BEDROCK_ENDPOINT):
        return f"{BEDROCK_ENDPOINT} or `threads-aws dev --real-bedrock`"
    return None


def unreachable(models: Iterable[Mapping[str, str]], env: Mapping[str, str] | None = None) -> str | None:
    """None if any of `models` may be reached; else one message naming each model's need."""
    needs = []
    for m in models:
        what = missing(str(m.get("provider", "")), env)
        if what is None:
            return None
        needs.append(f"{m.get('provider')}/{m.get('name')} needs {what}")
    return "; ".join(needs) if needs else None
