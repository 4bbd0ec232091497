"""GET /v1/threads/{thread_id}/runs/{run_id}/events, streamed: the ASGI app uvicorn serves behind
the AWS Lambda Web Adapter (run.sh). The library's Host is built on the first request."""

from __future__ import annotations

from threads_aws.host.stream_app import StreamApp

app = StreamApp()
