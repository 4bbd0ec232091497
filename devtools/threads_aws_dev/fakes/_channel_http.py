"""Shared plumbing of the channel fakes (Slack, WhatsApp): a threaded loopback HTTP server
with a queue of injected failures and a record of what it was sent, and ``Signed``, a webhook
request as a provider would send it.

Failure modes, queued per API method (``*`` = any) and consumed one per matching request:
- ``status:<code>`` (answer that HTTP status with the provider's error body),
- ``error:<code>`` (the provider's error document, e.g. Slack ``ok: false``),
- ``ratelimited`` (429 with ``Retry-After``),
- ``hang`` (ACT on the request, then answer only after ``hang_s``: the client times out and
  does not know the outcome), ``drop`` (act, then close the connection without an answer).
Control over HTTP too, for a fake run as its own process: ``POST /_fake/fail {method, mode,
times?, retry_after_s?}``, ``GET /_fake/requests``, ``POST /_fake/reset``.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit


@dataclass(frozen=True)
class Signed:
    """A signed webhook request: the exact bytes and the headers a provider would send."""

    body: bytes
    headers: dict[str, str]
    query: dict[str, str] = field(default_factory=dict)
    method: str = "POST"

    def request(self) -> Any:
        """As the route's ``WebhookRequest``."""
        from threads_aws.channels.model import WebhookRequest

        return WebhookRequest(method=self.method, body=self.body, headers=self.headers, query=self.query)


@dataclass
class Failure:
    method: str
    mode: str
    times: int = 1
    retry_after_s: float = 1.0


@dataclass
class Incoming:
    method: str  # HTTP method
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # lower-cased
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None

    def form(self) -> dict[str, str]:
        return dict(parse_qsl(self.body.decode(), keep_blank_values=True))


@dataclass
class Answer:
    status: int
    doc: Any
    headers: dict[str, str] = field(default_factory=dict)


class FakeServer:
    """Subclasses implement ``handle(incoming) -> Answer`` and ``api_method(incoming)``."""

    hang_s = 3.0

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.lock = threading.RLock()
        self.failures: list[Failure] = []
        self.requests: list[Incoming] = []
        self._server = ThreadingHTTPServer((host, port), self._handler_class())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeServer:
        self._thread = threading.Thread(
            target=self._server.serve_forever, name=type(self).__name__, daemon=True
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in the calling thread (``python -m threads_aws_dev.fakes.<name>``)."""
        self._server.serve_forever()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- failures --------------------------------------------------------------------------------

    def fail(self, method: str, mode: str, *, times: int = 1, retry_after_s: float = 1.0) -> None:
        with self.lock:
            self.failures.append(Failure(method, mode, times, retry_after_s))

    def take_failure(self, method: str) -> Failure | None:
        with self.lock:
            for f in self.failures:
                if f.method in (method, "*"):
                    f.times -= 1
                    if f.times <= 0:
                        self.failures.remove(f)
                    return f
        return None

    def reset(self) -> None:
        with self.lock:
            self.failures.clear()
            self.requests.clear()
            self.reset_state()

    # -- subclass hooks --------------------------------------------------------------------------

    def reset_state(self) -> None:
        pass

    def api_method(self, incoming: Incoming) -> str:
        return incoming.path

    def handle(self, incoming: Incoming, failure: Failure | None) -> Answer:
        raise NotImplementedError

    # -- HTTP ------------------------------------------------------------------------------------

    def _control(self, incoming: Incoming) -> Answer | None:
        if incoming.path == "/_fake/fail" and incoming.method == "POST":
            doc = incoming.json() or {}
            self.fail(
                doc.get("method", "*"),
                doc["mode"],
                times=int(doc.get("times", 1)),
                retry_after_s=float(doc.get("retry_after_s", 1.0)),
            )
            return Answer(200, {"ok": True})
        if incoming.path == "/_fake/requests":
            with self.lock:
                reqs = [
                    {
                        "method": r.method,
                        "path": r.path,
                        "query": r.query,
                        "body": r.body.decode("utf-8", "replace"),
                    }
                    for r in self.requests
                ]
            return Answer(200, reqs)
        if incoming.path == "/_fake/reset" and incoming.method == "POST":
            self.reset()
            return Answer(200, {"ok": True})
        return None

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _serve(self) -> None:
                parts = urlsplit(self.path)
                size = int(self.headers.get("Content-Length") or 0)
                incoming = Incoming(
                    method=self.command,
                    path=parts.path,
                    query=dict(parse_qsl(parts.query, keep_blank_values=True)),
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=self.rfile.read(size) if size else b"",
                )
                answer = fake._control(incoming)
                failure = None
                if answer is None:
                    with fake.lock:
                        fake.requests.append(incoming)
                    failure = fake.take_failure(fake.api_method(incoming))
                    answer = fake.handle(incoming, failure)
                if failure is not None and failure.mode == "drop":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if failure is not None and failure.mode == "hang":
                    threading.Event().wait(fake.hang_s)
                self._send(answer)

            def _send(self, answer: Answer) -> None:
                data = json.dumps(answer.doc).encode()
                try:
                    self.send_response(answer.status)
                    self.send_header("Content-Type", "application/json; charset=utf-8")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in answer.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up (hang): nothing to answer
                    self.close_connection = True

            do_GET = _serve
            do_POST = _serve

        return Handler


def json_or_form(incoming: Incoming, json_fields: tuple[str, ...] = ()) -> dict[str, Any]:
    """Arguments of a Web-API-style call: a JSON body, or a form/query whose listed fields hold
    JSON text (Slack's ``blocks`` and ``metadata`` in form posts)."""
    ctype = incoming.headers.get("content-type", "")
    if "application/json" in ctype:
        doc = incoming.json()
        return doc if isinstance(doc, dict) else {}
    args: dict[str, Any] = dict(incoming.query)
    if incoming.body:
        args.update(incoming.form())
    for f in json_fields:
        if isinstance(args.get(f), str):
            try:
                args[f] = json.loads(args[f])
            except ValueError:
                pass
    return args


Clock = Callable[[], int]  # epoch ms
