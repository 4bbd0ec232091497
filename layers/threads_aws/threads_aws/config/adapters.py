"""The model adapters an agent may name, and what each takes (checked at agents-file load).

The factories live in `engine.models` (the worker's registry); this module only knows their
names, so validating the agents file never imports the engine or a provider SDK.
"""

from __future__ import annotations

#: Provider adapters, imported on first use only (each pulls in its SDK: the API handlers never
#: import one, the worker only the one a step needs). Adapter name -> module:class.
PROVIDER_ADAPTERS: dict[str, str] = {
    "anthropic": "threads_aws.engine.providers.anthropic:AnthropicAdapter",
    "bedrock": "threads_aws.engine.providers.bedrock:BedrockAdapter",
    "openai": "threads_aws.engine.providers.openai:OpenAIAdapter",
}
#: model_params keys the provider adapters map (each refuses the others before sending).
MODEL_PARAMS = frozenset(
    {"max_tokens", "temperature", "top_p", "stop_sequences", "tool_choice", "thinking", "reasoning_effort"}
)
#: Adapter versions each provider adapter implements (`adapter.version` in line 0).
ADAPTER_VERSIONS: dict[str, frozenset[str]] = {name: frozenset({"1"}) for name in PROVIDER_ADAPTERS}

#: The offline adapters the engine registers itself, and any a process adds (`note_adapter`).
_NAMES: set[str] = {"demo", "scripted"}


def note_adapter(name: str) -> None:
    """A name the worker's registry now has (`engine.models.register_adapter`)."""
    _NAMES.add(name)


def known_adapters() -> frozenset[str]:
    return frozenset(_NAMES) | frozenset(PROVIDER_ADAPTERS)
