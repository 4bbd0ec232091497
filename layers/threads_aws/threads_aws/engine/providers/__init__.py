"""Provider adapters behind `engine.models.ModelAdapter`: Bedrock (boto3 Converse), Anthropic
(Messages API) and OpenAI (Responses or Chat Completions), each in its own module so the worker
imports only the SDK a step needs (`models.PROVIDER_ADAPTERS` names them; nothing imports this
package at module import time). `common` holds what they share: reading Render v1, resolving
artifact refs, call-id mapping, retry-after and usage helpers; `keys` the API keys."""
