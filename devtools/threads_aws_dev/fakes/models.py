"""A local HTTP fake of the three model APIs (dev and tests only; never in the Lambda path),
written from their public references and reached through the SDKs' base-URL variables:

    ANTHROPIC_BASE_URL=http://127.0.0.1:PORT            POST /v1/messages
    OPENAI_BASE_URL=http://127.0.0.1:PORT/v1            POST /v1/responses, /v1/chat/completions
    AWS_ENDPOINT_URL_BEDROCK_RUNTIME=http://127.0.0.1:PORT
                                                        POST /model/{id}/converse[-stream]

Run it: `python -m threads_aws_dev.fakes.models --port 8788`. Streams are real: SSE for Anthropic
and OpenAI, AWS event-stream frames for Bedrock, sent with chunked transfer encoding (so a
dropped connection is a transport error to the client, as it is in production).

The "model" inside is tiny and deterministic: when the conversation ends with a tool result it
answers `The tool said: <result text>`; when the last user text mentions the time it calls the
`time` tool (`{}`); anything else → `You said: "<text>"`. Usage is bytes/4 of the request, and
the declared prefix (system + tools) reports a cache write the first time and a cache read
after (for Anthropic `cache_control` / Bedrock `cachePoint`; OpenAI caches by itself).

Failure modes, queued per provider (`*` = any) and consumed one per request:
`POST /_fake/fail {"provider","mode","times"?=1,"retry_after_s"?}` with mode
`rate_limited` (429 + retry-after), `overloaded` (529 Anthropic, 503 elsewhere), `server_error`
(500), `prompt_too_long` (each provider's 400), `drop` (a 200 stream cut mid-way), `hang`
(an OpenAI Responses stream that starts, then holds the connection silent for
`FakeState.hang_s`: the client dies with the answer in flight). `GET /_fake/requests` lists the
bodies received (the billed requests); `POST /_fake/reset` clears both. OpenAI's stored
responses: `GET /v1/responses/{id}`.

This module routes and serves; each API is its own module (`anthropic_messages`, `openai_api`,
`bedrock_converse`) over what they share (`model_base`: the model, failures, HTTP plumbing).
"""

from __future__ import annotations

import argparse
import json
import re
import threading
from http.server import ThreadingHTTPServer

from . import anthropic_messages, bedrock_converse, openai_api
from .model_base import Failure, FakeHandler, FakeState

__all__ = ["Failure", "FakeServer", "FakeState", "Handler", "main"]

FAILURE_BODIES = {
    "anthropic": anthropic_messages.failure_body,
    "openai": openai_api.failure_body,
    "bedrock": bedrock_converse.failure_body,
}


class Handler(FakeHandler):
    def do_GET(self) -> None:  # noqa: N802
        m = re.fullmatch(r"/v1/responses/([A-Za-z0-9_.-]+)", self.path.split("?", 1)[0])
        if self.path == "/_fake/requests":
            with self.server.state.lock:
                self.send_json(200, {"requests": list(self.server.state.requests)})
        elif m:
            openai_api.retrieve(self, m.group(1))
        else:
            self.send_json(404, {"message": "not found"})

    def do_POST(self) -> None:  # noqa: N802
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = self.path.split("?", 1)[0]
        st = self.server.state
        if path == "/_fake/fail":
            spec = json.loads(raw)
            with st.lock:
                st.failures.append(
                    Failure(
                        spec.get("provider", "*"),
                        spec["mode"],
                        int(spec.get("times", 1)),
                        spec.get("retry_after_s"),
                    )
                )
            return self.send_json(200, {"ok": True})
        if path == "/_fake/reset":
            with st.lock:
                st.failures.clear()
                st.requests.clear()
                st.prefixes.clear()
                st.stored.clear()
                st.retrievals.clear()
            return self.send_json(200, {"ok": True})
        body = json.loads(raw or b"{}")
        m = re.fullmatch(r"/model/(.+)/(converse|converse-stream)", path)
        if path == "/v1/messages":
            provider = "anthropic"
        elif path in ("/v1/responses", "/v1/chat/completions"):
            provider = "openai"
        elif m:
            provider = "bedrock"
        else:
            return self.send_json(404, {"message": f"no route {path}"})
        with st.lock:
            # the signature too: which credentials signed a Bedrock request (dev --real-bedrock)
            auth = self.headers.get("Authorization", "")
            st.requests.append({"body": body, "path": path, "provider": provider, "authorization": auth})
        failure = st.take_failure(provider)
        if failure is not None and failure.mode not in ("drop", "hang"):
            return self._fail(provider, failure)
        drop = failure is not None and failure.mode == "drop"
        hang = failure is not None and failure.mode == "hang"
        if provider == "anthropic":
            anthropic_messages.messages(self, body, raw, drop)
        elif path == "/v1/responses":
            openai_api.responses(self, body, raw, drop, hang)
        elif path == "/v1/chat/completions":
            openai_api.chat(self, body, raw, drop)
        else:
            assert m is not None
            bedrock_converse.converse(self, body, raw, m.group(2) == "converse-stream", drop)

    def _fail(self, provider: str, f: Failure) -> None:
        hs = {"retry-after": str(f.retry_after_s)} if f.retry_after_s is not None else {}
        status, value = FAILURE_BODIES[provider](f.mode)
        if provider == "bedrock":
            hs["x-amzn-ErrorType"] = value["__type"]
        self.send_json(status, value, hs)


class FakeServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__((host, port), Handler)
        self.state = FakeState()
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def env(self) -> dict[str, str]:
        """The variables that point each SDK here (with dummy keys)."""
        return {
            "ANTHROPIC_API_KEY": "sk-ant-fake",
            "ANTHROPIC_BASE_URL": self.url,
            "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": self.url,
            "OPENAI_API_KEY": "sk-fake",
            "OPENAI_BASE_URL": self.url + "/v1",
        }

    def fail(self, provider: str, mode: str, times: int = 1, retry_after_s: float | None = None) -> None:
        with self.state.lock:
            self.state.failures.append(Failure(provider, mode, times, retry_after_s))

    def start(self) -> FakeServer:
        self._thread = threading.Thread(target=self.serve_forever, name="fake-models", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=8788)
    args = ap.parse_args(argv)
    server = FakeServer(port=args.port)
    print(f"ready {server.url}", flush=True)
    for k, v in server.env().items():
        print(f"export {k}={v}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
