"""The HTTP host: the library the Lambda route handlers call (`service.Host`), request parsing and
typed error bodies (`http`), API keys and the Lambda authorizer (`keys`, `auth`), the buffered
run subscription (`sse`) and the per-container wiring (`runtime`).

Handlers in `functions/*/app.py` stay a few lines: parse, call `Host`, map the result."""
