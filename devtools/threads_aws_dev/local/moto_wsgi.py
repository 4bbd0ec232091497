"""moto's threaded werkzeug server with a WSGI front of ours (what `moto.server.ThreadedMotoServer`
does, but it takes no middleware): the state journal (`persist_moto.DurableMoto`) and the IAM
checks (`iam.MotoServer`) each put their app in front of moto's dispatcher."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


def moto_app() -> Any:
    """moto's own WSGI app: every service, dispatched by host and signature."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    return DomainDispatcherApplication(create_backend_app)


class WsgiServer:
    """`app` served on host:port (0: any free port) by moto's request handler, in a daemon thread."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host, self.port = host, port
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def serve(self, app: Callable[..., Any]) -> None:
        from moto.moto_server.werkzeug_app import MotoRequestHandler
        from werkzeug.serving import make_server

        self._server = make_server(
            self.host, self.port, app, threaded=True, request_handler=MotoRequestHandler
        )
        self._thread = threading.Thread(target=self._server.serve_forever, name="moto", daemon=True)
        self._thread.start()

    def get_host_and_port(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
