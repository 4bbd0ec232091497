"""The run stream function's ASGI app: `GET /v1/threads/{thread_id}/runs/{run_id}/events` as a
live SSE stream (`host.live`). A hand-rolled ASGI callable (one route; no framework in the
function's package), served by uvicorn behind the AWS Lambda Web Adapter in Lambda
(`functions/stream_run`: run.sh → `uvicorn main:app`), and mounted by the local gateway for
`threads-aws dev`, which emulates the adapter.

Request: the path as API Gateway passes it (no stage), the query, the headers. The principal is
the REQUEST authorizer's context, which the adapter forwards in the `x-amzn-request-context`
header (the proxy event's requestContext, as JSON); only the adapter reaches the app, and it sets
that header itself. The invocation's deadline comes from `x-amzn-lambda-context`.

Response: a failure found before streaming (no principal, an unknown run, another tenant's
thread) is the route's JSON error body with its status (`http.dispatch`, the same codes as the
window mode); otherwise 200 `text/event-stream`, and the subscription's frames as they come. The
subscription blocks (boto3), so it runs on its own thread and hands frames to the event loop; a
client that disconnects stops it at its next tick. Any other path or method is 404 (the
adapter's readiness check polls `GET /`; a 404 counts as ready).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import re
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson

from .live import LiveSettings, Options, Subscription, format_headers, options

log = logging.getLogger("threads_aws.host")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

# The adapter passes the event's path; a stage prefix is tolerated in case its HTTP library adds
# it (template.yaml sets AWS_LAMBDA_HTTP_IGNORE_STAGE_IN_PATH so it does not).
ROUTE = re.compile(r"(?:/[A-Za-z0-9_-]+)?/v1/threads/(?P<thread_id>[^/]+)/runs/(?P<run_id>[^/]+)/events")
# Spelled as the other handlers spell theirs (API Gateway passes the case through).
SSE_HEADERS = [
    (b"Content-Type", b"text/event-stream"),
    (b"Cache-Control", b"no-cache"),
    (b"X-Accel-Buffering", b"no"),
]


def request_context(headers: dict[str, str]) -> dict[str, Any]:
    """The proxy event's requestContext the adapter forwarded (authorizer context flattened, as
    API Gateway REST gives it; an HTTP API's `authorizer.lambda` is merged in)."""
    try:
        ctx = orjson.loads(headers.get("x-amzn-request-context", "{}"))
    except orjson.JSONDecodeError:
        return {}
    if not isinstance(ctx, dict):
        return {}
    auth = ctx.get("authorizer")
    if isinstance(auth, dict) and isinstance(auth.get("lambda"), dict):
        ctx["authorizer"] = {**auth["lambda"], **{k: v for k, v in auth.items() if k != "lambda"}}
    return ctx


def deadline_ms(headers: dict[str, str]) -> int | None:
    try:
        value = orjson.loads(headers.get("x-amzn-lambda-context", "{}")).get("deadline")
    except (orjson.JSONDecodeError, AttributeError):
        return None
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


class StreamApp:
    """`host` builds the container's Host on first use (default: `runtime.host`)."""

    def __init__(
        self, host: Callable[[], Any] | None = None, settings: Callable[[], LiveSettings] | None = None
    ) -> None:
        self._host = host
        self._settings = settings or LiveSettings.from_env
        self.opened = 0  # subscriptions served (tests)

    def host(self) -> Any:
        if self._host is None:
            from .runtime import host

            return host()
        return self._host()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return
        # The last value of a repeated header wins: the adapter adds its x-amzn-request-context
        # after the headers the client sent, so a client can never pose as another principal.
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        route = ROUTE.fullmatch(scope["path"])
        if route is None or scope["method"] not in ("GET", "HEAD"):
            await _json(send, 404, {"error": {"code": "not_found", "message": "no such route"}})
            return
        event = {
            "requestContext": request_context(headers),
            "pathParameters": route.groupdict(),
            "queryStringParameters": _query(scope.get("query_string", b"")),
            "headers": headers,
        }
        prepared = await asyncio.to_thread(self._prepare, event, deadline_ms(headers))
        if not isinstance(prepared, Subscription):
            await _json(send, int(prepared["statusCode"]), orjson.loads(prepared["body"]))
            return
        self.opened += 1
        extra = [(k.encode(), v.encode()) for k, v in format_headers(prepared.opts.format)]
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS + extra})
        if scope["method"] == "HEAD":
            await send({"type": "http.response.body", "body": b""})
            return
        await self._stream(prepared, receive, send)

    def _prepare(self, event: dict[str, Any], deadline: int | None) -> Subscription | dict[str, Any]:
        """The opened subscription, or the route's error response."""
        from .http import Request, dispatch
        from .routes import ROUTES

        codes, _ = ROUTES["subscribeRun"]
        host = self.host()

        def call(req: Request) -> dict[str, Any]:
            opts: Options = options(req.query, req.header("Last-Event-ID"))
            sub = Subscription(
                host,
                req.who(),
                req.thread_id,
                req.uuid_param("run_id") or "",
                opts,
                self._settings(),
                deadline_ms=deadline,
            )
            sub.open()
            return {"statusCode": 200, "subscription": sub}

        out = dispatch(event, codes, call)
        sub = out.get("subscription")
        return sub if isinstance(sub, Subscription) else out

    async def _stream(self, sub: Subscription, receive: Receive, send: Send) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()

        def produce() -> None:
            try:
                for chunk in sub.frames():
                    loop.call_soon_threadsafe(queue.put_nowait, chunk)
            except Exception:  # noqa: BLE001 - the client reconnects and resumes
                log.exception("run stream failed; ending it with a retry")
                loop.call_soon_threadsafe(queue.put_nowait, b"retry: %d\n\n" % sub.settings.retry_ms)
            finally:
                loop.call_soon_threadsafe(queue.put_nowait, None)

        # in this invocation's context (the local host signs its reads as the function, local.iam)
        producer = threading.Thread(
            target=contextvars.copy_context().run, args=(produce,), name="run-stream", daemon=True
        )
        producer.start()
        watcher = asyncio.ensure_future(_until_disconnect(receive))
        watcher.add_done_callback(lambda _: sub.stop())
        try:
            while (chunk := await queue.get()) is not None:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        except OSError:  # the client went away mid-write
            pass
        finally:
            sub.stop()
            watcher.cancel()
            await asyncio.to_thread(producer.join, 5)


async def _until_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _json(send: Send, status: int, body: Any) -> None:
    data = orjson.dumps(body)
    headers = [(b"Content-Type", b"application/json"), (b"Content-Length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


def _query(raw: bytes) -> dict[str, str]:
    from urllib.parse import parse_qsl

    return dict(parse_qsl(raw.decode("latin-1"), keep_blank_values=True))
