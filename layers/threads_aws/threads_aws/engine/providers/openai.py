"""OpenAI adapter (official `openai` SDK), `adapter: {name: openai, version: "1", settings: {api}}`.

Two wire flavours, picked by `adapter.settings.api` (part of line 0, so pinned in the log):
- `responses` (default): the Responses API, stateless (`store: false`, the whole input every
  time, as Render v1 renders it). It is the only OpenAI API that returns reasoning as items
  that can be sent back (`include: ["reasoning.encrypted_content"]`, asked for when
  model_params has `reasoning_effort` or settings `encrypted_reasoning: true`), which is what
  `reasoning_carryover: keep` needs across tool calls. It has no stop sequences.
- `chat`: Chat Completions, for OpenAI-compatible gateways behind OPENAI_BASE_URL (vLLM,
  Ollama, LiteLLM proxies, ...) that don't speak Responses. Reasoning can't be carried (a
  reasoning part in the history is continuation_unsupported), tool results are text only.

Recovery (`settings.recover: true`, Responses only; `engine.recovery`): the request goes out
`store: true, background: true` with `metadata.client_request_id = <branch_id>:<request event
id>`, and the id OpenAI assigns (the stream's `response.created`) is handed to `on_accepted` as
soon as it arrives. A background response keeps running at OpenAI when the worker dies; `recover`
fetches it with `GET /v1/responses/{id}` (waiting up to `recover_wait_s` while it is queued or in
progress), checks its metadata names this request, and reads it as a live answer. Stored
responses are kept by OpenAI (30 days), so this is opt-in per agent, never the default.

Both: SDK retries off (`max_retries=0`), explicit timeouts, streaming by default with text and
reasoning-summary deltas handed to `on_delta`; OpenAI caches prompt prefixes by itself (line 0
renders first, so the prefix is stable). Usage: OpenAI's input count includes cached tokens, the
contract's excludes them: input_tokens = input - cached, cache_read_tokens = cached (absent when
the endpoint reports no cached count: then it has no such category), reasoning_tokens as reported.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

from ..models import ArtifactAccess, DeltaCallback, ModelError, ModelResult
from ..recovery import RECOVERED, UNKNOWN, Recovery
from . import common
from .common import Blobs, Conversation, unsupported
from .keys import api_key
from .openai_chat import _chat, build_chat, read_chat
from .openai_common import PROVIDER
from .openai_responses import DONE, TERMINAL, _responses, _settled, build_responses, read_response

RECOVER_WAIT_S = 60.0

_clients: dict[tuple[str, str | None, float], Any] = {}
_lock = threading.Lock()


def _client(key: str, base_url: str | None, timeout_s: float) -> Any:
    with _lock:
        c = _clients.get((key, base_url, timeout_s))
        if c is None:
            import httpx2
            import openai

            c = openai.OpenAI(
                api_key=key, base_url=base_url, max_retries=0, timeout=httpx2.Timeout(timeout_s, connect=10.0)
            )
            _clients[(key, base_url, timeout_s)] = c
        return c


class OpenAIAdapter:
    def __init__(self, client: Any = None) -> None:
        self.client = client  # tests pass an SDK client built on an httpx MockTransport
        self._prepared: tuple[bytes, Conversation, Blobs, str, dict[str, Any]] | None = None

    def preflight(self, request: bytes, artifacts: ArtifactAccess | None = None) -> None:
        """The capability pre-check, before the request is stored: build the Responses or Chat
        request (a part OpenAI can't take raises `unsupported`); `complete` sends it."""
        conv = common.parse_request(request)
        blobs = Blobs(artifacts)
        api = conv.settings.get("api", "responses")
        if api not in ("responses", "chat"):
            raise unsupported("model_error", f"openai adapter api {api!r} (responses|chat)")
        kwargs = build_responses(conv, blobs) if api == "responses" else build_chat(conv, blobs)
        self._prepared = (request, conv, blobs, api, kwargs)

    @staticmethod
    def recoverable(settings: dict[str, Any]) -> bool:
        """Answers can be looked up by id: the Responses API with `recover: true` (line 0)."""
        adapter = settings.get("adapter") or {}
        s = adapter.get("settings") if isinstance(adapter, dict) else None
        s = s if isinstance(s, dict) else {}
        return s.get("recover") is True and s.get("api", "responses") == "responses"

    def _sdk(self, conv: Conversation) -> Any:
        return self.client or _client(
            api_key(PROVIDER),
            os.environ.get("OPENAI_BASE_URL") or None,
            float(conv.settings.get("timeout_s", 300)),
        )

    def complete(
        self,
        request: bytes,
        *,
        settings: dict[str, Any],
        request_event_id: str,
        branch_id: str,
        artifacts: ArtifactAccess | None = None,
        on_delta: DeltaCallback | None = None,
        client_request_id: str | None = None,
        on_accepted: Callable[[str], None] | None = None,
    ) -> ModelResult:
        if self._prepared is None or self._prepared[0] != request:
            self.preflight(request, artifacts)
        assert self._prepared is not None
        _, conv, blobs, api, kwargs = self._prepared
        self._prepared = None
        client = self._sdk(conv)
        stream = conv.settings.get("stream", True) is not False
        model = str(conv.model.get("name"))
        if api == "responses" and conv.settings.get("recover") is True and client_request_id:
            kwargs = {**kwargs, "metadata": {"client_request_id": client_request_id}}
        try:
            if api == "responses":
                wait_s = float(conv.settings.get("timeout_s", 300))
                resp = _responses(client, kwargs, stream, on_delta, on_accepted, wait_s)
                return read_response(resp, request, blobs, model)
            return read_chat(_chat(client, kwargs, stream, on_delta), request)
        except ModelError:
            raise
        except Exception as exc:  # noqa: BLE001 - every SDK/transport failure is classified
            raise classify(exc) from exc

    def recover(
        self,
        provider_request_id: str,
        *,
        client_request_id: str,
        request: bytes,
        settings: dict[str, Any],
        artifacts: ArtifactAccess | None = None,
    ) -> Recovery:
        """The stored response of a request whose worker died (engine.recovery): recovered only
        when it is done and its metadata names this request; a 404 of an id OpenAI gave us is a
        deleted or expired response, not proof it was never sent (unknown)."""
        import openai

        conv = common.parse_request(request)
        client = self._sdk(conv)
        wait_s = float(conv.settings.get("recover_wait_s", RECOVER_WAIT_S))
        try:
            resp = _settled(client, provider_request_id, time.monotonic() + wait_s)
        except openai.NotFoundError:
            return Recovery(UNKNOWN)
        if (resp.get("metadata") or {}).get("client_request_id") != client_request_id:
            return Recovery(UNKNOWN)  # another request's response: never taken for this one
        if resp.get("status") not in DONE:
            if resp.get("status") not in TERMINAL:  # still running past the wait: stop its billing
                try:
                    client.responses.cancel(provider_request_id)
                except Exception:  # noqa: BLE001 - best effort; the attempt is unknown either way
                    pass
            return Recovery(UNKNOWN)
        result = read_response(resp, request, Blobs(artifacts), str(conv.model.get("name")))
        return Recovery(RECOVERED, result, provider_request_id)


def classify(exc: BaseException) -> ModelError:
    import openai

    if isinstance(exc, openai.APIStatusError):
        body = exc.body if isinstance(exc.body, dict) else {}
        err = body.get("error", body) if isinstance(body, dict) else {}
        err = err if isinstance(err, dict) else {}
        return common.classify_status(
            exc.status_code,
            headers=exc.response.headers,
            err_type=err.get("type"),
            err_code=err.get("code") or getattr(exc, "code", None),
            message=str(err.get("message") or exc),
        )
    if isinstance(exc, openai.APIError) and not isinstance(exc, openai.APIConnectionError):
        # an `error` event inside a 200 stream
        return common.classify_status(
            200, err_type=getattr(exc, "type", None), err_code=getattr(exc, "code", None), message=str(exc)
        )
    return common.classify_transport(exc)
